"""Every reported statistic recomputed in the test's own words, at asymmetric parameters where a swapped,
simplified or wrongly-weighted formula gives a different number: SetGRPO's executed vector and gate,
the pooled rates and their exact intervals, the evaluation's aggregates, and the judge's correlated
errors within one call."""

import math

import numpy as np
import pytest
from conftest import binomial_ok
from scipy.optimize import brentq, linprog, minimize
from scipy.stats import binom

from setgrpo_bench.agents import setgrpo as sm
from setgrpo_bench.graders import NoiseProfile, RubricGrader
from setgrpo_bench.harness.averages import aggregate
from setgrpo_bench.harness.pooled import (
    clopper_pearson,
    pool,
    pool_seeds,
    summarise_diagnostics,
    summarise_updates,
)
from setgrpo_bench.tasks import CATEGORIES, Criterion, TaskInstance
from setgrpo_bench.tasks.checks import build_check

# one group found where the safe step lies strictly inside (0, 1): λ* ≈ 0.43
F = np.array([[1.8, 1.3, 0.4, -1.2], [0.0, 0.7, -1.3, 0.4], [0.4, 0.7, -1.2, -0.7], [-0.4, -1.2, 1.7, -0.5]])
K = F @ F.T
A_HAT = np.array([-0.43, -1.03, 0.88, 0.58])
RHO = np.array([0.4, 0.2, 0.6, 0.8])


def _worst_case_by_lp(c):
    """min over C = box(â, ρ) ∩ {Σa = 0} of cᵀKa, by linear programming."""
    done = linprog(K @ c, A_eq=np.ones((1, 4)), b_eq=[0.0], bounds=list(zip(A_HAT - RHO, A_HAT + RHO)), method="highs")
    return done.fun


def test_an_accepted_group_executes_the_recovered_vector_not_a_hat():
    """c(λ*) = a0 + λ*(â − a0), with a0 = argmin_{a∈C} aᵀKa (here by SLSQP) and λ* the root of the
    LP-computed worst-case alignment along the segment."""
    constraint = {"type": "eq", "fun": lambda a: a.sum()}
    a0 = minimize(lambda a: a @ K @ a, x0=A_HAT, jac=lambda a: 2 * K @ a, bounds=list(zip(A_HAT - RHO, A_HAT + RHO)),
                  constraints=[constraint], method="SLSQP", options={"ftol": 1e-15, "maxiter": 500}).x
    along = lambda lam: _worst_case_by_lp(a0 + lam * (A_HAT - a0))  # noqa: E731
    assert along(0.0) >= -1e-9 and along(1.0) < 0
    lam = brentq(along, 0.0, 1.0, xtol=1e-12)
    decision = sm.decide_group(K, A_HAT, RHO)
    assert decision.certifiable and decision.score == pytest.approx(lam, abs=1e-6)
    expected = a0 + lam * (A_HAT - a0)
    assert np.abs(decision.coefficients - expected).max() < 1e-5
    assert np.abs(decision.coefficients - A_HAT).max() > 0.1  # executing â would be a different vector


class _Scripted:
    """A ``decide`` for ``calibrate_threshold`` that returns a scripted decision per group (keyed by its
    Gram matrix), so that the grid and the walk are checked on chosen scores and events."""

    def __init__(self):
        self.by_gram = {}

    def group(self, score, reverses=False):
        gram = np.eye(2)
        certifiable = math.isfinite(score)
        coefficients = np.array([1.0, -1.0]) if certifiable else np.zeros(2)
        self.by_gram[id(gram)] = sm.GroupDecision(score, coefficients, certifiable)
        a_ref = -coefficients if reverses else coefficients
        # â opposes what is executed, so an event computed on â instead of c would flip
        return sm.AuditedGroup(a_hat=np.array([-1.0, 1.0]), a_ref=a_ref, sigma=np.ones(2), gram=gram)

    def __call__(self, gram, a_hat, rho, *, recovery):
        return self.by_gram[id(gram)]


