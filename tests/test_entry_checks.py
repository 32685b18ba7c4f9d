"""The checks that make a board entry trustworthy (leaderboard/verify.py, leaderboard/provenance.py), one
field at a time on a shipped entry and its runs: each check passes the honest record and names the field
it was given wrong."""

import copy
import json
import shutil
from pathlib import Path

import pytest

from setgrpo_bench.harness.rundir import read_json, read_metrics
from setgrpo_bench.leaderboard.provenance import entry_problems, preset_problems, run_problems
from setgrpo_bench.leaderboard.verify import entry_differences, rebuild_entry, verify_entry

SHIPPED = Path(__file__).resolve().parents[1] / "leaderboard" / "v2"  # board v2: archived, complete
V1 = SHIPPED.parent / "v1"
GRPO, SETGRPO = "grpo-clean-b07f9613", "setgrpo-clean-b07f9613"


def _entry(name: str, board: Path = SHIPPED) -> dict:
    return read_json(board / "results" / f"{name}.json")


@pytest.fixture
def runs(tmp_path) -> Path:
    """A copy of the shipped runs of the GRPO entry (as a board keeps them: no weights)."""
    shutil.copytree(SHIPPED / "runs" / GRPO, tmp_path / GRPO)
    return tmp_path


def test_an_honest_entry_is_verified_and_rebuilt_with_its_own_command(runs):
    entry = _entry(GRPO)
    assert verify_entry(entry, runs) == []
    rebuilt = rebuild_entry(entry, runs)
    assert rebuilt["command"] == entry["command"] and rebuilt["name"] == entry["name"]
    assert rebuilt["date"] != entry["date"]  # made now: the date is a publish-time field


def test_an_entry_without_all_its_runs_is_unverified_not_rejected(runs):
    (runs / GRPO / "seed2" / "eval.json.gz").unlink()
    assert verify_entry(_entry(GRPO), runs) is None


def test_a_run_whose_manifest_is_gone_or_other_is_named_by_seed(runs):
    (runs / GRPO / "seed1" / "manifest.json.gz").unlink()
    problems = verify_entry(_entry(GRPO), runs)
    assert problems[0] == "seed 1: its run's manifest is not the one the entry records"
    assert "seed1/manifest.json is missing" in problems[1] and problems[2].startswith("differs from what its runs")


def test_a_manifest_may_list_weights_the_board_does_not_keep_but_not_other_weights(runs):
    entry = _entry(GRPO)
    listed = [n for n in read_json(runs / GRPO / "seed0" / "manifest.json")["files"] if n.startswith("checkpoints/")]
    assert listed and verify_entry(entry, runs) == []
    (runs / GRPO / "seed0" / listed[0]).parent.mkdir(parents=True)
    (runs / GRPO / "seed0" / listed[0]).write_bytes(b"other weights")
    assert any("model.safetensors differs from the run's manifest" in p for p in verify_entry(entry, runs))


@pytest.mark.parametrize("edited, tail", [(1, ""), (5, ""), (6, " and 1 more"), (7, " and 2 more")])
def test_an_entry_that_differs_from_its_runs_names_six_fields_macro_first_and_counts_the_rest(runs, edited, tail):
    entry = copy.deepcopy(_entry(GRPO))
    entry["macro"]["judge_score"] += 0.01
    entry["groups"]["health"]["judge_score"] += 0.01  # sorts before "macro." but is named after it
    names = list(entry["results"])[:edited - 1]
    for name in names:
        entry["results"][name]["judge_score"] += 0.01
    [problem] = verify_entry(entry, runs)
    shown = ["groups.health.judge_score", *sorted(f"results.{n}.judge_score" for n in names)][:5]
    assert problem == f"differs from what its runs in {runs} give: {', '.join(['macro.judge_score', *shown])}{tail}"


def test_an_entry_is_rebuilt_under_its_own_name_and_schema(tmp_path):
    shutil.copytree(SHIPPED / "runs" / GRPO, tmp_path / "renamed")
    entry = {**_entry(GRPO), "name": "renamed"}
    assert verify_entry(entry, tmp_path) == [] and rebuild_entry(entry, tmp_path)["name"] == "renamed"
    old = _entry(GRPO, V1)  # schema 2
    shutil.copytree(V1 / "runs" / GRPO, tmp_path / "v1" / GRPO)
    assert old["schema_version"] == 2 and verify_entry(old, tmp_path / "v1") == []
    from setgrpo_bench.harness.rundir import finite_json
    from setgrpo_bench.leaderboard.submission import make_submission

    earlier = finite_json(make_submission(sorted((tmp_path / "renamed").glob("seed*")), name="renamed",
                                          command=entry["command"], schema_version=4))  # runs that could give 5
    assert earlier["schema_version"] == 4 and verify_entry(json.loads(json.dumps(earlier)), tmp_path) == []


