"""The SetGRPO agent (DESIGN §8): the calibration window and the three modules per step.

Each step, with the window as it was before the step:
  q  = conformal quantile of the D1 scores at set level α_a          (a) joint reward set
  τ̂  = Learn-then-Test threshold on D2 under the same q              (c) risk gate
       (α_a fixed, or chosen with τ̂ inside the risk test over a grid of set levels)
  for every non-constant group: K from the live policy, C = box(â, qσ) ∩ {Σa = 0},
  s = λ*, c = c(λ*)                                                  (b) safe recovery
  accept when the group is certifiable and s ≥ τ̂; accepted groups train with the GRPO loss on c
  (``execute: recovered``) or on â itself (``execute: original``: λ* only gates).
Then (``update``) the step's audited groups enter the rolling window, alternately into D1 and D2
(disjoint halves); with ``drift_steps`` the gate tests the window at a level corrected for the policy's
drift since its groups were audited (``drift_corrected_level``). The agent computes nothing but these
formulas: the harness hands it the Gram matrices and the reference grades it asked for (``needs``).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import Any

import numpy as np

from ..base import Agent, Audits, Decision, Grams, GroupRecord, Groups, Needs
from ..coefficients import group_coefficients
from ..config import SetGRPOSettings
from .calibration import Calibration, calibrate, quantile, threshold
from .joint_set import in_set, response_scales
from .recovery import decide_group, executed
from .risk_gate import reversal
from .window import AuditedGroup, RememberedDecisions, drift_corrected_level


class SetGRPOAgent(Agent):
    """SetGRPO and its ablations (``calibrate``, ``recovery``, ``gate`` off; K = I via the geometry).

    >>> # agent = SetGRPOAgent(config.setgrpo, std_floor=config.coefficients.std_floor)
    >>> # needs = agent.needs(groups, rng); ...; decision = agent.decide(groups, grams, audits)
    """

    grams_cover_accepted = True  # K of every non-constant group, and only those are ever accepted

    def __init__(self, params: SetGRPOSettings, *, std_floor: float) -> None:
        self.params, self.std_floor = params, std_floor
        self.warmup_groups = params.warmup_groups
        self.window: deque[tuple[int, AuditedGroup]] = deque(maxlen=params.window)  # (fold, group)
        self.audits = 0
        self.step = 0  # updates seen: the warm-up's is step 0
        self._decide = RememberedDecisions()  # window groups are decided again at recurring radii
        self._observed: tuple[Groups, dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]] | None = None

    # ---------------------------------------------------------------- calibration
    def ages(self) -> np.ndarray:
        """How many steps ago each window group was audited (≥ 1: the window holds earlier steps' groups)."""
        return np.array([self.step - g.step for _, g in self.window])

    def gate_level(self, ages: np.ndarray) -> float:
        """The level α at which the window certifies τ̂, corrected for drift (``drift_corrected_level``)."""
        p = self.params
        if not p.drift_steps or not self.window:
            return p.alpha
        reversed_ = np.array([reversal(g.a_hat, g.gram, g.a_ref) for _, g in self.window])  # GRPO's own update
        return drift_corrected_level(p.alpha, ages, reversed_, recent=p.drift_steps)

    def fold(self, k: int) -> list[AuditedGroup]:
        """D1 (k = 0, for q) or D2 (k = 1, for τ̂)."""
        return [g for fold, g in self.window if fold == k]

    def quantile(self, alpha_a: float) -> float:
        """q from D1 at set level α_a (module a), or the fixed q of the ``no-calib`` ablation."""
        return quantile(self.params, self.fold(0), alpha_a)

    def threshold(self, q: float) -> float:
        """τ̂ (module c): −∞ without the gate, ∞ (accept nothing) while C is unbounded."""
        return threshold(self.params, self.fold(0), self.fold(1), q, decide=self._decide)

    def calibration(self, alpha: float | None = None) -> Calibration:
        """(α_a, q, τ̂) for this step from the window (``calibrate``), the gate at level ``alpha``
        (default: the setting's α)."""
        self._decide.keep([g.gram for _, g in self.window])
        p = self.params if alpha is None else dataclasses.replace(self.params, alpha=alpha)
        return calibrate(p, self.fold(0), self.fold(1), decide=self._decide)

    # ---------------------------------------------------------------- per group
    def observe(self, groups: Groups, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(valid mask, â, σ) of group b, or None when it is constant (excluded everywhere)."""
        p = self.params
        rewards = groups.rewards[b]
        valid = ~np.isnan(rewards)
        a_hat = group_coefficients("grpo", rewards, std_floor=self.std_floor)[valid]
        if not np.any(a_hat):
            return None
        sigma = response_scales(rewards[valid], groups.spreads[b][valid], std_floor=self.std_floor,
                                   spread_floor=p.spread_floor)
        return valid, a_hat, sigma

    def reference_coefficients(self, reference: np.ndarray, valid: np.ndarray) -> np.ndarray | None:
        """a* from the reference grades of a group, or None when the reference judge failed."""
        if np.isnan(reference[valid]).any():
            return None
        return group_coefficients("grpo", reference[valid], std_floor=self.std_floor)

    # ---------------------------------------------------------------- the step
    def observed(self, groups: Groups) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``observe`` of every non-constant group of a batch, computed once for the batch (``needs``,
        ``decide`` and ``update`` of one step read the same batch)."""
        if self._observed is None or self._observed[0] is not groups:
            self._observed = (groups, {b: o for b in range(groups.n_groups) if (o := self.observe(groups, b)) is not None})
        return self._observed[1]

    def needs(self, groups: Groups, rng: np.random.Generator, *, warmup: bool = False) -> Needs:
        """K of every non-constant group; audits of every one of them in the warm-up, else of
        ⌈audit_fraction · B⌉ of them drawn at random."""
        observed = {b: o[0] for b, o in self.observed(groups).items()}
        if warmup:
            return Needs(observed, tuple(observed))
        n = min(len(observed), math.ceil(self.params.audit_fraction * groups.n_groups))
        audited = rng.choice(sorted(observed), size=n, replace=False).tolist() if n else []
        return Needs(observed, tuple(sorted(audited)))

    def decide(self, groups: Groups, grams: Grams, audits: Audits) -> Decision:
        p = self.params
        ages = self.ages()
        level = self.gate_level(ages)
        calibration = self.calibration(level)
        q, tau = calibration.q, calibration.tau
        coef = np.zeros_like(groups.rewards)
        accepted = np.zeros(groups.rewards.shape, dtype=bool)
        records: list[GroupRecord] = []
        for b, (valid, a_hat, sigma) in self.observed(groups).items():
            rho = q * sigma
            d = decide_group(grams[b], a_hat, rho, recovery=p.recovery)
            take = d.certifiable and d.score >= tau
            trained = executed(d, a_hat, p.execute)
            if take:
                coef[b, valid] = trained
                accepted[b] = valid
            a_ref = self.reference_coefficients(audits[b], valid) if b in audits else None
            records.append(GroupRecord(b, valid, a_hat, sigma, rho, grams[b], trained, d.score,
                                       d.certifiable, take, a_ref))
        stats = {**self._stats(records, calibration, groups.n_groups), "alpha_gate": level,
                 # how old the calibration is: the mean age of the window's groups, in steps
                 "window_age": float(ages.mean()) if len(ages) else math.nan}
        return Decision(coef, accepted, stats, records)

    def update(self, groups: Groups, grams: Grams, audits: Audits) -> None:
        """Add the audited groups to the window, alternately to D1 and D2; the step ends."""
        observed = self.observed(groups)
        for b in sorted(b for b in audits if b in observed):
            valid, a_hat, sigma = observed[b]
            a_ref = self.reference_coefficients(audits[b], valid)
            if a_ref is not None:
                self.window.append((self.audits % 2, AuditedGroup(a_hat, a_ref, sigma, grams[b], self.step)))
                self.audits += 1
        self.step += 1

    def _stats(self, records: list[GroupRecord], calibration: Calibration, n_groups: int) -> dict[str, float]:
        """Per-step diagnostics w.r.t. the reference grader; audited groups of this step are out of
        sample for q and τ̂ (they join the window after the decisions)."""
        audited = [r for r in records if r.a_ref is not None]
        covered = [in_set(r.a_ref, r.a_hat, r.rho) for r in audited]
        reversed_ = [reversal(r.executed, r.gram, r.a_ref) for r in audited if r.accepted]
        certified = [r.score for r in records if r.certifiable]
        executed = sum(float(r.executed @ r.gram @ r.executed) for r in records if r.accepted)
        grpo = sum(float(r.a_hat @ r.gram @ r.a_hat) for r in records)
        n = max(len(records), 1)
        return {
            "q": calibration.q, "tau": calibration.tau, "alpha_a": calibration.alpha_a,
            "window_d1": float(len(self.fold(0))), "window_d2": float(len(self.fold(1))),
            "accepted_groups": sum(r.accepted for r in records) / n_groups,
            "acceptance_nonconstant": sum(r.accepted for r in records) / n,
            "uncertifiable": sum(not r.certifiable for r in records) / n,
            "score_mean": float(np.mean(certified)) if certified else math.nan,
            "coverage_ref": float(np.mean(covered)) if covered else math.nan,
            "reversal_ref": float(np.mean(reversed_)) if reversed_ else math.nan,
            "audited_groups": float(len(audited)),
            # integer counts, pooled over the run for honest rates (a mean of per-step rates over a
            # handful of groups over-weights steps with one such group)
            "n_nonconstant": len(records), "n_accepted": sum(r.accepted for r in records),
            "n_audited": len(audited), "n_covered_ref": int(sum(covered)),
            "n_audited_accepted": len(reversed_), "n_reversed_ref": int(sum(reversed_)),
            # how large the executed update is against GRPO's on the same groups: Σ cᵀKc / Σ âᵀKâ
            "energy_executed": executed, "energy_grpo": grpo,
        }

    def state_dict(self) -> dict[str, Any]:
        return {"window": [(fold, dataclasses.asdict(group)) for fold, group in self.window], "audits": self.audits,
                "step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.window = deque(((int(fold), AuditedGroup(**group)) for fold, group in state["window"]),
                            maxlen=self.params.window)
        self.audits = int(state["audits"])
        self.step = int(state.get("step", 0))  # a window saved before steps were kept: every group of age 0
