"""Nothing wrong reaches the board: one writer per run folder, run files that prove where they came
from, damage refused instead of dropped, and board entries checked against their runs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SMALL_RUN

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.harness import run
from setgrpo_bench.harness.rundir import (
    RunDir,
    RunDirError,
    RunLockedError,
    read_json,
    read_metrics,
)
from setgrpo_bench.leaderboard import (
    SubmissionError,
    build_board,
    make_submission,
    publish,
)


def _config(policy, **kw):
    return resolve_config("grpo", {**SMALL_RUN, "steps": 3, "policy": policy, **kw})


@pytest.fixture
def finished(grpo_runs):
    """Two finished seeds of one agent (``<root>/grpo/seed<k>``; shared, read only)."""
    return grpo_runs


def _copy(finished, tmp_path):
    shutil.copytree(finished, tmp_path / "runs")
    return tmp_path / "runs" / "grpo"


# ---------------------------------------------------------------- one writer per run folder


def test_a_second_writer_is_refused_with_the_holders_pid(small_policy, tmp_path):
    out = tmp_path / "locked"
    with RunDir(out).lock():
        with pytest.raises(RunLockedError, match=rf"being written by another process \(PID {os.getpid()}\)"):
            run(_config(small_policy), out)
        done = subprocess.run([sys.executable, "-m", "setgrpo_bench", "run", "--policy", small_policy, "--out", str(out),
                               "--steps", "1", "--envs", "UnitConversion"], capture_output=True, text=True)
        assert done.returncode == 3 and f"PID {os.getpid()}" in done.stdout and "choose another --out" in done.stdout
    assert not (out / "config.json").exists()  # the refused writers wrote nothing


def test_a_lock_left_by_a_dead_process_is_taken_over_with_a_warning(small_policy, tmp_path):
    out = tmp_path / "stale"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / ".lock").write_text(dead.stdout.strip())
    with pytest.warns(UserWarning, match=f"took over the lock; it named process {dead.stdout.strip()}, which no longer runs"):
        run(_config(small_policy, steps=1), out)
    assert (out / "eval.json").is_file() and (out / ".lock").read_text() == ""  # released cleanly
    # a number that a running process holds now (reused, or another machine's): the message says only what it knows
    (tmp_path / "reused").mkdir()
    (tmp_path / "reused" / ".lock").write_text(str(os.getppid()))
    with pytest.warns(UserWarning, match=rf"process {os.getppid()}, which no longer holds it \(that number now belongs"):
        RunDir(tmp_path / "reused").lock().acquire().release()


def test_a_sweep_reports_a_locked_run_without_retrying_it(small_policy, tmp_path):
    from setgrpo_bench.harness.sweep import sweep

    overrides = {**SMALL_RUN, "steps": 1, "policy": small_policy}
    folder = tmp_path / "sweep" / "realistic" / "grpo" / "seed0"
    with RunDir(folder).lock():
        [status] = sweep(["grpo"], [0], tmp_path / "sweep", overrides=overrides)
    assert status["status"] == "failed" and status["attempts"] == [3] and "being written" in status["error"]


# ---------------------------------------------------------------- damage refused, never dropped


def test_resume_keeps_every_intact_line_and_refuses_a_damaged_one(small_policy, tmp_path):
    from conftest import Killed, kill_after

    config = _config(small_policy, steps=4)
    out = tmp_path / "damaged"
    with pytest.raises(Killed):
        run(config, out, on_step=kill_after(3))
    lines = (out / "metrics.jsonl").read_text().splitlines(keepends=True)
    (out / "metrics.jsonl").write_text(lines[0] + "{not json\n" + "".join(lines[2:]))  # step 2's line damaged
    with pytest.raises(RunDirError, match=r"line 2 is not a metrics record; step 2 is missing.*--overwrite"):
        run(config, out, resume=True)
    assert (out / "metrics.jsonl").read_text().count("\n") == 3  # nothing was dropped by the refusal
    (out / "metrics.jsonl").write_text("".join(lines))
    (out / "metrics.jsonl").write_text("".join(lines) + '{"step": 4, "rew')  # a line cut by a kill: redone
    result = run(config, out, resume=True)
    assert read_metrics(out / "metrics.jsonl").steps() == [1, 2, 3, 4] and result["steps"] == 4


def test_a_deleted_metrics_file_is_refused_not_published_with_zero_calls(small_policy, tmp_path, finished):
    runs = _copy(finished, tmp_path)
    (runs / "seed0" / "metrics.jsonl").unlink()
    with pytest.raises(SubmissionError, match="has no metrics.jsonl"):
        make_submission([runs / "seed0", runs / "seed1"])
    config = _config(small_policy, steps=3)
    with pytest.raises(RunDirError, match=r"steps 1–3 are missing"):
        run(config, runs / "seed0", resume=True)


def test_a_checkpoint_whose_weights_changed_falls_back_to_the_one_before(small_policy, tmp_path, capsys):
    from conftest import Killed, kill_after

    config = _config(small_policy, steps=3)
    full = run(config, tmp_path / "full")
    out = tmp_path / "overwritten"
    with pytest.raises(Killed):
        run(config, out, on_step=kill_after(2))
    weights = out / "checkpoints" / "step_000002" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-64:] = bytes(64)  # weights overwritten in place: the file still loads, with other numbers
    weights.write_bytes(bytes(data))
    from rich.console import Console

    resumed = run(config, out, resume=True, console=Console(file=sys.stdout))
    assert "does not match its checksum" in capsys.readouterr().out
    assert resumed["final"] == full["final"]  # resumed from step 1, it redid step 2 identically


def test_resume_with_more_steps_updates_the_config_and_says_so(small_policy, tmp_path, capsys):
    from rich.console import Console

    out = tmp_path / "longer"
    run(_config(small_policy, steps=2), out)
    result = run(_config(small_policy, steps=4), out, resume=True, console=Console(file=sys.stdout))
    assert "now trains for 4 steps (it was configured for 2)" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["config"]["steps"] == 4 and result["steps"] == 4
    with pytest.raises(RunDirError, match="has already trained 4 steps"):
        run(_config(small_policy, steps=3), out, resume=True)


def test_resume_of_a_folder_that_holds_no_run_is_refused(small_policy, tmp_path):
    with pytest.raises(RunDirError, match="holds no run to continue"):
        run(_config(small_policy), tmp_path / "nothing", resume=True)


def test_identical_runs_write_byte_identical_eval_files(small_policy, tmp_path):
    for name in ("a", "b"):
        run(_config(small_policy, steps=1), tmp_path / name)
    assert (tmp_path / "a" / "eval.json").read_bytes() == (tmp_path / "b" / "eval.json").read_bytes()
    assert "train_seconds" in json.loads((tmp_path / "a" / "timings.json").read_text())


# ---------------------------------------------------------------- provenance: publish and build


def test_a_hand_edited_eval_is_refused(tmp_path, finished):
    runs = _copy(finished, tmp_path)
    result = json.loads((runs / "seed0" / "eval.json").read_text())
    result["final"]["macro_true_score"] = 0.651
    (runs / "seed0" / "eval.json").write_text(json.dumps(result))
    with pytest.raises(SubmissionError, match="eval.json differs from the run's manifest"):
        publish([runs], tmp_path / "board")
    with pytest.raises(SubmissionError, match=r"final macro_true_score 0.651 is not what its per-benchmark scores give"):
        make_submission([runs / "seed0", runs / "seed1"])


def test_a_relabelled_agent_is_refused(tmp_path, finished):
    runs = _copy(finished, tmp_path)
    config = json.loads((runs / "seed1" / "config.json").read_text())
    config["config"]["agent"] = "dapo"
    (runs / "seed1" / "config.json").write_text(json.dumps(config))
    with pytest.raises(SubmissionError, match="config.json differs from the run's manifest"):
        publish([runs], tmp_path / "board")


def test_metrics_that_do_not_cover_the_steps_and_single_seeds_are_refused(tmp_path, finished):
    runs = _copy(finished, tmp_path)
    with pytest.raises(SubmissionError, match="a standard error across seeds needs at least 2"):
        publish([runs / "seed0"], tmp_path / "board")
    lines = (runs / "seed1" / "metrics.jsonl").read_text().splitlines(keepends=True)
    (runs / "seed1" / "metrics.jsonl").write_text(lines[0] + lines[0] + lines[2])
    with pytest.raises(SubmissionError, match=r"metrics.jsonl: step 1 is logged more than once; step 2 is missing"):
        make_submission([runs / "seed0", runs / "seed1"])
    (runs / "seed1" / "metrics.jsonl").write_text("".join(lines[:2]) + lines[2][:20])  # a half line
    with pytest.raises(SubmissionError, match=r"step 3 is missing"):
        make_submission([runs / "seed0", runs / "seed1"])


def test_the_board_rejects_tampered_entries_and_marks_entries_without_runs(tmp_path, finished):
    runs = _copy(finished, tmp_path)
    board = tmp_path / "board"
    [written] = publish([runs], board)  # it keeps the runs' records on the board, not their weights
    entry = json.loads(written.read_text())
    assert entry["schema_version"] == 5 and [r["seed"] for r in entry["runs"]] == [0, 1]
    assert set(entry["overoptimisation"]) >= {"drop", "drop_se"} and len(entry["curves"]["true_score_se"]) == 3
    frame, rejected = build_board(board)
    assert rejected == [] and frame["verified"].tolist() == [True]
    # a board keeps its runs' records without their weights; weights it does keep must be the run's
    [run] = [p.parent for p in (board / "runs").rglob("manifest.json.gz") if p.parent.name == "seed1"]
    listed = [n for n in read_json(run / "manifest.json")["files"] if n.startswith("checkpoints/")]
    assert listed and not any((board / "runs").rglob("checkpoints"))  # the manifest lists weights the board lacks
    (run / listed[0]).parent.mkdir(parents=True)
    (run / listed[0]).write_bytes(b"other weights")
    assert "model.safetensors differs from the run's manifest" in dict(build_board(board)[1])[written.name]
    shutil.rmtree(run / "checkpoints")

    original = written.read_text()
    fake = {**json.loads(original), "name": "fake", "agent": "fake"}  # an entry whose runs are not on the board
    for record in fake["runs"]:
        record["manifest"]["files"]["eval.json"] = "0" * 64
    (board / "results" / "fake.json").write_text(json.dumps(fake))
    inconsistent = {**json.loads(original), "name": "inconsistent"}
    inconsistent["macro"] = {**inconsistent["macro"], "true_score": 0.9, "true_score_ci": [0.85, 0.95]}
    (board / "results" / "inconsistent.json").write_text(json.dumps(inconsistent))
    understated = {**json.loads(original), "name": "understated"}  # a macro SE its per-seed scores do not give
    understated["macro"] = {**understated["macro"], "true_score_se": understated["macro"]["true_score_se"] + 0.01}
    (board / "results" / "understated.json").write_text(json.dumps(understated))
    shutil.copytree(board / "runs" / entry["name"], board / "runs" / "twin")  # the same runs under another entry
    (board / "results" / "twin.json").write_text(json.dumps({**json.loads(original), "name": "twin"}))
    frame, rejected = build_board(board)
    reasons = dict(rejected)
    assert "is not the mean of the per-benchmark scores" in reasons["inconsistent.json"]
    assert "macro.true_score_se is not the SE across seeds" in reasons["understated.json"]
    assert f"has the same runs as {written.name}" in reasons["twin.json"]
    # an entry without runs on the board is listed apart: not ranked, not in a verdict
    assert "fake.json" not in reasons and frame["agent"].tolist() == ["grpo"]
    readme = (board / "README.md").read_text()
    apart = readme[readme.index("## Not ranked: runs not on this board"):]
    assert "| fake | fake |" in apart and "| fake |" not in readme[:readme.index("## Not ranked")]

    edited = json.loads(original)  # the entry itself edited to 0.700, every number consistent with itself
    scale = 0.7 / edited["macro"]["true_score"]
    for value in [edited["macro"], *edited["groups"].values(), *edited["results"].values()]:
        value["true_score"] *= scale
        value["true_score_ci"] = [x * scale for x in value["true_score_ci"]]
        value["true_score_se"] *= scale
        if "per_seed" in value:
            value["per_seed"] = [x * scale for x in value["per_seed"]]
    written.write_text(json.dumps(edited))
    reason = dict(build_board(board)[1])[written.name]
    assert "differs from what its runs" in reason and "macro.true_score" in reason


def test_a_build_that_fails_half_way_writes_neither_page(tmp_path, finished, monkeypatch):
    from setgrpo_bench.leaderboard import board as board_module

    runs = _copy(finished, tmp_path)
    board = tmp_path / "board"
    publish([runs], board)
    before = {name: (board / name).read_text() for name in ("README.md", "index.html")}

    def broken(*args, **kwargs):
        raise RuntimeError("plot failed")

    monkeypatch.setattr(board_module, "html_page", broken)
    (board / "results" / "extra.json").write_text("{}")
    with pytest.raises(RuntimeError, match="plot failed"):
        build_board(board)
    assert {name: (board / name).read_text() for name in ("README.md", "index.html")} == before


# ---------------------------------------------------------------- errors, not tracebacks


@pytest.mark.parametrize("name", ["config.json", "eval_initial.json"])
def test_a_corrupt_run_file_is_named_on_resume(small_policy, tmp_path, name):
    out = tmp_path / "corrupt"
    run(_config(small_policy, steps=1), out)
    (out / name).write_text('{"config": {"steps": 1,')
    with pytest.raises(RunDirError, match=rf"{name} is damaged \(line 1: .*--overwrite"):
        run(_config(small_policy, steps=1), out, resume=True)


def test_an_unwritable_out_is_refused(small_policy, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(RunDirError, match=r"cannot use .*file/run"):
        run(_config(small_policy), tmp_path / "file" / "run")


def test_a_full_disk_while_checkpointing_keeps_the_previous_checkpoint(small_policy, tmp_path, monkeypatch):
    from setgrpo_bench.harness import runner

    out = tmp_path / "full"
    real, calls = runner.torch.save, {"n": 0}

    def save(obj, path, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("[enforce fail at inline_container.cc:603] . unexpected pos 1024 vs 911")
        return real(obj, path, *args, **kwargs)

    monkeypatch.setattr(runner.torch, "save", save)
    with pytest.raises(RunDirError, match=r"cannot write the checkpoint of step 2 .*unexpected pos.*MB free.*--resume"):
        run(_config(small_policy), out)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["latest", "step_000001"]
    monkeypatch.setattr(runner.torch, "save", real)
    assert run(_config(small_policy), out, resume=True)["steps"] == 3


def test_a_full_disk_while_writing_a_file_leaves_no_partial_file(tmp_path, monkeypatch):
    import errno

    from setgrpo_bench import files

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(files.FileError, match=r"cannot write .*eval.json: the disk is full"):
        files.write_json(tmp_path / "eval.json", {"a": 1})
    assert list(tmp_path.iterdir()) == []


def test_garbage_weights_for_a_policy_are_refused(small_policy, tmp_path):
    from setgrpo_bench.policy import PolicyError, load_policy

    shutil.copytree(small_policy, tmp_path / "p")
    (tmp_path / "p" / "model.safetensors").write_bytes(b"garbage" * 100)
    with pytest.raises(PolicyError, match="its weights cannot be read"):
        load_policy(tmp_path / "p")


@pytest.mark.parametrize("response, match", [(123, r"response='int' is not allowed: expected the response text"),
                                             ("ok \ud800 no", "lone surrogate"),
                                             ("x" * 16_385, "at most 16384 characters")])
def test_responses_outside_the_action_space_are_refused(response, match):
    import gymnasium as gym

    from setgrpo_bench.errors import ConfigError

    env = gym.make("setgrpo/MedicationGuide-v0").unwrapped
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=match):
        env.step(response)
    with pytest.raises(ConfigError, match=match):
        env.grade_group(["fine", response], task="MedicationGuide/train/0")


def test_sweep_honours_threads_and_has_no_seed_flag(small_policy, tmp_path, monkeypatch):
    from setgrpo_bench.cli import main
    from setgrpo_bench.harness import sweep as sweep_module

    calls = []
    monkeypatch.setattr(sweep_module.subprocess, "run", lambda args, **kw: calls.append(args) or
                        subprocess.CompletedProcess(args, 1, "", "stopped"))
    main(["sweep", "--agents", "grpo", "--seeds", "1", "--threads", "1", "--out", str(tmp_path / "s"), "--policy", small_policy])
    assert calls and all(c[c.index("--threads") + 1] == "1" for c in calls)
    with pytest.raises(SystemExit):
        main(["sweep", "--agents", "grpo", "--seed", "3", "--out", str(tmp_path / "s")])
    monkeypatch.undo()
    help_text = subprocess.run([sys.executable, "-m", "setgrpo_bench", "sweep", "--help"], capture_output=True, text=True).stdout
    assert "<out>/<noise>/<agent>/seed<k>/" in help_text and "--seed " not in help_text


def test_checkpoint_folders_follow_the_umask(small_policy, tmp_path):
    old = os.umask(0o022)
    try:
        run(_config(small_policy, steps=1), tmp_path / "modes")
    finally:
        os.umask(old)
    folder = tmp_path / "modes" / "checkpoints" / "step_000001"
    assert folder.stat().st_mode & 0o777 == 0o755
    assert (folder / "checksums.json").stat().st_mode & 0o777 == 0o644


def test_threads_zero_respects_omp_num_threads(monkeypatch):
    import torch

    from setgrpo_bench.harness.threads import set_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert set_threads(0) == 1 and torch.get_num_threads() == 1
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert set_threads(0) == len(os.sched_getaffinity(0)) and set_threads(2) == 2
    finally:
        torch.set_num_threads(before)


def test_validate_warns_when_a_split_repeats_its_prompts(tmp_path, capsys):
    from setgrpo_bench.cli import main

    (tmp_path / "benchmark.yaml").write_text("""name: Tiny
