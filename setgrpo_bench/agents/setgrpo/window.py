"""The calibration window's records (DESIGN §8): each audited group as it was at its audit, the level
that corrects the window for the policy's drift since, and the decisions of (a)+(b) on them
remembered across steps (q recurs while the window changes by a few groups a step)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .recovery import GroupDecision, decide_group


@dataclass(frozen=True)
class AuditedGroup:
    """One calibration group: observed â, reference a*, scales σ and Gram K at the time of its audit."""

    a_hat: np.ndarray
    a_ref: np.ndarray
    sigma: np.ndarray
    gram: np.ndarray
    step: int = 0  # the agent's step at its audit (0: the warm-up, or a window saved before steps were kept)


def drift_corrected_level(alpha: float, ages: np.ndarray, reversed_: np.ndarray, *, recent: int) -> float:
    """The level at which Learn-then-Test tests the window so that the gate keeps α for today's policy:
    α · r̂_window / r̂_recent when GRPO's own update reverses the reference's more often among the groups
    audited in the last ``recent`` steps (r̂_recent) than in the whole window (r̂_window), else α.

    Why: the window spans a moving policy, and under the learned judge the reversal of accepted groups
    rose with the window's age (docs/setgrpo.md, "Calibration under drift"). If the drift scales every
    threshold's risk by one factor, R_t(τ) = c_t·R(τ), the window's risk at τ is c̄·R(τ) with c̄ its
    groups' mean factor, so R_t(τ) ≤ α exactly when the window's risk is ≤ α·c̄/c_t; the un-gated reversal
    rates estimate c̄ and c_t (add-one smoothed). The recent rate lags c_t by about ``recent``/2 steps and
    is itself noisy, so the correction is not exact (tests/test_setgrpo_drift.py measures what remains);
    it never raises the level. ``recent`` = 0: α (the literal reading)."""
    ages, reversed_ = np.asarray(ages), np.asarray(reversed_, bool)
    fresh = ages <= recent  # ages are ≥ 1: the window holds groups of earlier steps
    if not fresh.any():
        return alpha
    rate = lambda part: (reversed_[part].sum() + 1) / (part.sum() + 2)  # noqa: E731
    return alpha * min(1.0, float(rate(np.ones_like(fresh)) / rate(fresh)))


class RememberedDecisions:
    """``decide_group`` with memory, a ``GroupDecider``: calibration decides the same groups again and
    again at radii that recur (q is an order statistic of a window that changes by a few groups a step,
    and repeated splits reuse groups). Keyed by the group's Gram matrix object and the radii; ``keep``
    forgets the groups that left."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, bytes, bool], tuple[np.ndarray, GroupDecision]] = {}

    def __call__(self, gram: np.ndarray, a_hat: np.ndarray, rho: np.ndarray, *, recovery: bool) -> GroupDecision:
        key = (id(gram), rho.tobytes(), recovery)
        hit = self._seen.get(key)
        if hit is not None and hit[0] is gram:  # the same object, not a new one at a reused address
            return hit[1]
        decision = decide_group(gram, a_hat, rho, recovery=recovery)
        self._seen[key] = (gram, decision)
        return decision

    def keep(self, grams: Sequence[np.ndarray]) -> None:
        """Forget every group but these."""
        alive = {id(g) for g in grams}
        self._seen = {k: v for k, v in self._seen.items() if k[0] in alive}

    def __len__(self) -> int:
        return len(self._seen)
