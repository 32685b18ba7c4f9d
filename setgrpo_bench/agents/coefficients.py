"""Coefficient rules (DESIGN §7): a group's observed rewards → per-response training coefficients.

Every agent variant is one rule in ``COEFFICIENT_RULES``; the GRPO objective is shared. A rule is a
pure function of the valid rewards of one group (shape (G,)) and keyword parameters (a rule takes
the ones it needs and ignores the rest); it never sees the true score. Zero-variance groups get
all-zero coefficients and contribute nothing. A rule may return NaN for a response it leaves out of
the update (MC-GRPO's median rollout): it then does not count in the loss either.

Rules that assume binary rewards (``s_grpo``, ``noise_corrected``) apply to a rubric score through
its criteria: the score is a points-weighted mean of binary verdicts, so S-GRPO's flip rate is the
points-weighted mean of the judge's stated per-criterion error rates, and the backward correction
is applied to each verdict before the verdicts are scored.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

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


def dr_grpo_coefficients(rewards: np.ndarray, **_: float) -> np.ndarray:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", eq. 5): a_i = r_i − mean(r),
    no std division (which over-weights near-constant groups)."""
    rewards = np.asarray(rewards, dtype=float)
    if rewards.size < 2 or np.ptp(rewards) == 0:
        return np.zeros_like(rewards)
    return rewards - rewards.mean()


def mc_grpo_coefficients(rewards: np.ndarray, *, mad_eps: float = 1e-3, **_: float) -> np.ndarray:
    """MC-GRPO (median-centred GRPO): sample G + 1, a_i = (r_i − median(r)) / (MAD(r) + 10⁻³); the
    median rollout is left out (NaN) and the other non-zero coefficients are rescaled by
    G_total / #non-zero, so the update keeps its size. MAD = median |r − median(r)|."""
    rewards = np.asarray(rewards, dtype=float)
    if rewards.size < 2 or np.ptp(rewards) == 0:
        return np.zeros_like(rewards)
    median = float(np.median(rewards))
    mad = float(np.median(np.abs(rewards - median)))
    a = (rewards - median) / (mad + mad_eps)
    if rewards.size % 2 == 1:  # an odd group has a median rollout: leave exactly one out
        a[int(np.flatnonzero(rewards == median)[0])] = np.nan
    nonzero = np.isfinite(a) & (a != 0)
    if nonzero.any():
        a[nonzero] *= rewards.size / nonzero.sum()
    return a


def qae_coefficients(rewards: np.ndarray, *, qae_quantile: float = 0.4, qae_std: bool = False,
                     std_floor: float = 0.05, eps: float = 1e-4, **_: float) -> np.ndarray:
    """Quantile advantage estimation: baseline b = the K-quantile of the group (K = 0.4), a = r − b,
    optionally divided by the group std (``qae_std``). A quantile baseline below the mean gives
    asymmetric, exploration-friendly coefficients."""
    rewards = np.asarray(rewards, dtype=float)
    if rewards.size < 2 or np.ptp(rewards) == 0:
        return np.zeros_like(rewards)
    a = rewards - float(np.quantile(rewards, qae_quantile))
    return a / (max(rewards.std(ddof=1), std_floor) + eps) if qae_std else a


def gapo_coefficients(rewards: np.ndarray, *, eps: float = 1e-4, **_: float) -> np.ndarray:
    """GAPO (group-adaptive, outlier-robust centre): Q = median of the shortest window of sorted
    rewards that covers 50% of the group, a_i = (r_i − Q) / (√(Σ_j (r_j − Q)² / (G − 1)) + ε)."""
    rewards = np.asarray(rewards, dtype=float)
    if rewards.size < 2 or np.ptp(rewards) == 0:
        return np.zeros_like(rewards)
    ordered = np.sort(rewards)
    width = int(np.ceil(0.5 * rewards.size))
    spans = ordered[width - 1 :] - ordered[: rewards.size - width + 1]
    start = int(np.argmin(spans))
    centre = float(np.median(ordered[start : start + width]))
    scale = np.sqrt(((rewards - centre) ** 2).sum() / (rewards.size - 1))
    return (rewards - centre) / (scale + eps)


