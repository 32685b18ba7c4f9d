"""The calibration window's records (DESIGN §8): each audited group as it was at its audit, and the
decisions of (a)+(b) on them remembered across steps (q recurs while the window changes by a few groups
a step)."""

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