def test_runs_that_cannot_make_the_entry_again_are_named(runs):
    shutil.rmtree(runs / GRPO / "seed1")
    shutil.copytree(SHIPPED / "runs" / SETGRPO / "seed1", runs / GRPO / "seed1")  # another agent's run
    problems = verify_entry(_entry(GRPO), runs)
    assert problems[-1].startswith("its runs cannot be published again: ")


def test_entry_differences_compare_numbers_within_a_relative_and_an_absolute_tolerance():
    assert entry_differences({"x": 0.0}, {"x": 5e-10}) == []  # near zero the absolute tolerance decides
    assert entry_differences({"x": 0.0}, {"x": 5e-9}) == ["x"]
    assert entry_differences({"x": 1e6}, {"x": 1e6 * (1 + 5e-10)}) == []  # far from zero the relative one
    assert entry_differences({"x": 1e6}, {"x": 1e6 * (1 + 5e-9)}) == ["x"]
    assert entry_differences({"a": {"b": [1.0, 2.0]}}, {"a": {"b": [1.0, 2.001]}}, rel=1e-2) == []  # at every depth
    assert entry_differences({"a": {"b": [1.0, 2.0]}}, {"a": {"b": [1.0, 2.001]}}) == ["a.b.1"]


def test_entry_differences_keep_date_and_hash_aside_only_at_the_top_and_booleans_exact():
    assert entry_differences({"date": "a", "git_hash": "b"}, {"date": "c", "git_hash": "d"}) == []
    assert entry_differences({"runs": [{"date": "a"}]}, {"runs": [{"date": "c"}]}) == ["runs.0.date"]
    assert entry_differences({"flag": True}, {"flag": 1 + 1e-12}) == ["flag"]  # a boolean is not a number
    assert entry_differences({"seeds": [0, 1]}, {"seeds": [0, 1, 2]}) == ["seeds"]
    assert entry_differences({"a": 1}, {"b": 1}) == ["a", "b"]
    assert entry_differences({"maX": 1}, {"maX": 2}) == ["maX"]  # a name is kept whole


# ------------------------------------------------------------------ one run's files


def _run(name: str = SETGRPO, seed: int = 0) -> tuple[dict, dict, object]:
    folder = SHIPPED / "runs" / name / f"seed{seed}"
    return read_json(folder / "config.json"), read_json(folder / "eval.json"), read_metrics(folder / "metrics.jsonl")


def test_an_honest_run_has_no_problem():
    for name in (GRPO, SETGRPO):
        assert run_problems(*_run(name)) == []


@pytest.mark.parametrize("edit, expected", [
    (lambda c, r, m: r.update(steps=119), "eval.json is of a 119-step run, config.json of a 120-step one"),
    (lambda c, r, m: r["initial"].update(per_env={}), "eval.json: the initial evaluation has no per-benchmark scores"),
    (lambda c, r, m: r.update(final=None), "eval.json: the final evaluation has no per-benchmark scores"),
    (lambda c, r, m: r["final"].update(macro_true_score=0.9), "eval.json: the final macro_true_score 0.9 is not what"),
    (lambda c, r, m: r["initial"].update(domain_macro_judge_score=0.9), "eval.json: the initial domain_macro_judge_score 0.9"),
    (lambda c, r, m: r["final"].update(macro_judge_score_se=0.9), "eval.json: the final macro_judge_score_se 0.9"),
    (lambda c, r, m: r["final"].update(macro_true_score_se=0.9), "eval.json: the final macro_true_score_se 0.9"),
    (lambda c, r, m: r["final"]["domains"]["health"].update(true_score_se=0.9),
     "eval.json: the final health scores are not the mean of its benchmarks"),
    (lambda c, r, m: r["final"]["domains"]["health"].update(true_score=0.9),
     "eval.json: the final health scores are not the mean of its benchmarks"),
    (lambda c, r, m: r["initial"]["domains"]["writing"].update(judge_score=0.9),
     "eval.json: the initial writing scores are not the mean of its benchmarks"),
    (lambda c, r, m: r["final"]["domains"].pop("science"), "eval.json: the final science scores are not the mean"),
    (lambda c, r, m: r.update(grader_calls=r["grader_calls"] + 1), "eval.json: grader_calls "),
    (lambda c, r, m: r.update(audit_calls=r["audit_calls"] + 1), "eval.json: audit_calls "),
    (lambda c, r, m: r.update(grader_cost=r["grader_cost"] * 1.001), "eval.json: grader_cost "),
    (lambda c, r, m: r["diagnostics"].update(tau=0.5), "eval.json: SetGRPO statistics ['tau'] are not what"),
    (lambda c, r, m: r["diagnostics"].update(made_up=0.5), "eval.json: SetGRPO statistics ['made_up'] are not what"),
    (lambda c, r, m: r["diagnostics"].update(q=0.5, tau=0.5, n_accepted=1, n_audited=1, coverage_ref=0.5),
     "eval.json: SetGRPO statistics ['coverage_ref', 'n_accepted', 'n_audited', 'q'] are not what"),  # the first 4
    (lambda c, r, m: r["updates"].update(param_step=0.5), "eval.json: update statistics ['param_step'] are not what"),
    (lambda c, r, m: r["updates"].update(made_up=0.5), "eval.json: update statistics ['made_up'] are not what"),
    (lambda c, r, m: m.records[3].update(step=3), "metrics.jsonl: step 3 is logged more than once; step 4 is missing"),
])
def test_each_contradiction_in_a_run_is_named(edit, expected):
    config, result, metrics = _run()
    edit(config, result, metrics)
    problems = run_problems(config, result, metrics)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_run_with_a_step_missing_names_it_and_the_sums_it_breaks():
    config, result, metrics = _run()
    lost = metrics.records.pop(4)["grader_calls"]
    problems = run_problems(config, result, metrics)
    assert problems[:2] == ["metrics.jsonl: step 5 is missing",
                            f"eval.json: grader_calls {result['grader_calls']} is not the sum over metrics.jsonl "
                            f"({result['grader_calls'] - lost})"]


