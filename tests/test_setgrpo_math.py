"""SetGRPO's formulas checked again (DESIGN §8): brute force, LP, concavity, certificates, and the
statistical guarantees by simulation with binomial tolerances."""

import itertools
import math

import numpy as np
import pytest
from conftest import binomial_ok
from scipy.optimize import linprog, minimize
from scipy.stats import binom

from setgrpo_bench.agents import setgrpo as sm
from setgrpo_bench.agents.coefficients import grpo_coefficients
from setgrpo_bench.errors import ConfigError


def _vertices(a_hat, rho):
    """Every vertex of C = box ∩ {Σa = 0}: G − 1 coordinates at a bound, the last one solving Σa = 0."""
    G, low, high, out = len(a_hat), a_hat - rho, a_hat + rho, []
    for j in range(G):
        others = [i for i in range(G) if i != j]
        for bits in itertools.product((0, 1), repeat=G - 1):
            a = np.empty(G)
            a[others] = np.where(bits, high[others], low[others])
            a[j] = -a[others].sum()
            if low[j] - 1e-12 <= a[j] <= high[j] + 1e-12:
                out.append(a)
    return np.array(out)


def _random_group(rng, rank=None):
    G = int(rng.integers(4, 7))
    F = rng.normal(size=(G, rank or int(rng.integers(1, G + 1))))
    a_hat = rng.normal(size=G)
    return F @ F.T, a_hat - a_hat.mean(), rng.uniform(0.05, 1.5, size=G)


@pytest.mark.parametrize("seed", range(40))
def test_worst_case_alignment_equals_vertex_enumeration_and_lp(seed):
    rng = np.random.default_rng(seed)
    K, a_hat, rho = _random_group(rng, rank=1 if seed % 4 == 0 else None)  # rank-deficient K included
    c = rng.normal(size=len(a_hat))
    f = sm.worst_case_alignment(c, K, a_hat, rho)
    assert f == pytest.approx((_vertices(a_hat, rho) @ K @ c).min(), abs=1e-10)
    lp = linprog(K @ c, A_eq=np.ones((1, len(c))), b_eq=[0.0], bounds=list(zip(a_hat - rho, a_hat + rho)))
    assert f == pytest.approx(lp.fun, abs=1e-8)


@pytest.mark.parametrize("seed", range(40))
def test_anchor_is_optimal_in_c_and_certifies_itself(seed):
    rng = np.random.default_rng(100 + seed)
    K, a_hat, rho = _random_group(rng, rank=2 if seed % 3 == 0 else None)
    a0 = sm.anchor(K, a_hat, rho)
    assert sm.in_set(a0, a_hat, rho)
    energy = a0 @ K @ a0
    # certificate: a0ᵀKa ≥ a0ᵀKa0 ≥ 0 for every vertex (hence every point) of C
    assert (_vertices(a_hat, rho) @ K @ a0).min() >= energy - 1e-10
    assert sm.worst_case_alignment(a0, K, a_hat, rho) >= -1e-10
    reference = minimize(lambda a: a @ K @ a, a_hat, jac=lambda a: 2 * K @ a, method="SLSQP",
                         bounds=list(zip(a_hat - rho, a_hat + rho)),
                         constraints=[{"type": "eq", "fun": lambda a: a.sum()}], options={"ftol": 1e-15})
    assert energy <= reference.fun + 1e-9


@pytest.mark.parametrize("seed", range(25))
def test_recovery_curve_is_concave_and_lambda_star_is_its_last_safe_point(seed):
    rng = np.random.default_rng(200 + seed)
    K, a_hat, rho = _random_group(rng)
    a0 = sm.anchor(K, a_hat, rho)
    lams = np.linspace(0, 1, 201)
    f = np.array([sm.worst_case_alignment(a0 + lam * (a_hat - a0), K, a_hat, rho) for lam in lams])
    assert np.all(np.diff(f, 2) <= 1e-9)
    assert f[0] >= -1e-10
    lam_star = sm.safe_recovery_ratio(K, a_hat, a0, rho)
    assert np.all(f[lams <= lam_star] >= -1e-9)
    if lam_star < 1:
        after = sm.worst_case_alignment(a0 + min(lam_star + 1e-6, 1) * (a_hat - a0), K, a_hat, rho)
        assert after < 0


