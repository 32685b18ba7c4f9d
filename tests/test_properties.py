"""Invariants that say more than examples (Hypothesis): the joint set grows with its radius and its
quantile with the coverage asked for, the recovery ratio lies in [0, 1] and its step is safe, the
Learn-then-Test threshold only loosens as δ grows, fixed-sequence testing stops at the first failure,
and a board's aggregates do not depend on the order of its benchmarks."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from setgrpo_bench.agents import setgrpo as sm
from setgrpo_bench.leaderboard.aggregate import aggregate_seeds

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False)


@st.composite
def groups(draw, size=st.integers(2, 6)):
    """(K, â, ρ): a PSD Gram matrix of per-response features, sum-zero coefficients, non-negative radii."""
    g = draw(size)
    features = draw(arrays(float, (draw(st.integers(1, 4)), g), elements=finite))
    a_hat = draw(arrays(float, g, elements=finite))
    a_hat = a_hat - a_hat.mean()
    rho = draw(arrays(float, g, elements=st.floats(0, 2, allow_nan=False)))
    return features.T @ features, a_hat, rho


@SETTINGS
@given(arrays(float, st.integers(2, 40), elements=st.floats(0, 10, allow_nan=False)),
       st.floats(0.01, 0.99), st.floats(0.01, 0.99))
def test_the_conformal_quantile_grows_with_the_coverage_asked_for(scores, a, b):
    low, high = sorted((a, b))  # α_a low asks for more coverage than α_a high
    assert sm.conformal_quantile(scores, low) >= sm.conformal_quantile(scores, high)
    k = sm.conformal_rank(len(scores), high)
    n = len(scores)  # k/(n + 1) is the smallest such fraction reaching 1 − α_a (up to rounding)
    assert (k - 1) / (n + 1) < 1 - high + 1e-9 and 1 - high <= k / (n + 1) + 1e-9


@SETTINGS
@given(groups(), arrays(float, 6, elements=finite), st.floats(0, 3), st.floats(0, 3))
def test_the_joint_set_only_grows_with_its_radius(group, reference, q1, q2):
    _, a_hat, sigma = group
    reference = reference[: a_hat.size] - reference[: a_hat.size].mean()
    small, large = sorted((q1, q2))
    inside_small = sm.in_set(reference, a_hat, small * (sigma + 0.1))
    assert not inside_small or sm.in_set(reference, a_hat, large * (sigma + 0.1))
    score = sm.conformal_score(a_hat, reference, sigma + 0.1)
    assert sm.in_set(reference, a_hat, (score + 1e-9) * (sigma + 0.1))  # a* ∈ C(q) exactly when s ≤ q


@SETTINGS
@given(groups())
def test_the_recovery_ratio_lies_in_zero_one_and_its_step_is_safe(group):
    K, a_hat, rho = group
    a0 = sm.anchor(K, a_hat, rho)
    assert sm.in_set(a0, a_hat, rho, tol=1e-6)
    scale = max(float(np.trace(K)), 1e-12) * (np.abs(a_hat).sum() + rho.sum() + 1) ** 2
    assert sm.worst_case_alignment(a0, K, a_hat, rho) >= -1e-7 * scale  # the anchor is always safe
    lam = sm.safe_recovery_ratio(K, a_hat, a0, rho)
    assert 0.0 <= lam <= 1.0
    assert sm.worst_case_alignment(a0 + lam * (a_hat - a0), K, a_hat, rho) >= -1e-7 * scale


@SETTINGS
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.floats(0, 1))
def test_fixed_sequence_rejects_exactly_the_leading_run_under_delta(p_values, delta):
    rejected = sm.fixed_sequence(p_values, delta)
    assert all(p <= delta for p in p_values[:rejected])
    assert rejected == len(p_values) or p_values[rejected] > delta


@SETTINGS
@given(st.integers(0, 60), st.integers(0, 60), st.floats(0.05, 0.5))
def test_the_binomial_p_value_grows_with_the_reversals(k, extra, alpha):
    m = k + extra
    assume(m >= 1)
    assert 0.0 <= sm.binomial_p_value(k, m, alpha) <= 1.0
    if k < m:
        assert sm.binomial_p_value(k + 1, m, alpha) >= sm.binomial_p_value(k, m, alpha)


@SETTINGS
@given(arrays(float, st.integers(20, 80), elements=st.floats(0, 1, allow_nan=False)), st.data(),
       st.floats(0.01, 0.2), st.floats(0.01, 0.2))
def test_the_ltt_threshold_only_loosens_as_delta_grows(scores, data, d1, d2):
    """With the walk's start fixed by ``start`` (it dominates ln δ / ln(1 − α) here), more tolerance
    rejects at least the hypotheses less tolerance rejects: τ̂(δ) is non-increasing in δ."""
    events = data.draw(arrays(bool, scores.size, elements=st.booleans()))
    grid = sm.threshold_grid(scores, sm.acceptance_levels(0.1, 0.1))
    low, high = sorted((d1, d2))
    assume(0.5 * scores.size >= sm.min_testable_count(0.3, low))
    strict = sm.ltt_threshold(grid, scores, events, alpha=0.3, delta=low, start=0.5)
    loose = sm.ltt_threshold(grid, scores, events, alpha=0.3, delta=high, start=0.5)
    assert loose <= strict


@SETTINGS
@given(arrays(float, (3, 5), elements=st.floats(0, 1, allow_nan=False)), st.permutations(range(5)))
def test_aggregates_do_not_depend_on_the_order_of_benchmarks(scores, order):
    names, domains = ["A", "B", "C", "D", "E"], ["x", "x", "y", "y", "z"]
    results, groups_, macro = aggregate_seeds(scores, scores, names, domains)
    shuffled = aggregate_seeds(scores[:, order], scores[:, order], [names[i] for i in order],
                               [domains[i] for i in order])
    for name, result in results.items():
        assert shuffled[0][name]["per_seed"] == result["per_seed"]
        assert shuffled[0][name]["true_score"] == pytest.approx(result["true_score"])
    for name in groups_:
        assert shuffled[1][name]["true_score"] == pytest.approx(groups_[name]["true_score"])
        assert shuffled[1][name]["true_score_se"] == pytest.approx(groups_[name]["true_score_se"])
    assert shuffled[2]["true_score"] == pytest.approx(macro["true_score"])
    assert shuffled[2]["true_score_se"] == pytest.approx(macro["true_score_se"])
    assert math.isfinite(macro["true_score_ci"][0]) and macro["true_score_ci"][0] <= macro["true_score"] + 1e-12
