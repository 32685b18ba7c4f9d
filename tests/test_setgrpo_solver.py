"""The anchor's solver piece by piece (DESIGN §8b): BVLS finds the active bounds, the polish solves the
KKT system on them exactly and releases a bound held with the wrong multiplier sign, and the repair moves
a residual Σa onto coordinates with slack. BVLS alone is already accurate to about 1e-9 on random groups,
which hides the polish; here each piece starts from a point that only it can fix."""

import math

import numpy as np
import pytest

from setgrpo_bench.agents import setgrpo as sm
from setgrpo_bench.agents.setgrpo import recovery


def _group(seed, G=6):
    """A full-rank K and a set wide enough that some bounds of the anchor are active and some are not."""
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(G, G))
    a_hat = rng.normal(size=G)
    return F @ F.T, a_hat - a_hat.mean(), rng.uniform(0.3, 1.2, size=G)


def _active(a, low, high):
    span = high - low
    return (a - low) <= 1e-9 * span, (high - a) <= 1e-9 * span


def _anchors_with_free_and_bound_coordinates():
    out = []
    for seed in range(200):
        K, a_hat, rho = _group(seed)
        a0 = sm.anchor(K, a_hat, rho)
        at_low, at_high = _active(a0, a_hat - rho, a_hat + rho)
        free = ~(at_low | at_high)
        if 2 <= free.sum() <= len(a0) - 2:
            out.append((K, a_hat, rho, a0, free))
        if len(out) == 6:
            return out
    raise AssertionError("no random group has an anchor with both free and active bounds")


GROUPS = _anchors_with_free_and_bound_coordinates()


def _kkt_residual(K, a, low, high):
    """How far a is from optimal in min aᵀKa over C: the multipliers' sign at the bounds and the
    gradient's spread over the free coordinates (0 at the optimum)."""
    at_low, at_high = _active(a, low, high)
    free = ~(at_low | at_high)
    g = K @ a
    nu = -g[free].mean()
    spread = np.abs(g[free] + nu).max()
    wrong = max(np.max(-(g + nu)[at_low], initial=0.0), np.max((g + nu)[at_high], initial=0.0))
    return max(spread, wrong)


@pytest.mark.parametrize("index", range(len(GROUPS)))
def test_the_polish_solves_the_kkt_system_on_the_active_bounds(index):
    """From a rough point on the anchor's active bounds (free coordinates off by 1e-4, Σa = 0), the polish
    returns the anchor to round-off and no worse an energy."""
    K, a_hat, rho, a0, free = GROUPS[index]
    low, high = a_hat - rho, a_hat + rho
    rough = a0.copy()
    shift = 1e-4 * np.random.default_rng(index).normal(size=free.sum())
    rough[free] += shift - shift.mean()
    polished = recovery._polish(K, rough, low, high)
    assert np.abs(polished - a0).max() < 1e-10
    assert polished @ K @ polished <= rough @ K @ rough
    assert _kkt_residual(K, polished, low, high) < 1e-9 < _kkt_residual(K, rough, low, high)


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 1, 0]])
def test_the_polish_releases_the_bound_held_with_the_most_wrong_sign(order):
    """min a₀² + 2a₁² + 3a₂² over Σa = 0, −1 ≤ a ≤ 1, a₁ ≥ 0.2: the optimum holds a₁ at 0.2 and has
    a₀ = −0.15, a₂ = −0.05 (a₀ = 3a₂, a₀ + a₂ = −0.2). Started with a₀ and a₁ at their lower bounds, both
    multipliers have the wrong sign (3.4 and 2.0): releasing a₀'s, the larger, reaches the optimum; releasing
    a₁'s first would leave the box on the next solve."""
    K = np.diag([1.0, 2.0, 3.0])[np.ix_(order, order)]  # (and the same with the coordinates reversed)
    low, high = np.array([-1.0, 0.2, -1.0])[order], np.ones(3)
    polished = recovery._polish(K, np.array([-1.0, 0.2, 0.8])[order], low, high)
    assert np.allclose(polished, np.array([-0.15, 0.2, -0.05])[order], atol=1e-15)


def test_the_polish_may_release_as_many_bounds_as_coordinates():
    """Every coordinate starts at a bound, (−1, 0.2, 0.8) with a₂ ≤ 0.8: the polish releases a₂ (multiplier
    2.4), then a₀ (3.4), and only its third solve is the optimum (−0.15, 0.2, −0.05)."""
    K = np.diag([1.0, 2.0, 3.0])
    low, high = np.array([-1.0, 0.2, -1.0]), np.array([1.0, 1.0, 0.8])
    polished = recovery._polish(K, np.array([-1.0, 0.2, 0.8]), low, high)
    assert np.allclose(polished, [-0.15, 0.2, -0.05], atol=1e-15)