def test_zero_in_the_set_is_uncertifiable_and_small_sets_recover_fully():
    K = np.eye(4)
    a_hat = np.array([1.0, -1.0, 0.5, -0.5])
    wide = sm.decide_group(K, a_hat, np.full(4, 2.0))
    assert not wide.certifiable and wide.score == sm.UNCERTIFIABLE and not wide.coefficients.any()
    tight = sm.decide_group(K, a_hat, np.full(4, 1e-3))
    assert tight.certifiable and tight.score == 1.0 and np.allclose(tight.coefficients, a_hat)
    assert not sm.decide_group(K, a_hat, np.full(4, math.inf)).certifiable


def test_certified_radius_ratio_is_at_least_one_exactly_when_a_hat_is_safe():
    rng = np.random.default_rng(7)
    for _ in range(50):
        K, a_hat, rho = _random_group(rng)
        safe = sm.worst_case_alignment(a_hat, K, a_hat, rho) >= 0
        assert (sm.certified_radius_ratio(K, a_hat, rho) >= 1) == safe
    no_recovery = sm.decide_group(K, a_hat, rho, recovery=False)
    assert np.array_equal(no_recovery.coefficients, a_hat)


def test_weighted_median_minimises_the_weighted_absolute_deviation():
    rng = np.random.default_rng(3)
    for _ in range(30):
        v, w = rng.normal(size=7), rng.uniform(0.1, 2, size=7)
        mu = sm.weighted_median(v, w)
        grid = np.linspace(v.min() - 1, v.max() + 1, 2001)
        best = min(w @ np.abs(v - m) for m in grid)
        assert w @ np.abs(v - mu) <= best + 1e-9


def test_ranks_and_quantile_by_hand():
    assert sm.conformal_rank(19, 0.1) == 18 and sm.conformal_rank(9, 0.1) == 9 and sm.conformal_rank(8, 0.1) == 9
    assert sm.conformal_quantile(np.arange(8.0), 0.1) == math.inf  # k = 9 > n = 8
    assert sm.conformal_quantile(np.array([3.0, 1.0, 2.0, 5.0, 4.0]), 0.5) == 3.0  # k = ⌈6·0.5⌉ = 3
    n, alpha_a, delta_a = 50, 0.1, 0.1
    k = sm.pac_rank(n, alpha_a, delta_a)
    assert binom.cdf(k - 1, n, 1 - alpha_a) >= 1 - delta_a > binom.cdf(k - 2, n, 1 - alpha_a)
    assert k > sm.conformal_rank(n, alpha_a)
    with pytest.raises(ConfigError, match="alpha_a=1.5 is not allowed"):
        sm.conformal_rank(10, 1.5)


def test_levels_are_open_intervals_and_errors_name_the_setting():
    for level in (0.0, 1.0):
        with pytest.raises(ConfigError, match=f"alpha_a={level!r} is not allowed"):
            sm.conformal_rank(10, level)
    with pytest.raises(ConfigError, match="alpha_a=1.0 is not allowed"):
        sm.pac_rank(10, 1.0, 0.1)
    with pytest.raises(ConfigError, match="delta_a=0.0 is not allowed"):
        sm.pac_rank(10, 0.1, 0.0)


def test_the_pac_rank_and_the_quantile_at_their_edges():
    assert sm.pac_rank(1, 0.9, 0.2) == 1  # BinomCDF(0; 1, 0.1) = 0.9 ≥ 0.8: the smallest score already covers
    assert sm.pac_rank(1, 0.5, 0.5) == 1  # BinomCDF(0; 1, 0.5) = 0.5 ≥ 1 − δ_a exactly: the inequality is ≥
    assert sm.pac_rank(3, 0.01, 0.01) == 4  # no k ≤ n suffices: n + 1 (q = ∞)
    scores = np.arange(1.0, 20.0)
    assert sm.conformal_rank(19, 0.05) == 19 and sm.conformal_quantile(scores, 0.05) == 19.0  # k = n: the largest