def test_the_grid_is_fixed_on_d1s_certifiable_groups_and_uncertifiable_ones_never_count():
    """Grid on D1's certifiable scores 0.9 … 0.5 at 50% and 100%: τ = 0.7, 0.5. With uncertifiable
    groups (score −∞) in the grid it would be 0.5, −∞, and τ̂ = −∞."""
    script = _Scripted()
    d1 = [script.group(s) for s in (0.9, 0.8, 0.7, 0.6, 0.5)] + [script.group(-math.inf) for _ in range(5)]
    d2 = [script.group(0.9) for _ in range(30)] + [script.group(-math.inf) for _ in range(10)]
    tau = sm.calibrate_threshold(d1, d2, 1.0, alpha=0.2, delta=0.1, levels=np.array([0.5, 1.0]), decide=script)
    assert tau == 0.5


def test_the_risk_test_counts_d2s_events_of_the_executed_vector():
    """D2 where 8 of 30 accepted groups reverse (27%, above α = 0.2): nothing can be certified. The
    same groups without reversals certify the most permissive threshold."""
    script = _Scripted()
    d1 = [script.group(s) for s in (0.9, 0.7, 0.5)]
    risky = [script.group(0.9, reverses=i < 8) for i in range(30)]
    safe = [script.group(0.9) for _ in range(30)]
    levels = np.array([0.34, 1.0])
    assert sm.calibrate_threshold(d1, risky, 1.0, alpha=0.2, delta=0.1, levels=levels, decide=script) == math.inf
    assert sm.calibrate_threshold(d1, safe, 1.0, alpha=0.2, delta=0.1, levels=levels, decide=script) == 0.5


@pytest.mark.parametrize("k, n, level", [(3, 20, 0.95), (0, 12, 0.95), (12, 12, 0.95), (7, 40, 0.90)])
def test_clopper_pearson_bounds_solve_their_defining_tail_equations(k, n, level):
    """Lower L: P(X ≥ k | L) = (1 − level)/2; upper U: P(X ≤ k | U) = (1 − level)/2 (Clopper & Pearson 1934)."""
    low, high = clopper_pearson(k, n, level)
    tail = (1 - level) / 2
    if k == 0:
        assert low == 0.0
    else:
        assert binom.sf(k - 1, n, low) == pytest.approx(tail, abs=1e-9)
    if k == n:
        assert high == 1.0
    else:
        assert binom.cdf(k, n, high) == pytest.approx(tail, abs=1e-9)


TOTALS = {"n_covered_ref": 7, "n_audited": 20, "n_reversed_ref": 2, "n_audited_accepted": 11, "n_covered_true": 13,
          "n_nonconstant": 40, "n_reversed_true": 3, "n_accepted": 25, "energy_executed": 3.0, "energy_grpo": 12.0,
          "alignment_executed_true": 2.0, "alignment_grpo_true": 5.0}


def test_each_pooled_rate_is_its_own_events_over_its_own_trials():
    out = pool(TOTALS)
    assert out["coverage_ref"] == 7 / 20 and out["reversal_ref"] == 2 / 11
    assert out["coverage_true"] == 13 / 40 and out["reversal_true"] == 3 / 25
    assert out["acceptance_nonconstant"] == 25 / 40
    assert out["update_energy_ratio"] == 3.0 / 12.0 and out["retained_alignment"] == 2.0 / 5.0
    assert (out["reversal_ref_low"], out["reversal_ref_high"]) == clopper_pearson(2, 11)
    assert pool({**TOTALS, "n_audited_accepted": 0, "n_reversed_ref": 0})["reversal_ref"] is None


def test_a_runs_rates_pool_the_counts_of_every_step_and_means_skip_non_finite_steps():
    steps = [{**dict.fromkeys(TOTALS, 0), "n_audited": 4, "n_covered_ref": 1, "q": 1.0, "tau": math.inf, "uncertifiable": 0.5},
             {**dict.fromkeys(TOTALS, 0), "n_audited": 1, "n_covered_ref": 1, "q": 2.0, "tau": 0.4, "uncertifiable": 0.0},
             {**dict.fromkeys(TOTALS, 0), "n_audited": 5, "n_covered_ref": 0, "q": 6.0, "tau": 0.2, "uncertifiable": 0.1}]
    out = summarise_diagnostics(steps)
    assert out["coverage_ref"] == 2 / 10  # the mean of the steps' rates would be (0.25 + 1 + 0) / 3
    assert out["q"] == 3.0 and out["tau"] == pytest.approx(0.3) and out["uncertifiable"] == pytest.approx(0.2)