domain: x
sizes: {train: 40, calib: 10, eval: 10}
variables:
  v: {range: [1, 40]}
prompt: Say {v}.
criteria:
  - id: c
    text: Says {v}.
    points: 1
    category: essential
    check: {type: keyword_any, terms: ['{v}']}
""")
    assert main(["envs", "validate", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "split 'train' declares 40 instances but its variables give" in out and "distinct prompts" in out


def test_a_catalog_benchmark_that_shadows_a_built_in_is_refused_unless_it_says_so(tmp_path, monkeypatch):
    from setgrpo_bench.envs import benchmark_paths
    from setgrpo_bench.errors import SpecError

    spec = (Path(__file__).resolve().parents[1] / "envs" / "UnitConversion" / "benchmark.yaml").read_text()
    (tmp_path / "envs" / "UnitConversion").mkdir(parents=True)
    (tmp_path / "envs" / "UnitConversion" / "benchmark.yaml").write_text(spec)
    monkeypatch.setenv("SETGRPO_BENCH_CATALOG", str(tmp_path))
    with pytest.raises(SpecError, match=r"UnitConversion is a built-in benchmark .*add 'replaces: UnitConversion'"):
        benchmark_paths()
    (tmp_path / "envs" / "UnitConversion" / "benchmark.yaml").write_text(spec + "\nreplaces: UnitConversion\n")
    assert benchmark_paths()["UnitConversion"].is_relative_to(tmp_path)


def test_publish_names_the_changed_suite_and_never_builds_a_policy(tmp_path, finished, monkeypatch):
    from setgrpo_bench.leaderboard.submission import check_submission
    from setgrpo_bench.policy import tiny

    monkeypatch.setattr(tiny, "build_tiny", lambda *a, **k: pytest.fail("publish must not build a policy"))
    runs = _copy(finished, tmp_path)
    entry = make_submission([runs / "seed0", runs / "seed1"])
    entry["suite"]["parts"]["benchmarks"]["UnitConversion"] = "0" * 64  # as if the spec had been edited since
    entry["suite"]["hash"] = "1" * 64
    [problem] = check_submission(entry)
    assert "benchmark UnitConversion was edited" in problem


def test_the_overoptimisation_report_reads_runs_metrics(tmp_path, finished):
    from setgrpo_bench.cli import main

    assert main(["judges", "overoptimisation", str(finished / "grpo"), "--block", "1",
                 "--out", str(tmp_path / "over")]) == 0
    report = json.loads((tmp_path / "over" / "overoptimisation.json").read_text())
    assert report["seeds"] == 2 and report["steps"] == 3 and len(report["true_blocks"]) == 3
    assert (tmp_path / "over" / "overoptimisation.png").stat().st_size > 5_000