def test_the_zero_sum_tolerance_scales_with_the_vectors_size():
    """Σa = 0 within 1e-9 · max(1, ‖a‖₁): relative for large vectors, absolute for small ones."""
    big = np.array([5.0, -5.0 + 5e-10])  # ‖a‖₁ = 10, Σa = 5e-10 ≤ 1e-8
    assert sm.in_set(big, big, np.zeros(2))
    small = np.array([0.3, -0.3 + 1.5e-9])  # ‖a‖₁ < 1, Σa = 1.5e-9 > 1e-9
    assert not sm.in_set(small, small, np.zeros(2))


def _gaussian_groups(rng, reps, n, G=8):
    truth = rng.normal(size=(reps, n, G))
    observed = truth + rng.normal(scale=0.5, size=truth.shape)
    reference = truth + rng.normal(scale=0.2, size=truth.shape)
    return observed, reference, np.full(truth.shape, 0.5)


def _rubric_groups(rng, reps, n, G=8, J=8, flip=0.15):
    """Rubric-like rewards: J weighted criteria met with per-response probabilities, verdicts
    flipped by the judge w.p. ``flip``; the reference is a 5-call majority of fresh flips."""
    points = rng.integers(1, 4, size=J).astype(float)
    truth = rng.random((reps, n, G, J)) < rng.uniform(0.2, 0.8, size=(reps, n, G, 1))
    flips = lambda: rng.random(truth.shape) < flip  # noqa: E731
    observed = (truth ^ flips()) @ points / points.sum()
    votes = sum((truth ^ flips()).astype(int) for _ in range(5)) >= 3
    reference = votes @ points / points.sum()
    spread = np.sqrt((points / points.sum()) ** 2 @ np.full(J, flip * (1 - flip)))
    return observed, reference, np.full(observed.shape, spread)


def _scores(observed: np.ndarray, reference: np.ndarray, spreads: np.ndarray, *, std_floor: float = 0.05,
            eps: float = 1e-4, spread_floor: float = 0.01) -> np.ndarray:
    """The conformal score of every group at once (groups along the last axis): GRPO coefficients of the
    observed and reference rewards, σ from the spreads — the package's formulas, vectorised."""
    def coefficients(r: np.ndarray) -> np.ndarray:
        scale = np.maximum(r.std(axis=-1, ddof=1, keepdims=True), std_floor) + eps
        constant = np.ptp(r, axis=-1, keepdims=True) == 0
        return np.where(constant, 0.0, (r - r.mean(axis=-1, keepdims=True)) / scale)

    scale = np.maximum(observed.std(axis=-1, ddof=1, keepdims=True), std_floor) + eps
    sigma = np.maximum(spreads, spread_floor) / scale
    return (np.abs(coefficients(observed) - coefficients(reference)) / sigma).max(axis=-1)


@pytest.mark.parametrize("make", [_gaussian_groups, _rubric_groups])
@pytest.mark.parametrize("n, alpha_a", [(19, 0.1), (39, 0.2), (59, 0.1)])
def test_conformal_coverage_equals_k_over_n_plus_one(make, n, alpha_a):
    """Coverage over repeated calibrations is exactly k/(n+1) for exchangeable, distinct scores."""
    rng = np.random.default_rng(n)
    reps = 1500
    observed, reference, spreads = make(rng, reps, n + 1)
    scores = _scores(observed, reference, spreads)
    for r, j in ((0, 0), (7, n), (reps - 1, 3)):  # the vectorised scores are the package's, group by group
        a_hat, a_ref = grpo_coefficients(observed[r, j]), grpo_coefficients(reference[r, j])
        sigma = sm.response_scales(observed[r, j], spreads[r, j])
        assert scores[r, j] == pytest.approx(sm.conformal_score(a_hat, a_ref, sigma), rel=1e-12)
    q = np.array([sm.conformal_quantile(s[:n], alpha_a) for s in scores])
    covered = int((scores[:, n] <= q).sum())
    k = sm.conformal_rank(n, alpha_a)
    assert binomial_ok(covered, reps, k / (n + 1))
    assert k / (n + 1) >= 1 - alpha_a