def test_what_the_optimiser_did_by_hand():
    """The share of steps that stepped, the mean ‖Δθ‖ and groups trained on over those steps only."""
    steps = [{"stepped": 1.0, "param_step": 0.2, "groups_executed": 4},
             {"stepped": 0.0, "param_step": 0.0, "groups_executed": 0},
             {"stepped": 1.0, "param_step": 0.6, "groups_executed": 2},
             {"stepped": 1.0, "param_step": 0.4, "groups_executed": 3}]
    out = summarise_updates(steps)
    assert out == pytest.approx({"executed_steps": 0.75, "param_step": 0.4, "groups_per_executed_step": 3.0})
    assert summarise_updates([{"stepped": 0.0, "param_step": 0.0, "groups_executed": 0}]) == {
        "executed_steps": 0.0, "param_step": 0.0, "groups_per_executed_step": 0.0}
    assert summarise_updates([{"reward": 0.5}]) == {}  # runs that did not log the optimiser's steps


def test_seeds_pool_every_seeds_counts():
    seeds = [pool({**TOTALS, "n_audited": 20, "n_covered_ref": 7}, {"q": 1.0}),
             pool({**TOTALS, "n_audited": 10, "n_covered_ref": 9}, {"q": 2.0}),
             pool({**TOTALS, "n_audited": 30, "n_covered_ref": 3}, {"q": 6.0})]
    out = pool_seeds(seeds)
    assert out["n_audited"] == 60 and out["coverage_ref"] == 19 / 60 and out["q"] == 3.0
    assert out["update_energy_ratio"] == (3 * 3.0) / (3 * 12.0)


def test_domain_and_macro_averages_and_their_standard_errors_by_hand():
    """Three benchmarks in two domains (two and one): the domain macro is the mean of the two domain
    means (0.45), not the mean of the three benchmarks (0.4); SE = √(Σ se²)/K."""
    per_env = {"A": {"domain": "d1", "true_score": 0.2, "true_score_se": 0.03, "judge_score": 0.3, "judge_score_se": 0.01},
               "B": {"domain": "d1", "true_score": 0.4, "true_score_se": 0.04, "judge_score": 0.5, "judge_score_se": 0.02},
               "C": {"domain": "d2", "true_score": 0.6, "true_score_se": 0.12, "judge_score": 0.4, "judge_score_se": 0.02}}
    out = aggregate(per_env)
    assert out["domains"]["d1"]["true_score"] == pytest.approx(0.3)
    assert out["domains"]["d1"]["true_score_se"] == pytest.approx(0.05 / 2)  # √(0.03² + 0.04²) / 2
    assert out["macro_true_score"] == pytest.approx(0.4) and out["domain_macro_true_score"] == pytest.approx(0.45)
    assert out["macro_true_score_se"] == pytest.approx(0.13 / 3)  # √(0.03² + 0.04² + 0.12²) / 3
    assert out["domain_macro_judge_score"] == pytest.approx((0.4 + 0.4) / 2)


def _two_criteria_task():
    """Two criteria the probe response does not meet (false positives are the errors) and one it meets."""
    def kw(term):
        return build_check({"type": "keyword_any", "terms": [term]})

    rubric = (Criterion("no1", "no one", 1, "important", check=kw("absent1")),
              Criterion("no2", "no two", 1, "important", check=kw("absent2")),
              Criterion("yes", "yes", 1, "important", check=kw("present")))
    return TaskInstance("joint", "prompt", rubric)


