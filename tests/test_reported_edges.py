"""The modules that compute reported numbers at their edges (DESIGN §9): pooled rates of runs that did not
log every count, seed aggregation and its bootstrap, the judge's fingerprint and marginal error rate, and
the stopping rule's audits."""

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import groups_of
from scipy.stats import bootstrap

from setgrpo_bench.agents.base import RuleAgent
from setgrpo_bench.agents.config import StopSettings
from setgrpo_bench.agents.stopping import StoppingAgent, audit_gap
from setgrpo_bench.catalog import ENV_VAR
from setgrpo_bench.errors import UnknownNameError
from setgrpo_bench.graders import NoiseProfile
from setgrpo_bench.graders.noise import HERMITE, load_profile
from setgrpo_bench.harness.overoptimisation import (
    curves,
    held_out_grid,
    held_out_overoptimisation,
    overoptimisation,
)
from setgrpo_bench.harness.pooled import COUNTS, RATES, SUMS, pool, pool_seeds, summarise_diagnostics
from setgrpo_bench.leaderboard.aggregate import aggregate_seeds, bootstrap_ci


# ---------------------------------------------------------------- pooled rates
def test_pooling_counts_a_run_did_not_log_as_zero():
    out = pool({})
    assert all(out[rate] is None and out[f"{rate}_low"] is None for rate in RATES)
    assert all(out[k] == 0 and isinstance(out[k], int) for k in COUNTS)
    assert all(out[k] == 0.0 for k in SUMS)
    partial = pool({"n_audited": 4})  # covered never logged: 0 of 4
    assert partial["coverage_ref"] == 0.0 and partial["n_covered_ref"] == 0


def test_a_run_without_some_counts_and_with_no_finite_q():
    steps = [{"n_audited": 2, "n_covered_ref": 1, "q": None}, {"n_audited": 3, "q": math.inf}]
    out = summarise_diagnostics(steps)
    assert out["n_audited"] == 5 and out["n_covered_ref"] == 1 and out["coverage_ref"] == 0.2
    assert out["q"] is None and out["tau"] is None  # no finite q; no step logged τ̂


def test_seeds_without_diagnostics_are_left_out_and_missing_counts_are_zero():
    assert pool_seeds([{}, {"q": 5.0}]) == {}  # no seed built a set
    out = pool_seeds([{"n_audited": 4, "n_covered_ref": 2, "q": None}, {"n_audited": 6}])
    assert out["n_audited"] == 10 and out["n_covered_ref"] == 2 and out["q"] is None


# ---------------------------------------------------------------- seed aggregation
def test_the_bootstrap_is_scipys_percentile_interval_over_seeds_reproducibly():
    per_seed = np.random.default_rng(1).random((12, 2))  # enough seeds that 2,000 resamples is not 2,001
    means = per_seed.mean(axis=1)
    expected = bootstrap((means,), np.mean, n_resamples=2000, confidence_level=0.9, method="percentile",
                         random_state=np.random.default_rng(5)).confidence_interval
    got = bootstrap_ci(per_seed, [0, 1], rng=np.random.default_rng(5), level=0.9)
    assert got == (expected.low, expected.high)
    assert bootstrap_ci(per_seed, [0, 1], rng=np.random.default_rng(5)) != got  # the level is used


def test_the_bootstrap_of_seeds_that_agree_or_of_one_seed_is_the_point():
    point = float(np.mean([0.4, 0.4, 0.4]))
    assert bootstrap_ci(np.array([[0.4], [0.4], [0.4]]), [0], rng=np.random.default_rng(0)) == (point, point)
    assert bootstrap_ci(np.array([[0.3, 0.5]]), [0, 1], rng=np.random.default_rng(0)) == (0.4, 0.4)
    low, high = bootstrap_ci(np.array([[0.0], [1.0], [0.0], [1.0]]), [0], rng=np.random.default_rng(0))
    assert low < high  # seeds a whole unit apart are not "seeds that agree"