def test_pac_quantile_covers_with_probability_one_minus_delta():
    """With uniform scores the coverage of q is q itself: P(q ≥ 1 − α_a) ≥ 1 − δ_a."""
    rng = np.random.default_rng(11)
    reps, n, alpha_a, delta_a = 4000, 60, 0.1, 0.1
    q = np.array([sm.conformal_quantile(rng.random(n), alpha_a, delta_a=delta_a) for _ in range(reps)])
    good = int((q >= 1 - alpha_a).sum())
    k = sm.pac_rank(n, alpha_a, delta_a)
    assert binomial_ok(good, reps, binom.cdf(k - 1, n, 1 - alpha_a))
    plain = np.array([sm.conformal_quantile(rng.random(n), alpha_a) for _ in range(reps)])
    assert (plain >= 1 - alpha_a).mean() < 1 - delta_a  # the plain quantile alone does not give PAC


def test_binomial_p_value_uses_integer_counts():
    assert sm.binomial_p_value(0, 30, 0.1) == pytest.approx(0.9**30)
    assert sm.binomial_p_value(2, 30, 0.1) == pytest.approx(binom.cdf(2, 30, 0.1))
    assert sm.binomial_p_value(0, 0, 0.1) == 1.0
    with pytest.raises(ConfigError, match="integers"):
        sm.binomial_p_value(0.5, 30, 0.1)
    with pytest.raises(ConfigError, match="integers"):
        sm.binomial_p_value(5, 3, 0.1)


def test_threshold_grid_is_strict_to_permissive():
    scores = np.arange(100.0)
    grid = sm.threshold_grid(scores, sm.acceptance_levels())
    assert np.all(np.diff(grid) < 0)
    assert grid[0] == 90.0 and grid[-1] == 0.0  # accepts 10% … 100% of D1
    assert len(sm.acceptance_levels()) == 19


def test_ltt_walk_skips_untestable_points_and_stops_at_first_failure():
    alpha, delta = 0.1, 0.1
    assert sm.min_testable_count(alpha, delta) == pytest.approx(math.log(0.1) / math.log(0.9))
    scores = np.arange(100.0)[::-1]  # scores 99 … 0
    events = np.zeros(100, bool)
    events[60:] = True  # reversals only among the 40 lowest scores
    grid = np.array([95.0, 80.0, 60.0, 40.0, 20.0, 0.0])
    tau = sm.ltt_threshold(grid, scores, events, alpha=alpha, delta=delta)
    assert tau == 40.0  # m = 5 skipped (< 21.9); 80, 60, 40 pass with k = 0; 20 fails
    assert sm.ltt_threshold(grid, scores, np.ones(100, bool), alpha=alpha, delta=delta) == math.inf


def test_ltt_controls_the_conditional_risk_with_probability_one_minus_delta():
    """Over 1000 calibrations, P(R(τ̂) > α) ≤ δ. Scores s ~ U(0, 1), reversal probability
    p(s) = 0.4(1 − s), so R(τ) = E[p(s) | s ≥ τ] = 0.2(1 − τ)."""
    rng = np.random.default_rng(5)
    reps, n1, n2, alpha, delta = 1000, 100, 200, 0.1, 0.1
    risk = lambda tau: 0.0 if tau == math.inf else 0.2 * (1 - max(tau, 0.0))  # noqa: E731
    violations, accepted = 0, []
    for _ in range(reps):
        grid = sm.threshold_grid(rng.random(n1), sm.acceptance_levels())
        s = rng.random(n2)
        events = rng.random(n2) < 0.4 * (1 - s)
        tau = sm.ltt_threshold(grid, s, events, alpha=alpha, delta=delta)
        violations += risk(tau) > alpha
        accepted.append(0.0 if tau == math.inf else 1 - tau)
    assert violations <= binom.ppf(1 - 1e-4, reps, delta)
    assert np.mean(accepted) > 0.1  # it does accept: the bound is not met by accepting nothing


def test_zero_radius_pins_coefficients_as_under_a_noise_free_judge():
    rng = np.random.default_rng(8)
    K, a_hat, rho = _random_group(rng)
    exact = sm.decide_group(K, a_hat, np.zeros_like(rho))  # q = 0: C = {â}
    assert exact.certifiable and exact.score == 1.0 and np.allclose(exact.coefficients, a_hat)
    partly = rho.copy()
    partly[:2] = 0.0
    a0 = sm.anchor(K, a_hat, partly)
    assert sm.in_set(a0, a_hat, partly) and np.allclose(a0[:2], a_hat[:2])
    assert (_vertices(a_hat, partly) @ K @ a0).min() >= a0 @ K @ a0 - 1e-10


