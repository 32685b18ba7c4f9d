"""(b) Geometry-guided safe recovery (DESIGN §8b): the largest step from the safest member of C
towards the observed coefficients whose update still aligns with the update of every member of C.

    f(c) = min_{a∈C} cᵀKa = cᵀKâ − min_μ Σ_i ρ_i |(Kc)_i − μ|           ``worst_case_alignment``
    a0 = argmin_{a∈C} aᵀKa   (so f(a0) ≥ a0ᵀKa0 ≥ 0)                    ``anchor``
    λ* = max{λ ∈ [0, 1] : f(a0 + λ(â − a0)) ≥ 0}                        ``safe_recovery_ratio``
    c = a0 + λ*(â − a0), the group's score s = λ*                       ``decide_group``

K = ΦᵀΦ is the Gram matrix of the group's per-response gradients (G×G, PSD), ρ = qσ the radii of C.
A group whose anchor carries no energy cannot be certified (``is_certifiable``) and is never executed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear

UNCERTIFIABLE = -math.inf
"""Score of a group whose anchor has (numerically) zero energy: 0-like updates are in C, so no
direction can be certified; such a group is never executed (no threshold accepts it)."""


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """A minimiser μ of Σ_i w_i |v_i − μ| (w ≥ 0): the first sorted value whose cumulative weight
    reaches half the total."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(np.asarray(weights, float)[order])
    return float(np.asarray(values, float)[order][np.searchsorted(cumulative, 0.5 * cumulative[-1])])


def _dispersion(v: np.ndarray, rho: np.ndarray) -> float:
    """min_μ Σ ρ_i |v_i − μ| = −min_{|d|≤ρ, Σd=0} vᵀd (LP duality; μ is the ρ-weighted median)."""
    return float(rho @ np.abs(v - weighted_median(v, rho)))


def worst_case_alignment(c: np.ndarray, K: np.ndarray, a_hat: np.ndarray, rho: np.ndarray) -> float:
    """f(c) = min_{a∈C} cᵀKa = cᵀKâ − min_μ Σ_i ρ_i |v_i − μ|, v = Kc (DESIGN §8b).

    f(c) ≥ 0 means the update driven by c aligns (to first order) with the update of *every*
    candidate coefficient vector in C, hence with a* whenever a* ∈ C.
    """
    v = K @ c
    return float(v @ a_hat) - _dispersion(v, rho)


def _psd_factor(K: np.ndarray) -> np.ndarray:
    """B with BᵀB = K (negative eigenvalues from round-off clipped to 0)."""
    w, U = np.linalg.eigh(0.5 * (K + K.T))
    return np.sqrt(np.clip(w, 0.0, None))[:, None] * U.T