def test_aggregation_is_reproducible_and_seeded_at_zero_by_default():
    rng = np.random.default_rng(0)
    per_seed, judge = rng.random((6, 2)), np.full((6, 2), 0.5)
    initial = np.array([[0.3, 0.35], [0.32, 0.3], [0.34, 0.33]] * 2)
    runs = [aggregate_seeds(per_seed, judge, ["a", "b"], ["x", "y"], initial_per_seed=initial) for _ in range(2)]
    assert runs[0] == runs[1] == aggregate_seeds(per_seed, judge, ["a", "b"], ["x", "y"], seed=0, initial_per_seed=initial)
    assert runs[0] != aggregate_seeds(per_seed, judge, ["a", "b"], ["x", "y"], seed=1, initial_per_seed=initial)
    results, groups, macro = runs[0]
    assert results["a"]["initial_true_score"] == pytest.approx(0.32) and groups["y"]["initial_true_score"] == pytest.approx(
        (0.35 + 0.3 + 0.33) / 3)
    assert macro["initial_true_score"] == pytest.approx(initial.mean())


# ---------------------------------------------------------------- the judge's profile
RATES_01 = dict.fromkeys(["essential", "important", "optional", "pitfall"], 0.1)

def test_a_profile_reads_back_from_its_mapping_without_its_kind():
    profile = load_profile("realistic")
    assert NoiseProfile.from_dict({"kind": "noise", **profile.to_dict()}) == profile
    assert all(type(v) is dict for v in profile.to_dict().values() if isinstance(v, dict))


def test_a_profiles_record_keeps_its_zero_fields_and_leaves_out_only_an_absent_bias():
    """Suite hashes are made from this record: a field at zero is recorded like any other value."""
    record = load_profile("clean").to_dict()
    assert record["leniency_sd"] == 0.0 and record["likert_levels"] == 0 and record["length_favours"] is False
    assert "bias" not in record and set(record) == {f for f in NoiseProfile.__dataclass_fields__ if f != "bias"}


def test_the_fingerprint_keeps_what_defines_the_scores_only():
    base = dict(name="p", false_positive=RATES_01, false_negative=RATES_01)
    quiet = NoiseProfile(**base, cost=3.0).fingerprint()
    assert "cost" not in quiet and "gross_error_rate" not in quiet and "gross_flip" not in quiet
    assert "length_favours" not in quiet and "difficulty_sd" not in quiet  # off: as before they existed
    gross = NoiseProfile(**base, gross_error_rate=0.05, length_favours=True, difficulty_sd=0.5).fingerprint()
    assert gross["gross_error_rate"] == 0.05 and gross["gross_flip"] == 0.8
    assert gross["length_favours"] is True and gross["difficulty_sd"] == 0.5


def test_the_marginal_error_rate_by_hand():
    """Rate 0 makes errors only in gross calls (g·f); otherwise the logit-normal integral with the length
    shift signed by the direction of the error, floored by the persistent share of the base rate."""
    base = dict(name="p", false_positive=RATES_01, false_negative=RATES_01)
    assert NoiseProfile(**base, gross_error_rate=0.1, gross_flip=0.5).expected_error_rate(0.0) == pytest.approx(0.05)
    p = NoiseProfile(**base, leniency_sd=0.7, difficulty_sd=0.4, length_bias=0.35, reference_words=50,
                     persistent_share=0.5, gross_error_rate=0.02, gross_flip=0.8)
    nodes, weights = HERMITE
    spread = math.hypot(0.7, 0.4)
    for toward_met, sign in ((True, 1.0), (False, -1.0)):
        shift = sign * 0.35 * math.log2(100 / 50)
        base_rate = 1 / (1 + math.exp(-(math.log(0.1 / 0.9) + shift)))
        total = np.maximum(1 / (1 + np.exp(-(math.log(0.1 / 0.9) + shift + spread * nodes))), 0.5 * base_rate)
        expected = 0.98 * float(weights @ total / weights.sum()) + 0.02 * 0.8
        assert p.expected_error_rate(0.1, 100, toward_met=toward_met) == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------- the stopping rule's audits
def test_a_gap_rule_audits_distinctgroups_of():
    agent = StoppingAgent(RuleAgent("grpo", std_floor=0.05), StopSettings(stop="audit_gap", stop_audits=4))
    assert agent.stopped is False
    groups = groups_of(np.zeros((4, 3)))
    for seed in range(10):
        assert agent.needs(groups, np.random.default_rng(seed)).audits == (0, 1, 2, 3)