def test_run_numbers_agree_within_a_relative_and_an_absolute_tolerance():
    config, result, metrics = _run()
    assert result["diagnostics"]["q"] == 0.0
    result["diagnostics"]["q"] = 5e-10  # near zero the absolute tolerance decides
    result["grader_cost"] *= 1 + 5e-10  # a large sum: the relative one
    assert run_problems(config, result, metrics) == []


def test_both_evaluations_are_checked_even_when_the_first_has_no_scores():
    config, result, metrics = _run()
    result["initial"]["per_env"] = {}
    result["final"]["macro_true_score"] = 0.9
    problems = run_problems(config, result, metrics)
    assert problems[0] == "eval.json: the initial evaluation has no per-benchmark scores"
    assert problems[1].startswith("eval.json: the final macro_true_score 0.9 is not what") and len(problems) == 2


def test_a_metrics_record_without_a_call_count_counts_none():
    config, result, metrics = _run(GRPO)
    lost = metrics.records[2].pop("grader_calls")
    for record in metrics.records:
        del record["audit_calls"]
    result["audit_calls"] = result["grader_calls"]
    problems = run_problems(config, result, metrics)
    assert problems == [f"eval.json: {key} {result[key]} is not the sum over metrics.jsonl ({result[key] - lost})"
                        for key in ("grader_calls", "audit_calls")]


def test_a_runs_reversal_by_block_must_be_what_its_metrics_give():
    from setgrpo_bench.harness.pooled import drift_diagnostics

    config, result, metrics = _run()
    result["drift"] = drift_diagnostics(metrics.records)
    assert run_problems(config, result, metrics) == []
    result["drift"]["blocks"][2]["n_reversed_ref"] -= 1
    assert run_problems(config, result, metrics) == [
        "eval.json: the reversal by block and by window age is not what metrics.jsonl gives"]


def test_a_runs_hacking_anatomy_must_be_what_its_curve_and_metrics_give():
    from setgrpo_bench.files import finite_json
    from setgrpo_bench.harness.hacking import hacking_anatomy

    config, result, metrics = _run()
    result["curve"] = [{"step": 20 * i, "true_score": 0.35, "judge_score": 0.3 + 0.02 * i, "judge_score_se": 0.01,
                        "true_score_se": 0.01} for i in range(4)]
    for i, record in enumerate(metrics.records):
        record["feature_rate"] = 0.03 + 0.01 * max(0, i - 40)
    result["hacking"] = finite_json(hacking_anatomy(result["curve"], metrics.records))
    assert result["hacking"]["discovery_step"] is not None
    assert run_problems(config, result, metrics) == []
    expected = ["eval.json: the hacking onset and the bias's discovery are not what its curve and metrics.jsonl give"]
    result["hacking"]["discovery_step"] += 1
    assert run_problems(config, result, metrics) == expected
    result["hacking"]["discovery_step"] -= 1
    result["curve"][-1]["judge_score"] += 0.2
    assert run_problems(config, result, metrics) == expected


def test_a_run_made_before_updates_were_logged_is_checked_without_them():
    config, result, metrics = _run()
    del result["updates"]
    assert run_problems(config, result, metrics) == []


def test_a_run_without_a_judge_call_is_refused():
    config, result, metrics = _run(GRPO)
    for record in metrics.records:
        record.update(grader_calls=0, grader_cost=0)
    result.update(grader_calls=0, grader_cost=0)
    assert run_problems(config, result, metrics) == ["eval.json: no judge call was made (grader_calls is 0)"]


