"""``diagnose --compare-geometry``: what a cheaper geometry changes in SetGRPO's decisions (DESIGN §8b).

The same sampled groups are decided twice per random split: with the exact K (the run's ``geometry``)
and with a candidate's K' computed on the same responses at the same parameters. Each side calibrates
its own (α_a, q, τ̂) on the split's window — D1 and D2 of ``window // 2`` groups each, as a training
step meets them — and decides the rest, held out. Per candidate, over every held-out (split, group):

  agreement         share of accept/reject decisions equal to the exact K's (the target: ≥ 0.95)
  lambda_delta      mean |λ*(K') − λ*(K)| over groups certifiable under both
  acceptance        share accepted (the exact K's own is its row)
  reversal          the certificate's reversal rate: accepted groups whose executed coefficients c'
                    oppose the reference update *under the exact K*, c'ᵀ K a* < 0, over accepted groups
  reversal_true     the same against the true-score coefficients a_true

Decisions are the agent's own functions (``agents.setgrpo``); only K differs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..agents import setgrpo as sm
from ..agents.config import SetGRPOSettings
from ..errors import ConfigError

EXACT = "exact"


def compare_geometries(samples: Sequence[Any], settings: SetGRPOSettings, *, repeats: int,
                       seed: int) -> list[dict[str, Any]]:
    """The statistics of the module docstring for every candidate in ``samples[i].alternatives``
    (name → K' of group i), the exact K's first. ``samples`` are ``diagnose.GroupSample``."""
    half = settings.window // 2
    if 2 * half >= len(samples):
        raise ConfigError("groups", len(samples), f"more than the window ({2 * half} groups)", "Sample more groups (--groups).")
    names = [EXACT, *samples[0].alternatives]
    views = {name: list(samples) if name == EXACT else [dataclasses.replace(s, gram=s.alternatives[name]) for s in samples]
             for name in names}
    deciders = {name: sm.RememberedDecisions() for name in names}
    totals = {name: dict.fromkeys(("decided", "agree", "accepted", "both", "lambda_delta", "reversed", "reversed_true"), 0.0)
              for name in names}
    rng = np.random.default_rng(seed)
    for _ in range(repeats):
        order = rng.permutation(len(samples))
        d1, d2, test = order[:half], order[half : 2 * half], order[2 * half :]
        decided = {name: _decide(views[name], d1, d2, test, settings, deciders[name]) for name in names}
        exact = decided[EXACT]
        for name, outcomes in decided.items():
            t = totals[name]
            for i, (decision, accepted), (exact_decision, exact_accepted) in zip(test, outcomes, exact):
                t["decided"] += 1
                t["agree"] += accepted == exact_accepted
                if decision.certifiable and exact_decision.certifiable:
                    t["both"] += 1
                    t["lambda_delta"] += abs(decision.score - exact_decision.score)
                if accepted:
                    group = samples[i]
                    c = sm.executed(decision, group.a_hat, settings.execute)
                    t["accepted"] += 1
                    t["reversed"] += sm.reversal(c, group.gram, group.a_ref)
                    t["reversed_true"] += sm.reversal(c, group.gram, group.a_true)
    return [{"geometry": name, "agreement": t["agree"] / t["decided"],
             "lambda_delta": t["lambda_delta"] / t["both"] if t["both"] else math.nan,
             "acceptance": t["accepted"] / t["decided"],
             "reversal": t["reversed"] / t["accepted"] if t["accepted"] else math.nan,
             "reversal_true": t["reversed_true"] / t["accepted"] if t["accepted"] else math.nan,
             "decisions": int(t["decided"])} for name, t in totals.items()]


def _decide(groups: Sequence[Any], d1: np.ndarray, d2: np.ndarray, test: np.ndarray, settings: SetGRPOSettings,
            decide: sm.RememberedDecisions) -> list[tuple[sm.GroupDecision, bool]]:
    """(decision, accepted) of each held-out group after calibrating on D1 and D2, as the agent would."""
    calibration = sm.calibrate(settings, [groups[i] for i in d1], [groups[i] for i in d2], decide=decide)
    out = []
    for i in test:
        g = groups[i]
        decision = decide(g.gram, g.a_hat, calibration.q * g.sigma, recovery=settings.recovery)
        out.append((decision, bool(decision.certifiable and decision.score >= calibration.tau)))
    return out