def test_ltt_stops_at_its_first_failure_even_when_a_later_threshold_would_pass():
    """3 reversals among the top 30 of 100 scores; the grid accepts 30, 60, 100 groups. The first
    test fails (p = BinomCDF(3; 30, 0.1) ≈ 0.65), so the fixed-sequence walk certifies nothing — even
    though the last grid point alone would pass (BinomCDF(3; 100, 0.1) ≈ 0.008)."""
    alpha = delta = 0.1
    scores = np.arange(100.0)[::-1]  # scores 99 … 0
    events = np.zeros(100, bool)
    events[[0, 10, 20]] = True
    grid = np.array([70.0, 40.0, 0.0])
    assert sm.binomial_p_value(3, 30, alpha) > delta and sm.binomial_p_value(3, 100, alpha) <= delta
    assert sm.ltt_threshold(grid, scores, events, alpha=alpha, delta=delta) == math.inf


def _aligned_groups(rng, n, *, reversed_reference):
    """Groups with K = I and small sets: λ* = 1 and c = â; a* = ±â, so every executed update is
    aligned with (or reversed against) its reference."""
    out = []
    for _ in range(n):
        a_hat = rng.normal(size=4)
        a_hat -= a_hat.mean()
        out.append(sm.AuditedGroup(a_hat, -a_hat if reversed_reference else a_hat, np.full(4, 0.01), np.eye(4)))
    return out


def test_calibrate_threshold_tests_the_risk_on_d2_and_fixes_the_grid_on_d1():
    rng = np.random.default_rng(0)
    safe, risky = _aligned_groups(rng, 30, reversed_reference=False), _aligned_groups(rng, 30, reversed_reference=True)
    kwargs = dict(alpha=0.2, delta=0.1, levels=sm.acceptance_levels())
    assert sm.calibrate_threshold(safe, risky, 1.0, **kwargs) == math.inf  # D2 reverses: nothing is certified
    assert sm.calibrate_threshold(risky, safe, 1.0, **kwargs) == 1.0  # D2 is safe: the grid's one point passes


def test_membership_needs_the_box_and_the_zero_sum():
    rng = np.random.default_rng(3)
    _, a_hat, rho = _random_group(rng)
    assert sm.in_set(a_hat, a_hat, rho)
    assert not sm.in_set(a_hat + 0.5 * rho, a_hat, rho)  # inside the box, but Σa > 0
    shift = np.zeros_like(a_hat)
    shift[0], shift[1] = 0.5 * min(rho[:2]), -0.5 * min(rho[:2])
    assert sm.in_set(a_hat + shift, a_hat, rho)  # inside the box with Σa = 0
    shift[0] = 2 * rho[0] + 1.0
    shift[1] = -shift[0]
    assert not sm.in_set(a_hat + shift, a_hat, rho)  # Σa = 0, outside the box


def test_response_scales_by_hand():
    """σ_i = max(spread_i, floor) / (max(std(r̃), std_floor) + ε) with the unbiased std of GRPO's
    coefficients, so that a reward error of one spread moves â_i by about σ_i."""
    rewards, spreads = np.array([0.2, 0.5, 0.9]), np.array([0.05, 0.001, 0.1])
    std = np.sqrt(((rewards - rewards.mean()) ** 2).sum() / 2)
    expected = np.array([0.05, 0.01, 0.1]) / (std + 1e-4)
    assert np.allclose(sm.response_scales(rewards, spreads, std_floor=0.05, spread_floor=0.01), expected)
    assert np.allclose(sm.response_scales(np.array([0.5, 0.51]), np.array([0.05, 0.05])), 0.05 / (0.05 + 1e-4))
    pair = np.array([0.2, 0.8])  # two responses: their unbiased std, above the floor
    assert np.allclose(sm.response_scales(pair, np.array([0.1, 0.1])), 0.1 / (np.std(pair, ddof=1) + 1e-4))
    assert np.allclose(sm.response_scales(np.array([0.7]), np.array([0.1])), 0.1 / (0.05 + 1e-4))  # one: the floor