def test_the_polish_keeps_its_best_feasible_point_when_a_release_leaves_the_box():
    """The problem of the test above started at a₀ = −1 alone: the solve on that active set gives
    (−1, 0.6, 0.4); releasing a₀ then solves to 0, which breaks a₁ ≥ 0.2, so the polish stops there and
    returns (−1, 0.6, 0.4), the best point it visited (BVLS's own answer is never this far off)."""
    K = np.diag([1.0, 2.0, 3.0])
    low, high = np.array([-1.0, 0.2, -1.0]), np.ones(3)
    polished = recovery._polish(K, np.array([-1.0, 0.5, 0.5]), low, high)
    assert np.allclose(polished, [-1.0, 0.6, 0.4], atol=1e-15)


def test_the_polish_accepts_a_kkt_point_on_an_upper_bound():
    """The mirror image (a ↦ −a): a₁ ≤ −0.2 held at its upper bound, a₀ started at its upper bound 1."""
    K = np.diag([1.0, 2.0, 3.0])
    low, high = -np.ones(3), np.array([1.0, -0.2, 1.0])
    polished = recovery._polish(K, np.array([1.0, -0.2, -0.8]), low, high)
    assert np.allclose(polished, [0.15, -0.2, 0.05], atol=1e-15)


def test_the_psd_factor_reproduces_k_and_clips_round_off():
    rng = np.random.default_rng(0)
    F = rng.normal(size=(5, 3))
    K = F @ F.T
    B = recovery._psd_factor(K)
    assert np.allclose(B.T @ B, K, atol=1e-12)
    assert np.all(np.isfinite(recovery._psd_factor(K - 1e-13 * np.eye(5))))  # tiny negative eigenvalues


@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_the_anchor_does_not_depend_on_the_scale_of_k(scale):
    """argmin aᵀ(cK)a over C is argmin aᵀKa: the solver's weights and tolerances scale with K."""
    for seed in range(20):
        K, a_hat, rho = _group(seed)
        assert np.allclose(sm.anchor(scale * K, a_hat, rho), sm.anchor(K, a_hat, rho), atol=1e-8)


@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_lambda_star_and_the_decision_do_not_depend_on_scale(scale):
    """f scales with K (and with â, a0, ρ together, as s²), so λ* does not, and a decision does not
    depend on K's scale (certifiability compares a0ᵀKa0 with tr K)."""
    for seed in range(20):
        K, a_hat, rho = _group(seed, G=5)
        base = sm.decide_group(K, a_hat, 2 * rho)
        scaled = sm.decide_group(scale * K, a_hat, 2 * rho)
        assert scaled.certifiable == base.certifiable
        assert scaled.score == pytest.approx(base.score, abs=1e-8)
        a0 = sm.anchor(K, a_hat, 2 * rho)
        lam = sm.safe_recovery_ratio(K, a_hat, a0, 2 * rho)
        assert sm.safe_recovery_ratio(K, scale * a_hat, scale * a0, 2 * scale * rho) == pytest.approx(lam, abs=1e-8)


def test_certifiable_needs_energy_relative_to_the_trace():
    a0 = np.array([1.0, -1.0, 0.0, 0.0])
    assert not sm.is_certifiable(a0, np.zeros((4, 4)))  # no energy at all: not even at a zero threshold
    big, small = 1e3 * np.eye(4), 1e-3 * np.eye(4)  # traces 4e3 and 4e-3
    assert not sm.is_certifiable(np.sqrt(1e-7 / 2e3) * a0, big)  # energy 1e-7 < 1e-9 · 4e3
    assert sm.is_certifiable(np.sqrt(1e-5 / 2e3) * a0, big)  # energy 1e-5 > 4e-6
    assert sm.is_certifiable(np.sqrt(1e-10 / 2e-3) * a0, small)  # energy 1e-10 > 1e-9 · 4e-3


def test_a_boundary_safe_a_hat_recovers_fully_and_a_zero_radius_certifies_any_ratio():
    """0 ∈ C makes f(â) = 0 exactly: â is (only just) safe, λ* = 1 with no bisection. With ρ = 0 the
    set is â alone: nothing can oppose it, its certified radius ratio is ∞."""
    K, a_hat = np.eye(2), np.array([1.0, -1.0])
    assert sm.worst_case_alignment(a_hat, K, a_hat, np.ones(2)) == 0.0
    assert sm.safe_recovery_ratio(K, a_hat, a_hat, np.ones(2)) == 1.0
    assert sm.certified_radius_ratio(K, a_hat, np.zeros(2)) == math.inf


