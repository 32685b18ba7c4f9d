"""Calibration from the window's two folds (DESIGN §8): D1 sets the set's size q (module a) and the
threshold grid, D2 certifies τ̂ (module c), so each guarantee rests on data the other step did not use.
With a grid of set levels, α_a is chosen with τ̂ inside the risk test (``calibrate_set_and_threshold``);
``calibrate`` applies a preset's settings, ablations included.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError
from ..config import SetGRPOSettings
from ..fields import parse_levels
from .joint_set import conformal_quantile, conformal_score
from .recovery import GroupDecider, decide_group
from .risk_gate import (
    acceptance_levels,
    calibrate_threshold,
    gate_trial,
    select_certified,
)
from .window import AuditedGroup


@dataclass(frozen=True)
class Calibration:
    """What the window certifies for the next step: the set level α_a, its radius multiplier q, the
    threshold τ̂, and how many D2 groups that pair accepts (−1: not counted)."""

    alpha_a: float
    q: float
    tau: float
    accepted_d2: int


def calibrate_set_and_threshold(
    d1: Sequence[AuditedGroup], d2: Sequence[AuditedGroup], alphas_a: Sequence[float], *, alpha: float,
    delta: float, levels: np.ndarray, delta_a: float | None = None, recovery: bool = True,
    decide: GroupDecider = decide_group, start: float = 0.0, execute: str = "recovered",
) -> Calibration:
    """(α_a, q, τ̂) chosen jointly inside the risk test (modules a and c).

    For each set level α_a of the grid, q(α_a) is the conformal quantile of D1's scores and
    ``gate_trial`` gives that level's family of thresholds; ``select_certified`` walks every family at
    δ/|A| and keeps the certified pair that accepts the most D2 groups (levels tried from the largest
    α_a, the smallest set, so ties keep it). Module (c)'s guarantee — P(E = 1 | accepted) ≤ α with
    probability ≥ 1 − δ — does not need C to cover a*; 1 − α_a is the coverage the chosen set promises
    w.r.t. the reference. With no pair certified, τ̂ = ∞ at the largest α_a (nothing is accepted).
    """
    if not len(alphas_a):
        raise ConfigError("alpha_a_grid", list(alphas_a), "at least one set level")
    scores = np.array([conformal_score(g.a_hat, g.a_ref, g.sigma) for g in d1])
    tried = [(a, q) for a in sorted(alphas_a, reverse=True) if math.isfinite(q := conformal_quantile(scores, a, delta_a=delta_a))]
    trials = [gate_trial(d1, d2, q, levels=levels, recovery=recovery, decide=decide, execute=execute) for _, q in tried]
    index, tau, accepted = select_certified(trials, alpha=alpha, delta=delta * len(trials) / len(alphas_a), start=start)
    if index < 0:
        largest = max(alphas_a)
        return Calibration(largest, conformal_quantile(scores, largest, delta_a=delta_a), math.inf, 0)
    return Calibration(tried[index][0], tried[index][1], tau, accepted)


def quantile(p: SetGRPOSettings, d1: Sequence[AuditedGroup], alpha_a: float) -> float:
    """q from D1 at set level α_a (module a), or the fixed q of the ``no-calib`` ablation."""
    if not p.calibrate:
        return p.fixed_q
    scores = [conformal_score(g.a_hat, g.a_ref, g.sigma) for g in d1]
    return conformal_quantile(np.array(scores), alpha_a, delta_a=p.delta_a or None)


def threshold(p: SetGRPOSettings, d1: Sequence[AuditedGroup], d2: Sequence[AuditedGroup], q: float, *,
              decide: GroupDecider = decide_group) -> float:
    """τ̂ (module c): −∞ without the gate, ∞ (accept nothing) while C is unbounded."""
    if not p.gate:
        return -math.inf
    if not math.isfinite(q):
        return math.inf
    return calibrate_threshold(d1, d2, q, alpha=p.alpha, delta=p.delta,
                                  levels=acceptance_levels(p.grid_start, p.grid_step), recovery=p.recovery,
                                  decide=decide, start=p.gate_start, execute=p.execute)


def calibrate(p: SetGRPOSettings, d1: Sequence[AuditedGroup], d2: Sequence[AuditedGroup], *,
              decide: GroupDecider = decide_group) -> Calibration:
    """(α_a, q, τ̂) from calibration folds D1 and D2: chosen jointly inside the risk test over
    ``alpha_a_grid``, or at the fixed α_a (also whenever there is no risk test or no calibration to
    choose by). The agent calibrates on its window; ``diagnose --compare`` on random splits."""
    grid = parse_levels(p.alpha_a_grid)
    if grid and p.calibrate and p.gate:
        return calibrate_set_and_threshold(
            d1, d2, grid, alpha=p.alpha, delta=p.delta, levels=acceptance_levels(p.grid_start, p.grid_step),
            delta_a=p.delta_a or None, recovery=p.recovery, decide=decide, start=p.gate_start, execute=p.execute)
    q = quantile(p, d1, p.alpha_a)
    return Calibration(p.alpha_a, q, threshold(p, d1, d2, q, decide=decide), -1)