def test_a_calls_leniency_moves_its_criteria_together():
    """Leniency is drawn once per call: two not-met criteria are misjudged together with probability
    E[p(z)²] > p² (z the call's leniency), and a met one's false negative and a not-met one's false
    positive move in opposite directions, E[p⁺(z)p⁻(z)] < p⁺p⁻. Counts over 20,000 calls, within a
    two-sided binomial tolerance at level 1e-4."""
    profile = NoiseProfile("joint", false_positive=dict.fromkeys(CATEGORIES, 0.1),
                           false_negative=dict.fromkeys(CATEGORIES, 0.1), leniency_sd=1.5)
    task, n = _two_criteria_task(), 20_000
    responses = [f"present w{i} pad pad pad" for i in range(n)]
    grades = RubricGrader(profile).grade_group(task, responses, np.random.default_rng(7))
    wrong = np.stack([g.verdicts != g.true_verdicts for g in grades])
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    length = profile.length_shift(np.array(5.0))
    fp = 1 / (1 + np.exp(-(np.log(0.1 / 0.9) + length + 1.5 * nodes)))  # toward "met": leniency raises FP
    fn = 1 / (1 + np.exp(-(np.log(0.1 / 0.9) - length - 1.5 * nodes)))  # and lowers FN
    both_fp, mixed = float(weights @ (fp * fp)), float(weights @ (fn * fp))
    assert both_fp > 1.3 * float(weights @ fp) ** 2 and mixed < 0.7 * float(weights @ fn) * float(weights @ fp)
    assert binomial_ok(int((wrong[:, 0] & wrong[:, 1]).sum()), n, both_fp)
    assert binomial_ok(int((wrong[:, 0] & wrong[:, 2]).sum()), n, mixed)


def test_the_threshold_grid_picks_the_ceiling_rank_at_each_level():
    """Ten D1 scores, levels 15%, 25%, 50%, 100%: accept ⌈0.15·10⌉ = 2, 3, 5, 10 groups, so τ are the
    2nd, 3rd, 5th and 10th highest scores."""
    scores = np.array([0.31, 0.9, 0.12, 0.77, 0.5, 0.66, 0.05, 0.83, 0.44, 0.21])
    grid = sm.threshold_grid(scores, np.array([0.15, 0.25, 0.5, 1.0]))
    assert grid.tolist() == [0.83, 0.77, 0.5, 0.05]


def _stepped_agent(**changes):
    from test_setgrpo_agent import _agent, _groups

    agent, harness = _agent(np.random.default_rng(0), **changes)
    harness.audit_rng = np.random.default_rng(11)
    rewards = np.random.default_rng(1).uniform(size=(16, 6))
    return harness.step(agent, _groups(rewards, np.full_like(rewards, 0.15)), update=False)


def test_a_steps_reference_statistics_count_by_hand():
    """Coverage of a* by the box of radius q·σ (q = 4: the box of radius σ covers none of these), and
    reversals counted over the audited groups the gate accepted only (q = 1.5: half of them)."""
    decision = _stepped_agent(calibrate=False, fixed_q=4.0)
    audited = [r for r in decision.records if r.a_ref is not None]
    covered = [bool(np.all(np.abs(r.a_ref - r.a_hat) <= 4.0 * r.sigma + 1e-9)) for r in audited]
    assert decision.stats["n_covered_ref"] == sum(covered) > 0 and decision.stats["n_audited"] == len(audited)
    assert not any(np.all(np.abs(r.a_ref - r.a_hat) <= r.sigma + 1e-9) for r in audited)
    decision = _stepped_agent(calibrate=False, fixed_q=1.5)
    audited = [r for r in decision.records if r.a_ref is not None]
    accepted = [r for r in audited if r.accepted]
    assert 0 < len(accepted) < len(audited)
    assert decision.stats["n_audited_accepted"] == len(accepted)
    assert decision.stats["n_reversed_ref"] == sum(float(r.executed @ r.gram @ r.a_ref) < 0 for r in accepted)


