"""Audits by re-execution: a forgery that every consistency check passes is caught by running a seed of
the entry again; an honest entry is reproduced; a difference on another machine proves nothing."""

import json
import random
import shutil

import pytest

from setgrpo_bench.cli import main
from setgrpo_bench.harness.averages import aggregate
from setgrpo_bench.harness.rundir import RunDir, read_json, write_json
from setgrpo_bench.leaderboard import build_board, publish
from setgrpo_bench.leaderboard.audit import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    AuditError,
    audit_entry,
    keep_audit,
    result_of,
)
from setgrpo_bench.leaderboard.verify import rebuild_entry


@pytest.fixture(scope="module")
def honest(grpo_runs, tmp_path_factory):
    """A board holding one honest entry of two seeds (its runs made here, on this machine)."""
    board = tmp_path_factory.mktemp("audited") / "board"
    [written] = publish([grpo_runs], board, protocol=None)
    return board, json.loads(written.read_text())


def _board(honest, tmp_path):
    board, entry = honest
    shutil.copytree(board, tmp_path / "board")
    return tmp_path / "board", entry


def _forge(board, entry, *, bonus=0.05, machine=None):
    """Raise every seed's held-out scores by ``bonus`` with the package's own functions: averages
    recomputed, the manifest re-hashed, the entry rebuilt from the edited runs — consistent everywhere."""
    for seed in entry["seeds"]:
        folder = board / "runs" / entry["name"] / f"seed{seed}"
        result = read_json(folder / "eval.json")
        per_env = result["final"]["per_env"]
        for row in per_env.values():
            row["true_score"] += bonus
        result["final"] = {**result["final"], **aggregate(per_env)}
        result["improvement_macro_true_score"] = result["final"]["macro_true_score"] - result["initial"]["macro_true_score"]
        write_json(folder / "eval.json", result)
        if machine is not None:
            config = read_json(folder / "config.json")
            write_json(folder / "config.json", {**config, "machine": machine})
        weights = {k: v for k, v in read_json(folder / "manifest.json")["files"].items() if k.startswith("checkpoints/")}
        RunDir(folder).write_manifest()  # what a forger does: hash the edited files again
        manifest = read_json(folder / "manifest.json")
        write_json(folder / "manifest.json", {"files": {**manifest["files"], **weights}})
    forged = rebuild_entry(entry, board / "runs")
    write_json(board / "results" / f"{entry['name']}.json", forged)
    return forged


def test_an_honest_entry_is_reproduced_and_the_page_says_so(honest, tmp_path):
    board, entry = _board(honest, tmp_path)
    audit = audit_entry(entry, board, count=2)
    assert audit["result"] == REPRODUCED and sorted(audit["seeds"]) == ["0", "1"] and audit["mode"] == "full"
    assert all(o["machine"] == o["recorded_machine"] for o in audit["seeds"].values())
    keep_audit(board, entry["name"], audit)
    frame, rejected = build_board(board)
    assert rejected == [] and len(frame) == 1
    assert "seed 0, 1 reproduced (full;" in (board / "README.md").read_text()
    quick = audit_entry(entry, board, seeds=[1], steps=1)
    assert quick["result"] == REPRODUCED and quick["mode"] == "quick" and quick["steps"] == 1


def test_a_self_consistent_forgery_passes_every_check_but_the_audit(honest, tmp_path):
    board, entry = _board(honest, tmp_path)
    forged = _forge(board, entry)
    assert forged["macro"]["true_score"] == pytest.approx(entry["macro"]["true_score"] + 0.05)
    frame, rejected = build_board(board)
    assert rejected == [] and frame["verified"].tolist() == [True]  # rebuilt from its (edited) runs: it verifies
    audit = audit_entry(forged, board, count=1, rng=random.Random(3))
    assert audit["result"] == NOT_REPRODUCED
    [outcome] = audit["seeds"].values()
    assert any(d.startswith("eval.json differs from its re-execution") for d in outcome["differences"])
    keep_audit(board, forged["name"], audit)
    frame, rejected = build_board(board)
    assert frame.empty and "did not reproduce its runs" in dict(rejected)[f"{forged['name']}.json"]
    # the audit is tied to the runs it audited: the entry replaced by other runs is audited anew
    write_json(board / "results" / f"{entry['name']}.json", entry)
    shutil.rmtree(board / "runs" / entry["name"])
    shutil.copytree(honest[0] / "runs" / entry["name"], board / "runs" / entry["name"])
    frame, rejected = build_board(board)
    assert rejected == [] and "not audited" in (board / "README.md").read_text()


