"""(c) Selective risk-gated optimisation (DESIGN §8c): a group's update is executed only when its score
reaches a threshold τ̂ certified by Learn-then-Test to keep the reversal rate of accepted groups ≤ α
with probability ≥ 1 − δ.

    grid τ_1 > τ_2 > …   D1's score quantiles at fixed acceptance levels      ``threshold_grid``
    E = 1{cᵀKa* < 0}     the executed update opposes the reference one        ``reversal``
    τ̂                    Learn-then-Test on D2 (p-values: ``ltt``; the walk:   ``ltt_threshold``
                         ``fixed_sequence``), or, over several set levels,    ``select_certified``
                         Bonferroni across their families
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .fixed_sequence import bonferroni, fixed_sequence
from .joint_set import check_level
from .ltt import binomial_p_value, min_testable_count
from .recovery import GroupDecider, decide_group, executed
from .window import AuditedGroup


def acceptance_levels(start: float = 0.10, step: float = 0.05) -> np.ndarray:
    """Acceptance fractions of the threshold grid, strict to permissive: 10%, 15%, …, 100%."""
    return np.round(np.arange(start, 1.0 + 1e-9, step), 10)


def threshold_grid(scores_d1: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """τ_1 > τ_2 > … : the D1 score quantiles that accept each fraction in ``levels`` of the
    (certifiable) D1 groups; duplicates merged. Fixed before D2 is looked at (DESIGN §8c)."""
    scores = np.sort(np.asarray(scores_d1, float))[::-1]
    if scores.size == 0:
        return np.empty(0)
    picks = np.ceil(np.asarray(levels) * scores.size - 1e-9).astype(int).clip(1, scores.size) - 1
    return np.unique(scores[picks])[::-1]


def reversal(c: np.ndarray, K: np.ndarray, a_ref: np.ndarray) -> bool:
    """Direction-reversal event E = 1{cᵀKa* < 0}: the executed update opposes the reference one."""
    return float(c @ K @ a_ref) < 0.0


def ltt_threshold(
    grid: np.ndarray, scores_d2: np.ndarray, events_d2: np.ndarray, *, alpha: float, delta: float,
    start: float = 0.0,
) -> float:
    """τ̂ by Learn-then-Test with fixed-sequence testing (Angelopoulos et al. 2021, §4; DESIGN §8c).

    For τ_j from strict to permissive: m_j = #{s ≥ τ_j}, k_j = #{E = 1, s ≥ τ_j} on D2 (``counts``),
    p_j = BinomCDF(k_j; m_j, α) (``ltt.binomial_p_value``). The walk starts at the first τ_j with
    m_j ≥ max(ln δ / ln(1 − α), ``start`` · |D2|) (``first_testable``), then rejects while p_j ≤ δ
    (``fixed_sequence``). Returns the last rejected (most permissive certified) threshold, or ∞ (accept
    nothing) when none is rejected. Guarantee: P(R(τ) ≤ α for every rejected τ) ≥ 1 − δ, simultaneously
    over the grid.
    """
    check_level("alpha", alpha)
    check_level("delta", delta)
    scores = np.asarray(scores_d2, float)
    found = counts(grid, scores, events_d2)
    first = first_testable([m for m, _ in found], max(min_testable_count(alpha, delta), start * scores.size))
    rejected = fixed_sequence([binomial_p_value(k, m, alpha) for m, k in found[first:]], delta)
    return float(grid[first + rejected - 1]) if rejected else math.inf


def counts(grid: np.ndarray, scores_d2: np.ndarray, events_d2: np.ndarray) -> list[tuple[int, int]]:
    """(m_j, k_j) per threshold: D2 groups accepted at τ_j, and the reversals among them."""
    scores, events = np.asarray(scores_d2, float), np.asarray(events_d2, bool)
    return [(int(kept.sum()), int((events & kept).sum())) for kept in (scores >= tau for tau in grid)]


def first_testable(accepted: list[int], floor: float) -> int:
    """The walk's start: the first threshold accepting at least ``floor`` D2 groups (``len`` when none
    does). Below ln δ / ln(1 − α) no count of reversals can reject; a walk that starts among a dozen
    groups stops at the first reversal it meets (``start`` = 0.5 starts where half of D2 is accepted:
    ``benchmarks/gate_power.py``). It depends on D2's scores only, never on its events, so the sequence
    is still fixed given the scores."""
    return next((j for j, m in enumerate(accepted) if m >= floor), len(accepted))


def gate_trial(
    d1: Sequence[AuditedGroup], d2: Sequence[AuditedGroup], q: float, *, levels: np.ndarray, recovery: bool = True,
    decide: GroupDecider = decide_group, execute: str = "recovered",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(grid, D2 scores, D2 events) of module (c) at radius multiplier q: the grid from D1's certifiable
    scores at ``levels``, the scores of D2's groups and their reversal events E = 1{cᵀKa* < 0} for
    what an accepted group would execute."""
    score = lambda g: decide(g.gram, g.a_hat, q * g.sigma, recovery=recovery)  # noqa: E731
    grid = threshold_grid(np.array([d.score for d in map(score, d1) if d.certifiable]), levels)
    decisions = [score(g) for g in d2]
    scores = np.array([d.score for d in decisions])
    events = np.array([reversal(executed(d, g.a_hat, execute), g.gram, g.a_ref) for d, g in zip(decisions, d2)],
                      dtype=bool)
    return grid, scores, events


def calibrate_threshold(
    d1: Sequence[AuditedGroup], d2: Sequence[AuditedGroup], q: float, *, alpha: float, delta: float,
    levels: np.ndarray, recovery: bool = True, decide: GroupDecider = decide_group, start: float = 0.0,
    execute: str = "recovered",
) -> float:
    """τ̂ of module (c) at radius multiplier q (DESIGN §8c).

    The grid is fixed on D1 alone (the score quantiles of D1's certifiable groups at ``levels``);
    Learn-then-Test then runs on D2 alone (``gate_trial``), so the threshold's risk certificate holds
    on data the grid never saw. ``decide`` is ``decide_group`` or a memoised equivalent (``diagnose``
    reuses decisions across repeated splits).
    """
    trial = gate_trial(d1, d2, q, levels=levels, recovery=recovery, decide=decide, execute=execute)
    return ltt_threshold(*trial, alpha=alpha, delta=delta, start=start)


def select_certified(trials: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], *, alpha: float, delta: float,
                     start: float = 0.0) -> tuple[int, float, int]:
    """(index, τ̂, D2 groups accepted) of the pair chosen among several families of thresholds, one
    family (grid, D2 scores, D2 events) per set level. Each family is walked at level δ/|families|, so by
    Bonferroni P(some certified pair has conditional risk > α) ≤ δ (Learn-then-Test, Angelopoulos et
    al. 2021, §4: any FWER-controlling procedure over the hypotheses H: R > α); every certified pair
    is safe at once, so picking the one that accepts the most D2 groups (the first on ties) keeps the
    guarantee. (−1, ∞, 0) when no pair is certified."""
    best = (-1, math.inf, 0)
    for index, (grid, scores, events) in enumerate(trials):
        tau = ltt_threshold(grid, scores, events, alpha=alpha, delta=bonferroni(delta, len(trials)), start=start)
        accepted = int((scores >= tau).sum())
        if math.isfinite(tau) and accepted > best[2]:
            best = (index, tau, accepted)
    return best