def test_true_score_diagnostics_by_hand():
    """Coverage of a_true by the box, reversal of the *executed* vector against a_true over accepted
    groups, and the share of GRPO's true-aligned progress Σ cᵀKa_true / Σ âᵀKa_true that is kept."""
    from setgrpo_bench.agents.base import GroupRecord
    from setgrpo_bench.agents.coefficients import grpo_coefficients
    from setgrpo_bench.harness.diagnostics import true_score_diagnostics

    true = np.array([[0.1, 0.5, 0.9], [0.8, 0.2, 0.3]])
    a_true = [grpo_coefficients(row) for row in true]
    gram = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
    valid = np.ones(3, bool)
    records = [GroupRecord(0, valid, a_hat=np.array([-1.0, 0.2, 0.8]), sigma=np.ones(3), rho=np.full(3, 0.5), gram=gram,
                           executed=np.array([-0.4, 0.1, 0.3]), score=0.4, certifiable=True, accepted=True),
               GroupRecord(1, valid, a_hat=np.array([0.9, -0.6, -0.3]), sigma=np.ones(3), rho=np.full(3, 0.1), gram=gram,
                           executed=np.array([-0.5, 0.2, 0.3]), score=0.2, certifiable=True, accepted=True)]
    out = true_score_diagnostics(records, true, std_floor=0.05)
    kept = sum(float(r.executed @ gram @ a) for r, a in zip(records, a_true))
    full = sum(float(r.a_hat @ gram @ a) for r, a in zip(records, a_true))
    assert out["alignment_executed_true"] == pytest.approx(kept) and out["alignment_grpo_true"] == pytest.approx(full)
    assert out["retained_alignment"] == pytest.approx(kept / full)
    assert out["n_reversed_true"] == 1 and out["reversal_true"] == 0.5  # the second executed vector opposes a_true
    covered = [bool(np.all(np.abs(a - r.a_hat) <= r.rho + 1e-9)) for r, a in zip(records, a_true)]
    assert out["n_covered_true"] == sum(covered)


def test_likert_scores_round_to_the_nearest_level():
    """True score 0.7 on a 5-level scale (0, .25, .5, .75, 1) is reported as 0.75 (0.5 if it were floored)."""
    profile = NoiseProfile("likert", false_positive=dict.fromkeys(CATEGORIES, 0.0),
                           false_negative=dict.fromkeys(CATEGORIES, 0.0), likert_levels=5)
    rubric = tuple(Criterion(f"c{i}", f"c{i}", p, "important", check=build_check({"type": "keyword_any", "terms": [f"k{i}"]}))
                   for i, p in enumerate((3, 4, 3)))
    task = TaskInstance("likert", "prompt", rubric)
    grade = RubricGrader(profile).grade(task, "k0 k1", np.random.default_rng(0))
    assert grade.true_score == pytest.approx(0.7) and grade.score == 0.75


def test_the_judges_spread_uses_the_stated_rate_of_each_observed_verdict():
    """σ_judge = √(Σ w_j² r_j(1 − r_j)), r_j the false-positive rate where the verdict says met and the
    false-negative rate where it says not met (w_j = points / Σ positive points)."""
    profile = NoiseProfile("asym", false_positive=dict.fromkeys(CATEGORIES, 0.1),
                           false_negative=dict.fromkeys(CATEGORIES, 0.3))
    rubric = tuple(Criterion(f"c{i}", f"c{i}", p, "important", check=build_check({"type": "keyword_any", "terms": [f"k{i}"]}))
                   for i, p in enumerate((1, 2, 3)))
    task = TaskInstance("spread", "prompt", rubric)
    grades = RubricGrader(profile).grade_group(task, ["k0 k2"] * 50, np.random.default_rng(3))
    w = np.array([1, 2, 3]) / 6
    for g in grades:
        r = np.where(g.verdicts, 0.1, 0.3)
        assert g.spread == pytest.approx(float(np.sqrt((w**2 * r * (1 - r)).sum())))
    assert len({g.spread for g in grades}) > 1  # the verdicts differ between calls, and so do the spreads