def s_grpo_coefficients(rewards: np.ndarray, *, flip_rate: float = 0.0, s_eps: float = 1e-6, **_: float) -> np.ndarray:
    """S-GRPO (noise-aware group weight for symmetric flip noise of rate p):
    t = clip((r̄ − p)/(1 − 2p), 0, 1), w = (1 − 2p)·t(1 − t) / (√(r̄(1 − r̄) + ε)·√(t(1 − t) + ε)),
    a = w·(r − r̄)/(σ + 10⁻⁸). Groups whose de-noised success rate t is near 0 or 1 are damped."""
    rewards = np.asarray(rewards, dtype=float)
    if rewards.size < 2 or np.ptp(rewards) == 0:
        return np.zeros_like(rewards)
    if not 0 <= flip_rate < 0.5:
        raise ValueError(f"flip_rate must be in [0, 0.5), got {flip_rate}")
    mean = float(np.clip(rewards.mean(), 0.0, 1.0))
    t = float(np.clip((mean - flip_rate) / (1 - 2 * flip_rate), 0.0, 1.0))
    weight = (1 - 2 * flip_rate) * t * (1 - t) / (np.sqrt(mean * (1 - mean) + s_eps) * np.sqrt(t * (1 - t) + s_eps))
    return weight * (rewards - rewards.mean()) / (rewards.std(ddof=1) + 1e-8)


def corrected_scores(verdicts: np.ndarray, points: np.ndarray, false_positive: np.ndarray,
                     false_negative: np.ndarray) -> np.ndarray:
    """Backward correction of flip noise (Natarajan et al. 2013), per criterion:
    v̂ = (v − ρ⁺)/(1 − ρ⁺ − ρ⁻) is unbiased for the true verdict (ρ⁺ = P(met | not met), ρ⁻ =
    P(not met | met)); the unclipped HealthBench score of v̂, shape verdicts.shape[:-1]."""
    v = np.asarray(verdicts, dtype=float)
    corrected = (v - false_positive) / (1.0 - false_positive - false_negative)
    return corrected @ points / points[points > 0].sum()


def noise_corrected_coefficients(rewards: np.ndarray, *, verdicts: np.ndarray, points: np.ndarray,
                                 false_positive: np.ndarray, false_negative: np.ndarray, **params: float) -> np.ndarray:
    """GRPO coefficients of the noise-corrected scores of the group's verdicts (``rewards`` only
    marks which responses are valid)."""
    return grpo_coefficients(corrected_scores(verdicts, points, false_positive, false_negative), **params)


COEFFICIENT_RULES: dict[str, CoefficientRule] = {
    "grpo": grpo_coefficients,
    "dr_grpo": dr_grpo_coefficients,
    "mc_grpo": mc_grpo_coefficients,
    "qae": qae_coefficients,
    "gapo": gapo_coefficients,
    "s_grpo": s_grpo_coefficients,
    "noise_corrected": noise_corrected_coefficients,
}
"""DAPO, RGRA, GRPO-Kavg and the oracle use ``grpo`` with their own loss, clip, grading or rewards."""


def coefficient_rules() -> dict[str, CoefficientRule]:
    """The built-in rules and those of installed plugins (``plugins``; a plugin's rule named like a
    built-in one is left out, with one warning)."""
    from .plugins import plugin_rules

    added = {}
    for name, (dist, rule) in plugin_rules().items():
        if name in COEFFICIENT_RULES:
            _warn_once(f"plugin {dist}: its coefficient rule {name!r} is not loaded: {name!r} is a built-in rule; "
                       f"rename it in {dist}")
        else:
            added[name] = rule
    return {**COEFFICIENT_RULES, **added}


@lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=3)


def get_rule(name: str) -> CoefficientRule:
    rules = coefficient_rules()
    if name not in rules:
        raise UnknownNameError("coefficient rule", name, rules)
    return rules[name]


def group_coefficients(rule: str, rewards: np.ndarray, per_response: Mapping[str, np.ndarray] | None = None,
                       **params: Any) -> np.ndarray:
    """Apply ``rule`` to one group whose invalid grades are NaN: the rule sees the valid rewards (and
    the valid rows of each ``per_response`` array) only; invalid responses get coefficient 0; fewer
    than two valid responses → all zeros. NaN entries of the result are responses the rule leaves out."""
    rewards = np.asarray(rewards, dtype=float)
    valid = ~np.isnan(rewards)
    out = np.zeros_like(rewards)
    if valid.sum() >= 2:
        rows = {k: np.asarray(v)[valid] for k, v in (per_response or {}).items()}
        out[valid] = get_rule(rule)(rewards[valid], **rows, **params)
    return out