def test_audits_with_no_response_graded_twice_give_no_gap_and_no_warning():
    rewards = np.array([[0.5, np.nan], [0.2, 0.3]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(audit_gap(rewards, {0: np.array([np.nan, 0.4]), 1: np.array([np.nan, np.nan])}))


# ---------------------------------------------------------------- over-optimisation
def test_overoptimisation_by_hand():
    """Two seeds, 4 steps in blocks of 2: true blocks (0.4, 0.2) and (0.6, 0.5), mean (0.5, 0.35): peak
    block 0, drops 0.2 and 0.1 (mean 0.15, SE 0.05, 3 SE); the judge rises 0.3 → 0.7."""
    true = np.array([[0.4, 0.4, 0.2, 0.2], [0.6, 0.6, 0.5, 0.5]])
    judge = np.array([[0.2, 0.4, 0.6, 0.8], [0.3, 0.3, 0.7, 0.7]])
    out = overoptimisation(judge, true, block=2)
    expected = {"seeds": 2, "steps": 4, "block": 2, "true_blocks": [0.5, 0.35], "judge_blocks": [0.3, 0.7],
                "peak_block": 0, "true_peak": 0.5, "true_end": 0.35, "drop": 0.15, "drop_se": 0.05, "drop_in_se": 3.0,
                "judge_gain": 0.4, "judge_minus_true_end": 0.35}
    assert out.keys() == expected.keys()
    assert out == {k: pytest.approx(v) for k, v in expected.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one seed has no spread to compute, not a NaN from a warning
        one = overoptimisation(judge[:1], true[:1], block=2)
    assert math.isnan(one["drop_se"]) and math.isnan(one["drop_in_se"])
    assert overoptimisation(np.tile(judge, 10), np.tile(true, 10))["block"] == 20  # blocks of 20 steps by default
    flat = overoptimisation(judge, np.array([[0.4, 0.4, 0.2, 0.2], [0.5, 0.5, 0.3, 0.3]]), block=2)
    assert flat["drop_se"] == 0.0 and math.isnan(flat["drop_in_se"])  # every seed drops 0.2: no spread to divide by


def test_held_out_curves_by_hand():
    grid, values = held_out_grid([[{"step": 0, "true_score": 0.3}, {"step": 20, "true_score": 0.5}],
                                  [{"step": 0, "true_score": 0.4}, {"step": 20, "true_score": 0.45},
                                   {"step": 30, "true_score": 0.35}]], steps=30, every=20)
    assert grid == [0, 20, 30] and values.tolist() == [[0.3, 0.5, 0.5], [0.4, 0.45, 0.35]]  # a stopped run keeps its last
    assert held_out_grid([[{"step": 0, "true_score": 0.3}]], steps=10, every=0)[0] == [0, 10]
    out = held_out_overoptimisation(grid, values)
    assert out == pytest.approx({"peak_step": 20, "true_peak": 0.475, "true_end": 0.425, "drop": 0.05, "drop_se": 0.05})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(held_out_overoptimisation(grid, values[:1])["drop_se"])


def test_curves_keep_the_steps_every_run_has(tmp_path):
    for name, n in (("a", 3), ("b", 2)):
        (tmp_path / name).mkdir()
        rows = [{"step": t + 1, "reward": 0.1 * t, "true_score": 0.2 * t} for t in range(n)]
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge, true = curves([tmp_path / "a", tmp_path / "b"])
    assert judge.shape == true.shape == (2, 2) and true.dtype == float
    assert judge.tolist() == [[0.0, 0.1], [0.0, 0.1]] and true.tolist() == [[0.0, 0.2], [0.0, 0.2]]


def test_the_length_shift_counts_an_empty_response_as_one_word():
    p = NoiseProfile(name="p", false_positive=RATES_01, false_negative=RATES_01, length_bias=0.5, reference_words=4)
    assert p.length_shift(np.array([0, 1, 8])).tolist() == [-1.0, -1.0, 0.5]


def test_a_profile_loads_from_a_yaml_path_of_either_suffix_and_only_from_one(tmp_path):
    text = (Path(__file__).parents[1] / "graders" / "realistic.yaml").read_text()
    (tmp_path / "mine.yml").write_text(text)
    (tmp_path / "mine.txt").write_text(text)
    assert load_profile(tmp_path / "mine.yml") == load_profile("realistic")
    with pytest.raises(UnknownNameError, match="noise profile"):
        load_profile(tmp_path / "mine.txt")


def test_a_profile_in_a_catalog_added_later_is_found(tmp_path, monkeypatch):
    load_profile("realistic")  # the catalog's profiles are read and kept
    (tmp_path / "graders").mkdir()
    text = (Path(__file__).parents[1] / "graders" / "realistic.yaml").read_text()
    (tmp_path / "graders" / "later.yaml").write_text(text.replace("name: realistic", "name: later"))
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert load_profile("later").name == "later"
