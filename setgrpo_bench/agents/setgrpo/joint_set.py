"""(a) Joint reward set calibration (DESIGN §8a): a box around a group's observed coefficients whose
size is calibrated by split conformal prediction, so that it holds the reference coefficients with
probability ≥ 1 − α_a.

    σ_i = max(spread_i, floor) / (max(std(r̃), std_floor) + ε)       ``response_scales``
    s = max_i |â_i − a*_i| / σ_i                                     ``conformal_score``
    q = s_(k), k = ⌈(n + 1)(1 − α_a)⌉  (or the PAC rank with δ_a)    ``conformal_quantile``
    C = {a : |a_i − â_i| ≤ q σ_i ∀i, Σ_i a_i = 0}                     ``in_set``

a* ∈ C(q) exactly when s ≤ q, so the joint set's coverage is the coverage of one scalar quantile:
P(a* ∈ C) ≥ 1 − α_a under exchangeability (Vovk et al. 2005; Lei et al. 2018).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom

from ...errors import ConfigError


def check_level(name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ConfigError(name, value, "a number in (0, 1)")


def response_scales(
    rewards: np.ndarray, spreads: np.ndarray, *, std_floor: float = 0.05, eps: float = 1e-4, spread_floor: float = 0.01
) -> np.ndarray:
    """Per-response scales σ_i = max(spread_i, floor) / (max(std(r̃), std_floor) + ε), shape (G,).

    ``spreads`` is the judge's own standard-deviation estimate of each score (test-time
    information, never a*): a reward error of one spread moves â_i by about σ_i. The denominator is
    the one of ``grpo_coefficients``, so σ is on the scale of the coefficients.
    """
    rewards, spreads = np.asarray(rewards, float), np.asarray(spreads, float)
    scale = max(float(rewards.std(ddof=1)) if rewards.size > 1 else 0.0, std_floor) + eps
    return np.maximum(spreads, spread_floor) / scale


def conformal_score(a_hat: np.ndarray, a_ref: np.ndarray, sigma: np.ndarray) -> float:
    """Nonconformity of one calibration group: s = max_i |â_i − a*_i| / σ_i (DESIGN §8a).

    a* ∈ C(q) exactly when s ≤ q, so the joint set's coverage is the coverage of a scalar quantile.
    """
    return float(np.max(np.abs(np.asarray(a_hat) - np.asarray(a_ref)) / np.asarray(sigma)))


def conformal_rank(n: int, alpha_a: float) -> int:
    """Split-conformal rank k = ⌈(n + 1)(1 − α_a)⌉ (Vovk et al. 2005; Lei et al. 2018).

    With exchangeable, distinct scores, P(s_test ≤ s_(k)) = k/(n + 1) ∈ [1 − α_a, 1 − α_a + 1/(n+1)).
    """
    check_level("alpha_a", alpha_a)
    # the small guard keeps float error from bumping an exact integer (e.g. 90.00000000000001) up
    return math.ceil((n + 1) * (1 - alpha_a) - 1e-9)


def pac_rank(n: int, alpha_a: float, delta_a: float) -> int:
    """Training-conditional (PAC) rank: the smallest k with BinomCDF(k − 1; n, 1 − α_a) ≥ 1 − δ_a
    (Vovk 2012, Prop. 2a). The coverage of s_(k) is Beta(k, n + 1 − k); this k makes it ≥ 1 − α_a
    with probability ≥ 1 − δ_a over the calibration draw. Returns n + 1 when no k ≤ n suffices.
    """
    check_level("alpha_a", alpha_a)
    check_level("delta_a", delta_a)
    ks = np.arange(1, n + 1)
    ok = binom.cdf(ks - 1, n, 1 - alpha_a) >= 1 - delta_a
    return int(ks[ok][0]) if ok.any() else n + 1


def conformal_quantile(scores: np.ndarray, alpha_a: float, *, delta_a: float | None = None) -> float:
    """q = the k-th smallest calibration score (∞ when k > n): plain rank, or PAC rank with δ_a.

    >>> conformal_quantile(np.arange(1.0, 20.0), 0.1)   # n = 19, k = ⌈20·0.9⌉ = 18
    18.0
    """
    scores = np.sort(np.asarray(scores, dtype=float))
    n = scores.size
    k = conformal_rank(n, alpha_a) if delta_a is None else pac_rank(n, alpha_a, delta_a)
    return float(scores[k - 1]) if 1 <= k <= n else math.inf


def in_set(a: np.ndarray, a_hat: np.ndarray, rho: np.ndarray, *, tol: float = 1e-9) -> bool:
    """a ∈ C = {|a_i − â_i| ≤ ρ_i, Σ a_i = 0}."""
    a = np.asarray(a, float)
    return bool(np.all(np.abs(a - a_hat) <= rho + tol) and abs(a.sum()) <= tol * max(1.0, np.abs(a).sum()))