def test_a_reversal_is_a_strictly_opposed_update():
    """E = 1{cᵀKa* < 0}: an update orthogonal to the reference one (or none at all) does not oppose it."""
    K = np.eye(3)
    a_ref = np.array([1.0, -1.0, 0.0])
    assert sm.reversal(-a_ref, K, a_ref) and not sm.reversal(a_ref, K, a_ref)
    assert not sm.reversal(np.zeros(3), K, a_ref)
    assert not sm.reversal(np.array([1.0, 1.0, -2.0]), K, a_ref)  # cᵀKa* = 0


@pytest.mark.parametrize("radius", [0.0, 1e-17, 1e-300])
def test_radii_below_the_float_spacing_pin_the_coefficients(radius):
    """0 < ρ_i < ulp(â_i) leaves [â − ρ, â + ρ] a single float: the anchor must treat it as pinned (a zero
    radius), not hand the bounded solver an empty interval."""
    K = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
    a_hat = np.array([0.7, -0.2, -0.5])
    decision = sm.decide_group(K, a_hat, np.full(3, radius))
    assert decision.certifiable and decision.score == 1.0 and np.allclose(decision.coefficients, a_hat)
    mixed = sm.anchor(K, a_hat, np.array([1e-17, 0.3, 0.3]))
    assert mixed[0] == a_hat[0] and abs(mixed.sum()) < 1e-12


def test_ltt_walk_starts_where_a_share_of_d2_is_accepted():
    """3 reversals among the top 20 of 100 D2 scores. The literal walk starts at the first testable
    threshold (m = 20 ≥ ln δ / ln(1 − α) ≈ 10.3) and stops there (p = BinomCDF(3; 20, 0.2) ≈ 0.41); started
    where half of D2 is accepted (m = 60, p ≈ 0.003) it certifies down to the most permissive point."""
    alpha, delta = 0.2, 0.1
    scores = np.arange(100.0)[::-1]
    events = np.zeros(100, bool)
    events[[2, 9, 17]] = True
    grid = np.array([95.0, 80.0, 60.0, 40.0, 20.0, 0.0])
    assert sm.ltt_threshold(grid, scores, events, alpha=alpha, delta=delta) == math.inf
    assert sm.ltt_threshold(grid, scores, events, alpha=alpha, delta=delta, start=0.5) == 0.0
    assert sm.ltt_threshold(grid, scores, events, alpha=alpha, delta=delta, start=0.9) == 0.0  # starts at m = 100


def test_a_late_start_keeps_the_certificate_on_both_sides_of_alpha_and_stalls_less():
    """2,000 calibrations with D2 of 64 groups and scores U(0, 1). With reversal probability
    p(s) = 0.6(1 − s), R(τ) = 0.3(1 − τ) crosses α = 0.2 at τ = 1/3, so the grid holds thresholds on both
    sides of α: for the literal walk and for one started where half of D2 is accepted, the share of
    calibrations whose τ̂ has R(τ̂) > α stays within the binomial tolerance of δ. With a flat reversal
    rate of 0.06 (this suite's regime: 0.025–0.1 per group) the literal walk stalls in about half of the
    calibrations, the late start in about an eighth."""
    rng = np.random.default_rng(11)
    reps, n, alpha, delta = 2000, 64, 0.2, 0.1
    risk = lambda tau: 0.0 if tau == math.inf else 0.3 * (1 - max(tau, 0.0))  # noqa: E731
    violations, stalled = {0.0: 0, 0.5: 0}, {0.0: 0, 0.5: 0}
    for _ in range(reps):
        grid = sm.threshold_grid(rng.random(n), sm.acceptance_levels())
        s = rng.random(n)
        sloped, flat = rng.random(n) < 0.6 * (1 - s), rng.random(n) < 0.06
        for start in violations:
            violations[start] += risk(sm.ltt_threshold(grid, s, sloped, alpha=alpha, delta=delta, start=start)) > alpha
            stalled[start] += sm.ltt_threshold(grid, s, flat, alpha=alpha, delta=delta, start=start) == math.inf
    assert max(violations.values()) <= binom.ppf(1 - 1e-4, reps, delta), violations
    assert stalled[0.0] > 0.4 * reps and stalled[0.5] < 0.2 * reps, stalled


