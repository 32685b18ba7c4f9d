"""The anchor's solver piece by piece (DESIGN §8b): BVLS finds the active bounds, the polish solves the
KKT system on them exactly and releases a bound held with the wrong multiplier sign, and the repair moves
a residual Σa onto coordinates with slack. BVLS alone is already accurate to about 1e-9 on random groups,
which hides the polish; here each piece starts from a point that only it can fix."""

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


def test_the_polish_releases_the_bound_held_with_the_most_wrong_sign():
    """min a₀² + 2a₁² + 3a₂² over Σa = 0, −1 ≤ a ≤ 1, a₁ ≥ 0.2: the optimum holds a₁ at 0.2 and has
    a₀ = −0.15, a₂ = −0.05 (a₀ = 3a₂, a₀ + a₂ = −0.2). Started with a₀ and a₁ at their lower bounds, both
    multipliers have the wrong sign (3.4 and 2.0): releasing a₀'s, the larger, reaches the optimum; releasing
    a₁'s first would leave the box on the next solve."""
    K = np.diag([1.0, 2.0, 3.0])
    low, high = np.array([-1.0, 0.2, -1.0]), np.ones(3)
    polished = recovery._polish(K, np.array([-1.0, 0.2, 0.8]), low, high)
    assert np.allclose(polished, [-0.15, 0.2, -0.05], atol=1e-15)


def test_the_polish_falls_back_to_the_repaired_point_when_the_kkt_point_leaves_the_box():
    """K = diag(1, 1, 1, 100) with all but the last coordinate at a bound: releasing bounds would move
    coordinates outside the box, so the polish keeps its best feasible point, with Σa = 0."""
    K = np.diag([1.0, 1.0, 1.0, 100.0])
    low, high = np.array([0.0, 0.0, -1.0, -1.0]), np.array([1.0, 1.0, 0.0, 1.0])
    a = np.array([0.0, 0.0, 0.0, 1e-7])  # Σa = 1e-7: the repair moves it onto the slack of the last three
    polished = recovery._polish(K, a, low, high)
    assert abs(polished.sum()) < 1e-15 and np.all(polished >= low) and np.all(polished <= high)
    assert polished @ K @ polished <= a @ K @ a


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
    pinned, nu = recovery._kkt_solve(np.eye(2), np.zeros(2, bool), np.array([0.5, -0.5]))
    assert np.array_equal(pinned, [0.5, -0.5]) and nu == 0.0


@pytest.mark.parametrize("seed", range(8))
def test_lambda_star_is_the_root_of_the_worst_case_alignment_to_bisection_accuracy(seed):
    """40 halvings of [0, 1] locate λ* within 2⁻⁴⁰, from below (λ* is always safe)."""
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
    assert f(lam) >= -tol and f(lam + 2.0**-38) < -tol