def test_the_judge_calls_of_runs_made_before_audits_were_counted_apart_are_its_grader_calls():
    config, result, metrics = _run(GRPO)
    for record in metrics.records:
        del record["audit_calls"], record["grader_cost"]
    result.update(audit_calls=result["grader_calls"], grader_cost=result["grader_calls"])
    assert run_problems(config, result, metrics) == []


# ------------------------------------------------------------------ one entry


def test_an_honest_entry_has_no_problem_on_either_schema():
    assert entry_problems(_entry(SETGRPO)) == []
    assert entry_problems(_entry("grpo-clean-b07f9613", V1)) == []  # schema 2: no per-seed scores


def _edited(change, board: Path = SHIPPED) -> list[str]:
    entry = copy.deepcopy(_entry(GRPO, board))
    change(entry)
    return entry_problems(entry)


@pytest.mark.parametrize("change, expected", [
    (lambda e: e["macro"].update(true_score=0.9, true_score_ci=[0.8, 1.0]), "macro.true_score 0.9 is not the mean"),
    (lambda e: e["groups"]["science"].update(true_score=0.7, true_score_ci=[0.6, 0.8]),
     "groups.science.true_score is not the mean of its benchmarks"),
    (lambda e: e["macro"].update(true_score_ci=[0.1, 0.2]), "macro.true_score_ci [0.1, 0.2] does not contain"),
    (lambda e: e["results"]["ClinicalHandoff"].update(true_score_ci=[0.9, 1.0]),
     "results.ClinicalHandoff.true_score_ci [0.9, 1.0] does not contain"),
    (lambda e: e["groups"]["health"].update(true_score_se=0.5),
     "groups.health.true_score_se is not the SE across seeds"),
    (lambda e: e["macro"].update(true_score_se=0.5), "macro.true_score_se is not the SE across seeds"),
    (lambda e: e["results"]["ClinicalHandoff"].update(true_score_se=0.5),
     "results.ClinicalHandoff: true_score and true_score_se are not the mean and SE of its per_seed scores"),
    (lambda e: e["results"]["ClinicalHandoff"]["per_seed"].pop(), "results.ClinicalHandoff.per_seed must hold one score"),
    (lambda e: e.update(seeds=[0, 2, 3]), "seeds: [0, 2, 3]; an entry's seeds are 0..k−1 ([0, 1, 2] for 3 seeds), so that "
     "none can be chosen for its result: run the missing seeds and publish all of them"),
])
def test_each_contradiction_in_an_entry_is_named(change, expected):
    problems = _edited(change)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_benchmarks_score_must_be_the_mean_of_its_seeds():
    def moved(entry):
        entry["results"]["ClinicalHandoff"]["true_score"] += 0.001  # its CI still holds it
    assert "results.ClinicalHandoff: true_score and true_score_se are not the mean and SE of its per_seed scores" in \
        _edited(moved)


def test_two_seeds_are_enough_for_an_entry():
    def two_seeds(entry):
        entry["seeds"] = [0, 1]
        for result in entry["results"].values():
            result["per_seed"] = result["per_seed"][:2]
    assert not [p for p in _edited(two_seeds) if p.startswith("seeds")]


def test_an_entry_of_one_seed_is_refused_and_a_ci_may_touch_its_estimate():
    def one_seed(entry):
        entry["seeds"] = [0]
        for result in entry["results"].values():
            result["per_seed"] = result["per_seed"][:1]
    assert "seeds: 1 seed; a standard error across seeds needs at least 2" in _edited(one_seed)

    def tight(entry):
        entry["macro"]["true_score_ci"] = [entry["macro"]["true_score"]] * 2
    assert _edited(tight) == []


def test_an_old_schema_entry_checks_its_macro_se_from_the_benchmarks_ses():
    problems = _edited(lambda e: e["macro"].update(true_score_se=0.5), V1)
    assert problems == ["macro.true_score_se is not √(Σ se²)/K of the per-benchmark standard errors"]


# ------------------------------------------------------------------ the preset a run is named after


def test_a_protocol_run_is_its_preset_but_for_seed_and_judge():
    config = {**_entry(SETGRPO)["config"], "seed": 3}
    assert preset_problems(config) == []
    assert preset_problems({**config, "noise": "harsh"}) == []
    assert preset_problems({**config, "alpha": 0.3, "lr": 1.0}) == [
        f"config: alpha=0.3 differs from preset 'setgrpo' ({config['alpha']!r}); board runs use the preset unchanged",
        f"config: lr=1.0 differs from preset 'setgrpo' ({config['lr']!r}); board runs use the preset unchanged"]
    [problem] = preset_problems({**config, "agent": "nonexistent"})
    assert problem.startswith("config: preset 'nonexistent' cannot be resolved under board-v2@1 (unknown agent")