def test_auroc_is_the_mann_whitney_probability_by_hand():
    from setgrpo_bench.graders.measure import auroc

    # positives 0.9, 0.4; negatives 0.1, 0.4, 0.6: pairs won 3 of 6, 0.4 vs 0.4 tied (half), 0.4 < 0.6 lost
    assert auroc(np.array([0.9, 0.4, 0.1, 0.4, 0.6]), np.array([True, True, False, False, False])) == pytest.approx(
        (3 + 1 + 0.5) / 6)
    assert auroc(np.array([1.0, 2.0]), np.array([False, True])) == 1.0
    assert math.isnan(auroc(np.array([1.0, 2.0]), np.array([True, True])))



def test_label_measures_by_hand():
    from setgrpo_bench.graders.measure import label_measures

    p = np.array([0.05, 0.15, 0.95, 0.75, 0.72])
    met = np.array([False, True, True, False, True])
    # bins: 0 holds 0.05 (freq 0), 1 holds 0.15 (freq 1), 7 holds 0.75 and 0.72 (mean 0.735, freq ½), 9 holds 0.95 (1)
    ece = (0.05 * 1 + 0.85 * 1 + abs(0.735 - 0.5) * 2 + 0.05 * 1) / 5
    measured = label_measures(p, met)
    assert measured["ece"] == pytest.approx(ece)
    assert measured["accuracy"] == pytest.approx(3 / 5)  # 0.05 no ✓, 0.15 no ✗, 0.95 ✓, 0.75 ✗, 0.72 ✓
    assert measured["auroc"] == pytest.approx(4 / 6)  # positives 0.15, 0.95, 0.72 beat 0.05 (3) and 0.75 (1)


def test_judges_measure_reports_each_profile_on_the_same_responses(small_policy, tmp_path):
    import json

    from setgrpo_bench.cli import main

    out = tmp_path / "judges.json"
    assert main(["judges", "measure", "--policy", small_policy, "--prompts", "6", "--group-size", "3",
                 "--profiles", "clean,harsh", "--out", str(out)]) == 0
    result = json.loads(out.read_text())["profiles"]
    assert result["clean"]["error_rms"] == 0.0 and result["clean"]["verdict_error"] == 0.0
    assert result["harsh"]["error_rms"] > 0.05 and result["harsh"]["graded"] == result["clean"]["graded"]
    assert result["clean"]["labels"]["accuracy"] == 1.0 and result["harsh"]["labels"]["accuracy"] < 1.0
    pooled = tmp_path / "pooled.json"  # two policies' samples pooled, --prompts each
    assert main(["judges", "measure", "--policy", f"{small_policy},{small_policy}", "--prompts", "6", "--group-size", "3",
                 "--profiles", "clean", "--out", str(pooled)]) == 0
    assert json.loads(pooled.read_text())["profiles"]["clean"]["graded"] == 2 * result["clean"]["graded"]


def test_overoptimisation_statistics_by_hand():
    """Two seeds, 6 steps in blocks of 2: true block means (0.3, 0.5, 0.4) and (0.1, 0.3, 0.1) peak in the
    middle block; the drops 0.1 and 0.2 give 0.15 ± 0.05; the judge rises from 0.2 to 0.6."""
    from setgrpo_bench.harness.overoptimisation import overoptimisation

    true = np.array([[0.2, 0.4, 0.6, 0.4, 0.4, 0.4], [0.0, 0.2, 0.2, 0.4, 0.0, 0.2]])
    judge = np.array([[0.1, 0.3, 0.4, 0.4, 0.6, 0.6], [0.1, 0.3, 0.4, 0.4, 0.6, 0.6]])
    out = overoptimisation(judge, true, block=2)
    assert out["peak_block"] == 1 and out["true_peak"] == pytest.approx(0.4) and out["true_end"] == pytest.approx(0.25)
    assert out["drop"] == pytest.approx(0.15) and out["drop_se"] == pytest.approx(0.05) and out["drop_in_se"] == pytest.approx(3.0)
    assert out["judge_gain"] == pytest.approx(0.4) and out["judge_minus_true_end"] == pytest.approx(0.35)