def test_choosing_among_set_levels_inside_the_risk_test_keeps_the_certificate():
    """Three set levels, each a family of thresholds with its own risk curve R_j(τ) = r_j(1 − τ)/2 (r_j =
    0.3, 0.45, 0.6: the last two cross α = 0.2). Over 2,000 calibrations the chosen pair's risk exceeds α
    in at most δ of them (binomial tolerance), although the pair is chosen after the tests, as the one
    that accepts the most — and the choice is a real one: each level is chosen in some calibrations."""
    rng = np.random.default_rng(12)
    reps, n, alpha, delta, slopes = 2000, 64, 0.2, 0.1, (0.3, 0.45, 0.6)
    violations, chosen = 0, np.zeros(len(slopes), int)
    for _ in range(reps):
        trials = []
        for r in slopes:
            s = rng.random(n)
            trials.append((sm.threshold_grid(rng.random(n), sm.acceptance_levels()), s, rng.random(n) < r * (1 - s)))
        index, tau, _ = sm.select_certified(trials, alpha=alpha, delta=delta, start=0.5)
        if index >= 0:
            chosen[index] += 1
            violations += slopes[index] * (1 - max(tau, 0.0)) / 2 > alpha
    assert violations <= binom.ppf(1 - 1e-4, reps, delta)
    assert (chosen > 0.05 * reps).sum() >= 2, chosen
    # risk 0.21 > α everywhere in every family: any certified pair is a violation. Bonferroni keeps it
    # within δ; walking each family at the full δ would certify in about 3δ of the calibrations.
    certified = {"bonferroni": 0, "each at δ": 0}
    for _ in range(reps):
        trials = [(sm.threshold_grid(rng.random(n), sm.acceptance_levels()), rng.random(n), rng.random(n) < 0.21)
                  for _ in slopes]
        certified["bonferroni"] += sm.select_certified(trials, alpha=alpha, delta=delta, start=0.5)[0] >= 0
        certified["each at δ"] += sm.select_certified(trials, alpha=alpha, delta=delta * len(trials), start=0.5)[0] >= 0
    assert certified["bonferroni"] <= binom.ppf(1 - 1e-4, reps, delta) < certified["each at δ"], certified


def test_the_joint_calibration_picks_the_certified_level_that_accepts_most():
    """Groups with K = I: at α_a = 0.9 the set is small and every D2 group executes â (aligned with a*);
    the walk certifies it. A level whose q is ∞ is skipped, and with no safe level τ̂ = ∞."""
    rng = np.random.default_rng(0)
    safe = _aligned_groups(rng, 40, reversed_reference=False)
    kwargs = dict(alpha=0.2, delta=0.1, levels=sm.acceptance_levels(), start=0.5)
    chosen = sm.calibrate_set_and_threshold(safe[:20], safe[20:], [0.5, 0.9], **kwargs)
    assert chosen.alpha_a == 0.9 and math.isfinite(chosen.tau) and chosen.accepted_d2 == 20  # ties keep the larger α_a
    risky = _aligned_groups(rng, 20, reversed_reference=True)
    nothing = sm.calibrate_set_and_threshold(risky, risky, [0.5, 0.9], **kwargs)
    assert nothing.tau == math.inf and nothing.accepted_d2 == 0
    with pytest.raises(ConfigError, match="at least one set level"):
        sm.calibrate_set_and_threshold(safe, safe, [], **kwargs)


def test_executing_the_original_coefficients_tests_the_events_of_what_is_executed():
    """c(λ*) of a group can be aligned with a* while â itself opposes it: with execute = original the gate
    tests â's reversals, with recovered c(λ*)'s."""
    a_hat = np.array([1.0, -1.0])
    decision = sm.GroupDecision(0.5, np.array([-0.2, 0.2]), True)
    assert np.array_equal(sm.executed(decision, a_hat, "original"), a_hat)
    assert np.array_equal(sm.executed(decision, a_hat, "recovered"), decision.coefficients)
    group = sm.AuditedGroup(a_hat, -a_hat, np.full(2, 0.1), np.eye(2))
    decide = lambda *args, **kwargs: decision  # noqa: E731
    _, _, recovered = sm.gate_trial([group], [group], 1.0, levels=sm.acceptance_levels(), decide=decide)
    _, _, original = sm.gate_trial([group], [group], 1.0, levels=sm.acceptance_levels(), decide=decide,
                                   execute="original")
    assert not recovered[0] and original[0]
