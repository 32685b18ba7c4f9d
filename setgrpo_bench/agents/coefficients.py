"""Coefficient rules (DESIGN §7): a group's observed rewards → per-response training coefficients.

Every agent variant is one rule in ``COEFFICIENT_RULES``; the GRPO objective is shared. A rule is a
pure function of the valid rewards of one group (shape (G,)) and keyword parameters; it never sees
the true score. Zero-variance groups get all-zero coefficients and contribute nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import UnknownNameError

CoefficientRule = Callable[..., np.ndarray]


def grpo_coefficients(rewards: np.ndarray, *, std_floor: float = 0.05, eps: float = 1e-4, **_: float) -> np.ndarray:
    """GRPO (Shao et al. 2024, DeepSeekMath eq. 3): a_i = (r_i − mean(r)) / (max(std(r), floor) + ε).

    std is the unbiased group standard deviation (as in TRL). The floor keeps near-constant
    continuous scores (e.g. 0.70 vs 0.71) from being blown up into ±1 coefficients; exactly constant
    groups give zeros.

    >>> grpo_coefficients(np.array([1.0, 0.0]), std_floor=0.0, eps=0.0).round(4)
    array([ 0.7071, -0.7071])
    """
    rewards = np.asarray(rewards, dtype=float)
    if rewards.size < 2 or np.ptp(rewards) == 0:
        return np.zeros_like(rewards)
    centred = rewards - rewards.mean()
    return centred / (max(rewards.std(ddof=1), std_floor) + eps)


COEFFICIENT_RULES: dict[str, CoefficientRule] = {
    "grpo": grpo_coefficients,
}


def get_rule(name: str) -> CoefficientRule:
    if name not in COEFFICIENT_RULES:
        raise UnknownNameError("coefficient rule", name, COEFFICIENT_RULES)
    return COEFFICIENT_RULES[name]


def group_coefficients(rule: str, rewards: np.ndarray, **params: float) -> np.ndarray:
    """Apply ``rule`` to one group whose invalid grades are NaN: the rule sees the valid rewards only,
    invalid responses get coefficient 0; fewer than two valid responses → all zeros."""
    rewards = np.asarray(rewards, dtype=float)
    valid = ~np.isnan(rewards)
    out = np.zeros_like(rewards)
    if valid.sum() >= 2:
        out[valid] = get_rule(rule)(rewards[valid], **params)
    return out