def anchor(K: np.ndarray, a_hat: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """a0 = argmin_{a∈C} aᵀKa, the lowest-energy coefficient vector of C (DESIGN §8b).

    Optimality gives a0ᵀK(a − a0) ≥ 0 for all a ∈ C, so f(a0) ≥ a0ᵀKa0 ≥ 0: a0 is always safe.
    Solved as bounded least squares min ‖Ba‖² over the box (scipy BVLS) with the equality
    Σa = 0 as a heavily weighted row, then polished exactly: with the bounds that BVLS found
    active held fixed, the equality-constrained KKT system of the free coordinates is solved.
    """
    a_hat, rho = np.asarray(a_hat, float), np.asarray(rho, float)
    G = a_hat.size
    low, high = a_hat - rho, a_hat + rho
    # a radius below the float spacing of â_i pins a_i = â_i as a zero one does (q = 0 under a noise-free
    # judge, or a reference equal to the judge up to rounding): such a bound is not an interval
    free = low < high
    if not free.any():
        return a_hat.copy()
    B = _psd_factor(K)
    weight = 1e4 * max(math.sqrt(max(np.trace(K), 0.0) / G), 1e-12)
    system = np.vstack([B, np.full((1, G), weight)])
    target = -system[:, ~free] @ a_hat[~free]
    a = a_hat.copy()
    a[free] = lsq_linear(system[:, free], target, bounds=(low[free], high[free]), method="bvls", tol=1e-14).x
    return _polish(K, a, low, high)


def _polish(K: np.ndarray, a: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Exact solution on the active set that BVLS found: the KKT system of the free coordinates
    (bounds held fixed, Σa = 0 with multiplier ν) is solved, and a bound whose multiplier has the
    wrong sign is released, until the KKT conditions hold. Falls back to the BVLS point with its
    residual Σa moved onto coordinates with slack."""
    best = _repair_sum(a, low, high)
    span = np.maximum(high - low, 1e-300)
    at_low, at_high = (a - low) <= 1e-9 * span, (high - a) <= 1e-9 * span
    scale = 1e-10 * max(float(np.trace(K)) * float(np.abs(high).sum() + np.abs(low).sum()), 1e-300)
    for _ in range(a.size + 1):
        free = ~(at_low | at_high)
        candidate, nu = _kkt_solve(K, free, np.where(at_low, low, high))
        if not (np.all(candidate >= low - 1e-12 * span) and np.all(candidate <= high + 1e-12 * span)):
            break
        candidate = np.clip(candidate, low, high)
        if abs(candidate.sum()) > 1e-9 * max(1.0, np.abs(candidate).sum()):
            break
        if candidate @ K @ candidate <= best @ K @ best:
            best = candidate
        multiplier = K @ candidate + nu  # ≥ 0 at a lower bound, ≤ 0 at an upper bound
        wrong = np.where(at_low, -multiplier, 0.0) + np.where(at_high, multiplier, 0.0)
        if wrong.max() <= scale:
            return candidate
        release = int(np.argmax(wrong))
        at_low[release] = at_high[release] = False
    return best


def _kkt_solve(K: np.ndarray, free: np.ndarray, fixed: np.ndarray) -> tuple[np.ndarray, float]:
    """min aᵀKa over the free coordinates with the others fixed and Σa = 0: (a, ν)."""
    a = np.where(free, 0.0, fixed)
    F = np.flatnonzero(free)
    if F.size == 0:
        return a, 0.0
    kkt = np.zeros((F.size + 1, F.size + 1))
    kkt[: F.size, : F.size] = K[np.ix_(F, F)]
    kkt[: F.size, F.size] = kkt[F.size, : F.size] = 1.0
    rhs = np.concatenate([-K[F][:, ~free] @ fixed[~free], [-fixed[~free].sum()]])
    solution = np.linalg.lstsq(kkt, rhs, rcond=None)[0]
    a[F] = solution[: F.size]
    return a, float(solution[F.size])


def _repair_sum(a: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Move the tiny residual Σa onto coordinates with slack, so that Σa = 0 exactly (to round-off)."""
    excess = a.sum()
    slack = (a - low) if excess > 0 else (high - a)
    if slack.sum() <= 0:
        return a
    return a - excess * slack / slack.sum()


def is_certifiable(a0: np.ndarray, K: np.ndarray, *, rel: float = 1e-9) -> bool:
    """A group is certifiable when its anchor carries energy: a0ᵀKa0 > rel · tr K (DESIGN §8b)."""
    return float(a0 @ K @ a0) > rel * max(float(np.trace(K)), 0.0)


def safe_recovery_ratio(
    K: np.ndarray, a_hat: np.ndarray, a0: np.ndarray, rho: np.ndarray, *, iterations: int = 40
) -> float:
    """λ* = max{λ ∈ [0, 1] : f(a0 + λ(â − a0)) ≥ 0} (DESIGN §8b).

    f(c(λ)) is concave in λ (linear minus a convex function of the linear map v = Kc(λ)) and
    f(c(0)) ≥ 0, so {λ : f ≥ 0} is an interval [0, λ*]: 1 when f(c(1)) ≥ 0, else bisection.
    ``tol`` absorbs the round-off of f at the anchor.
    """
    tol = 1e-10 * max(float(np.trace(K)) * float(np.abs(a_hat).sum() + rho.sum()) ** 2, 1e-300)
    f = lambda lam: worst_case_alignment(a0 + lam * (a_hat - a0), K, a_hat, rho)  # noqa: E731
    if f(1.0) >= -tol:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) >= -tol else (lo, mid)
    return lo


def certified_radius_ratio(K: np.ndarray, a_hat: np.ndarray, rho: np.ndarray) -> float:
    """âᵀKâ / min_μ Σ ρ_i |(Kâ)_i − μ|: ≥ 1 exactly when executing â itself is safe (f(â) ≥ 0).

    The score of the ``setgrpo-no-recovery`` ablation, which executes â; ∞ when the denominator is 0.
    """
    energy = float(a_hat @ K @ a_hat)
    spread = _dispersion(K @ a_hat, rho)
    return math.inf if spread <= 0 else energy / spread


@dataclass(frozen=True)
class GroupDecision:
    """The outcome of modules (a)+(b) for one group: its score, executed coefficients, anchor."""

    score: float
    coefficients: np.ndarray
    certifiable: bool


def decide_group(
    K: np.ndarray, a_hat: np.ndarray, rho: np.ndarray, *, recovery: bool = True
) -> GroupDecision:
    """Score s_g and executed coefficients c_g of one group.

    ``recovery=True`` (SetGRPO): s = λ*, c = c(λ*), or s = ``UNCERTIFIABLE`` when the anchor is.
    ``recovery=False`` (ablation): s = certified radius ratio, c = â.
    """
    a_hat, rho = np.asarray(a_hat, float), np.asarray(rho, float)
    if not np.all(np.isfinite(rho)):  # q = ∞: too few calibration groups, C is unbounded
        return GroupDecision(UNCERTIFIABLE, np.zeros_like(a_hat), False)
    if not recovery:
        return GroupDecision(certified_radius_ratio(K, a_hat, rho), a_hat, True)
    a0 = anchor(K, a_hat, rho)
    if not is_certifiable(a0, K):
        return GroupDecision(UNCERTIFIABLE, np.zeros_like(a_hat), False)
    lam = safe_recovery_ratio(K, a_hat, a0, rho)
    return GroupDecision(lam, a0 + lam * (a_hat - a0), True)


GroupDecider = Callable[..., GroupDecision]


def executed(decision: GroupDecision, a_hat: np.ndarray, execute: str) -> np.ndarray:
    """The coefficients an accepted group trains on: c(λ*) (``recovered``) or â itself (``original``,
    λ* then only gates)."""
    return decision.coefficients if execute == "recovered" else np.asarray(a_hat, float)