def test_a_quick_audit_checks_the_start_of_a_run(honest, tmp_path):
    """The quick mode compares the initial evaluation and the first steps: a forged initial score is
    caught in seconds; a forged final score is not (only a full audit reads the end of a run)."""
    board, entry = _board(honest, tmp_path)
    folder = board / "runs" / entry["name"] / "seed0"
    initial = read_json(folder / "eval_initial.json")
    initial["macro_true_score"] += 0.01
    write_json(folder / "eval_initial.json", initial)
    audit = audit_entry(entry, board, seeds=[0], steps=2)
    assert audit["result"] == NOT_REPRODUCED
    assert "eval_initial.json differs from its re-execution" in audit["seeds"]["0"]["differences"][0]
    board, entry = _board(honest, tmp_path / "second")
    _forge(board, entry)
    assert audit_entry(entry, board, seeds=[0], steps=2)["result"] == REPRODUCED


def test_a_difference_on_another_machine_is_inconclusive_not_a_rejection(honest, tmp_path):
    board, entry = _board(honest, tmp_path)
    forged = _forge(board, entry, machine={"cpu": "Another CPU", "cpu_capability": "AVX2", "gpu": "none"})
    audit = audit_entry(forged, board, seeds=[0])
    assert audit["result"] == INCONCLUSIVE
    keep_audit(board, forged["name"], audit)
    frame, rejected = build_board(board)
    assert rejected == [] and len(frame) == 1
    assert "inconclusive: made on Another CPU (AVX2), re-executed on" in (board / "README.md").read_text()
    same = {"differences": ["x"], "machine": {"cpu": "A"}, "recorded_machine": {"cpu": "A"}}
    other = {"differences": ["x"], "machine": {"cpu": "A"}, "recorded_machine": None}
    fine = {"differences": [], "machine": {"cpu": "A"}, "recorded_machine": None}
    assert result_of({"0": same, "1": other}) == NOT_REPRODUCED and result_of({"0": other}) == INCONCLUSIVE
    assert result_of({"0": fine}) == REPRODUCED


def test_the_audit_command_draws_seeds_keeps_its_record_and_refuses_what_it_cannot_do(honest, tmp_path, capsys):
    board, entry = _board(honest, tmp_path)
    assert main(["leaderboard", "audit", "--board", str(board), "--quick", "1"]) == 0
    kept = read_json(board / "audits" / f"{entry['name']}.json")
    assert [a["result"] for a in kept["audits"]] == [REPRODUCED] and len(kept["audits"][0]["seeds"]) == 1
    assert "reproduced (quick, 1 steps" in capsys.readouterr().out
    assert main(["leaderboard", "audit", "--board", str(board), "--unaudited"]) == 0  # a quick audit is not a full one
    assert [a["mode"] for a in read_json(board / "audits" / f"{entry['name']}.json")["audits"]] == ["quick", "full"]
    assert main(["leaderboard", "audit", "--board", str(board), "--unaudited"]) == 0  # nothing left to audit
    assert len(read_json(board / "audits" / f"{entry['name']}.json")["audits"]) == 2
    with pytest.raises(AuditError, match="has no seed 7"):
        audit_entry(entry, board, seeds=[7])
    with pytest.raises(AuditError, match="--seeds-per-entry 3: .* has 2 seeds"):
        audit_entry(entry, board, count=3)
    _forge(board, entry)
    assert main(["leaderboard", "audit", "--board", str(board), "--entry", entry["name"]]) == 1
    assert main(["leaderboard", "audit", "--board", str(board), "--entry", "nobody"]) == 2


def test_a_field_written_since_a_run_was_recorded_is_new_at_any_depth_but_a_recorded_one_must_agree(tmp_path):
    """A re-execution that adds the judge's score to every held-out curve point reproduces a run recorded
    before curve points had it; one whose recorded true score differs, or that drops a point, does not."""
    from setgrpo_bench.leaderboard.audit import _same_file

    recorded = {"curve": [{"step": 0, "true_score": 0.3}, {"step": 20, "true_score": 0.4}], "seed": 0}
    again = {"curve": [{"step": 0, "true_score": 0.3, "judge_score": 0.2}, {"step": 20, "true_score": 0.4, "judge_score": 0.5}],
             "seed": 0, "hacking": {"onset_step": None}}
    write_json(tmp_path / "recorded.json", recorded)
    for name, data, same in [("again", again, True),
                             ("changed", {**again, "curve": [again["curve"][0], {**again["curve"][1], "true_score": 0.41}]}, False),
                             ("shorter", {**again, "curve": again["curve"][:1]}, False),
                             ("lacking", {"curve": again["curve"]}, False)]:
        write_json(tmp_path / f"{name}.json", data)
        assert _same_file(tmp_path / "recorded.json", tmp_path / f"{name}.json") is same, name