def test_a_safe_a_hat_is_executed_whole_even_when_twice_it_would_not_be():
    """λ* = 1.0 exactly whenever f(â) ≥ 0 — found among random groups where f(c(2)) < 0, so that a
    walk that looked past â would not return 1."""
    found = 0
    for seed in range(400):
        K, a_hat, rho = _group(seed, G=4)
        a0 = sm.anchor(K, a_hat, rho)
        f = lambda x: sm.worst_case_alignment(a0 + x * (a_hat - a0), K, a_hat, rho)
        if f(1.0) >= 0 > f(2.0):
            assert sm.safe_recovery_ratio(K, a_hat, a0, rho) == 1.0
            found += 1
    assert found >= 3


def test_an_unbounded_set_decides_nothing():
    decision = sm.decide_group(np.eye(3), np.array([1.0, -0.5, -0.5]), np.array([0.1, math.inf, 0.1]))
    assert decision.score == sm.UNCERTIFIABLE and decision.certifiable is False
    assert decision.coefficients.dtype == float and np.array_equal(decision.coefficients, np.zeros(3))


def test_the_repair_moves_the_residual_onto_the_slack_in_proportion():
    a, low, high = np.array([0.3, -0.2, -0.06]), np.array([0.1, -0.3, -0.06]), np.ones(3)
    assert np.allclose(recovery._repair_sum(a, low, high), [0.3 - 0.04 * 2 / 3, -0.2 - 0.04 / 3, -0.06], atol=1e-15)
    below = np.array([-0.3, 0.2, 0.06])  # Σ = −0.04: moved up, onto the room below each upper bound
    high = np.array([-0.1, 0.3, 0.06])
    assert np.allclose(recovery._repair_sum(below, -np.ones(3), high), [-0.3 + 0.04 * 2 / 3, 0.2 + 0.04 / 3, 0.06],
                       atol=1e-15)
    stuck = np.array([0.1, 0.2])
    assert recovery._repair_sum(stuck, stuck, np.ones(2)) is stuck  # no slack: nothing to move onto


def test_the_kkt_solve_by_hand():
    """min Σ_free a_i² with Σa = 0 and a_0 fixed at 1: a_free = −1/3 each, and the multiplier ν = 1/3
    (stationarity a_i + ν = 0)."""
    free = np.array([False, True, True, True])
    a, nu = recovery._kkt_solve(np.eye(4), free, np.array([1.0, 9.0, 9.0, 9.0]))
    assert np.allclose(a, [1.0, -1 / 3, -1 / 3, -1 / 3]) and nu == pytest.approx(1 / 3)
    weighted, nu = recovery._kkt_solve(np.diag([1.0, 1.0, 3.0]), np.array([False, True, True]), np.array([2.0, 0, 0]))
    assert np.allclose(weighted, [2.0, -1.5, -0.5]) and nu == pytest.approx(1.5)  # 1·a_1 = 3·a_2 = −ν
    assert a.dtype == float
    pinned, nu = recovery._kkt_solve(np.eye(2), np.zeros(2, bool), np.array([0.5, -0.5]))
    assert np.array_equal(pinned, [0.5, -0.5]) and nu == 0.0


@pytest.mark.parametrize("seed", range(8))
def test_lambda_star_is_the_root_of_the_worst_case_alignment_to_bisection_accuracy(seed):
    """40 halvings of [0, 1] locate λ* within 2⁻⁴⁰, from below (λ* is always safe): λ* + 2⁻⁴⁰ is not."""
    rng = np.random.default_rng(300 + seed)
    for _ in range(50):
        K, a_hat, rho = _group(int(rng.integers(1 << 30)), G=5)
        a0 = sm.anchor(K, a_hat, 2 * rho)
        lam = sm.safe_recovery_ratio(K, a_hat, a0, 2 * rho)
        if 0.05 < lam < 0.95:
            break
    else:
        pytest.skip("no group with an interior λ*")
    f = lambda x: sm.worst_case_alignment(a0 + x * (a_hat - a0), K, a_hat, 2 * rho)
    tol = 1e-10 * np.trace(K) * (np.abs(a_hat).sum() + 2 * rho.sum()) ** 2  # the round-off f may carry at a0
    assert f(lam) >= -tol and f(lam + 2.0**-40) < -tol
