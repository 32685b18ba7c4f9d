"""End-to-end runs on a test-sized policy built from scratch: artefacts, resume, determinism, errors."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import SMALL_POLICY, SMALL_RUN, Killed, kill_after

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.cli import main
from setgrpo_bench.errors import ConfigError, UnknownNameError
from setgrpo_bench.harness import run
from setgrpo_bench.harness.checkpoints import CheckpointError
from setgrpo_bench.harness.rundir import RunDirError
from setgrpo_bench.policy import PolicyError, load_policy
from setgrpo_bench.policy.tiny import build_tiny

OVERRIDES = {**SMALL_RUN, "steps": 3}


def _config(policy, **kw):
    return resolve_config("grpo", {**OVERRIDES, "policy": policy, **kw})


def test_small_tiny_builds_deterministically(small_policy, tmp_path, monkeypatch):
    monkeypatch.setenv("SETGRPO_BENCH_CACHE", str(tmp_path))
    again = build_tiny(SMALL_POLICY)
    assert again != small_policy
    for name in ("model.safetensors", "tokenizer.json"):
        assert (again / name).read_bytes() == (__import__("pathlib").Path(small_policy) / name).read_bytes()
    policy = load_policy(again)
    ids = policy.tokenizer("Zoë Ngô-Xiù")["input_ids"]
    assert policy.tokenizer.decode(ids) == "Zoë Ngô-Xiù"  # byte-level BPE: unseen names round-trip


def test_run_writes_every_artefact(small_policy, tmp_path):
    out = tmp_path / "run"
    result = run(_config(small_policy), out)
    for name in ("config.json", "metrics.jsonl", "eval.json", "eval_initial.json", "curve.png"):
        assert (out / name).is_file(), name
    assert (out / "checkpoints" / "latest").read_text() == "step_000003"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert {"reward", "true_score", "acceptance", "grader_calls"} <= set(records[0])
    # what is measured (seconds, memory) is kept apart, so that metrics.jsonl is what the run computed
    assert not [k for r in records for k in r if k.startswith(("time_", "peak_rss"))]
    timings = [json.loads(line) for line in (out / "timings.jsonl").read_text().splitlines()]
    assert [t["step"] for t in timings] == [1, 2, 3] and {"time_step", "time_update", "peak_rss_mb"} <= set(timings[0])
    assert json.loads((out / "timings.json").read_text())["train_seconds"] == pytest.approx(sum(t["time_step"] for t in timings))
    saved = json.loads((out / "eval.json").read_text())
    assert saved["final"]["per_env"].keys() == {"MedicationGuide", "UnitConversion"}
    assert set(saved["final"]["domains"]) == {"health", "science"}
    assert saved == json.loads(json.dumps(result))
    assert saved["diagnostics"] == {} and not (out / "setgrpo.png").exists()  # no set: no SetGRPO report


def test_same_seed_same_result_and_resume_equivalence(small_policy, tmp_path):
    config = _config(small_policy)
    full = run(config, tmp_path / "a")
    again = run(config, tmp_path / "b")
    assert again["final"] == full["final"] and again["initial"] == full["initial"]

    with pytest.raises(Killed):
        run(config, tmp_path / "c", on_step=kill_after(2))
    # a half-written metrics line from the kill is tolerated
    with (tmp_path / "c" / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 3, "rew')
    resumed = run(config, tmp_path / "c", resume=True)
    assert resumed["final"] == full["final"]
    # identical runs, interrupted or not, write identical records, and so identical manifests
    for name in ("metrics.jsonl", "eval.json", "eval_initial.json", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes() == (
            tmp_path / "c" / name).read_bytes(), name
    assert [json.loads(x)["step"] for x in (tmp_path / "c" / "timings.jsonl").read_text().splitlines()] == [1, 2, 3]


def test_out_dir_with_another_run_is_refused(small_policy, tmp_path):
    run(_config(small_policy, steps=1), tmp_path / "r")
    with pytest.raises(RunDirError, match="already holds a run; pass --resume"):
        run(_config(small_policy, steps=1), tmp_path / "r")
    with pytest.raises(RunDirError, match="different config"):
        run(_config(small_policy, steps=1, lr=1e-3), tmp_path / "r", resume=True)
    run(_config(small_policy, steps=1, lr=1e-3), tmp_path / "r", overwrite=True)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(small_policy, tmp_path, monkeypatch):
    from setgrpo_bench.harness import TrainingStopped
    from setgrpo_bench.harness import update as update_module

    real = update_module.grpo_loss
    calls = {"n": 0}

    def poisoned(*args, **kwargs):
        loss, stats = real(*args, **kwargs)
        calls["n"] += 1
        return (loss * float("nan") if calls["n"] >= 2 else loss), stats

    monkeypatch.setattr(update_module, "grpo_loss", poisoned)
    with pytest.raises(TrainingStopped, match=r"step 2: the loss is nan .*last good checkpoint \(step 1\)"):
        run(_config(small_policy, group_size=4, groups_per_step=4), tmp_path / "nan")
    assert (tmp_path / "nan" / "checkpoints" / "latest").read_text() == "step_000001"


def test_a_non_finite_gradient_on_setgrpos_fused_path_stops_before_any_weight_is_written(small_policy, tmp_path,
                                                                                           monkeypatch):
    """SetGRPO at μ = 1 forms its step from the geometry's per-response gradients, with no backward
    pass over the model: a NaN there must stop the run before the optimiser steps, leave step 1's
    checkpoint (finite weights) as the newest, and the run must resume to the end."""
    import torch
    from safetensors.torch import load_file

    from setgrpo_bench.harness import TrainingStopped
    from setgrpo_bench.harness.geometry import Gradients

    config = resolve_config("setgrpo-no-gate", {**OVERRIDES, "policy": small_policy, "groups_per_step": 4,
                                                "group_size": 4, "warmup_groups": 8, "window": 16,
                                                "audit_fraction": 0.5, "calibrate": False, "fixed_q": 0.05})
    real, poison = Gradients.combine, {"on": False, "calls": 0}

    def combine(self, k, weights, step=16):
        poison["calls"] += poison["on"]
        out = real(self, k, weights, step)
        return out * float("nan") if poison["on"] else out

    monkeypatch.setattr(Gradients, "combine", combine)
    out = tmp_path / "fused"
    with pytest.raises(TrainingStopped, match=r"step 2: the gradient norm is nan .*last good checkpoint \(step 1\)"):
        run(config, out, on_step=lambda step, _: poison.update(on=step == 1))
    assert poison["calls"] > 0, "step 2 must have taken the fused path"
    assert (out / "checkpoints" / "latest").read_text() == "step_000001"
    weights = load_file(out / "checkpoints" / "step_000001" / "model.safetensors")
    assert all(torch.isfinite(w).all() for w in weights.values())
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1]
    monkeypatch.setattr(Gradients, "combine", real)
    resumed = run(config, out, resume=True)
    assert resumed["steps"] == 3 and resumed["final"]["macro_true_score"] == resumed["final"]["macro_true_score"]
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]


@pytest.mark.parametrize(
    "overrides, error, match",
    [
        ({"group_size": 1}, ConfigError, "group_size=1 is not allowed.*at least 2 responses"),
        ({"lr": "fast"}, ConfigError, r"lr='fast' is not allowed: expected a number in \(0, 1\)"),
        ({"lr": "nan"}, ConfigError, r"lr=nan is not allowed: expected a number in \(0, 1\)"),
        ({"steps": "2.5"}, ConfigError, "steps='2.5' is not allowed: expected an integer >= 0"),
        ({"steps": True}, ConfigError, "steps=True is not allowed: expected an integer >= 0"),
        ({"top_p": 0}, ConfigError, r"top_p=0.0 is not allowed: expected a number in \(0, 1\]"),
        ({"bogus": 1}, UnknownNameError, "unknown config field 'bogus'"),
        ({"rule": "grpoo"}, UnknownNameError, "Did you mean 'grpo'"),
        ({"envs": "MedicationGuid"}, UnknownNameError, "Did you mean 'MedicationGuide'"),
    ],
)
def test_bad_config_values(small_policy, tmp_path, overrides, error, match):
    with pytest.raises(error, match=match):
        config = _config(small_policy, **overrides)
        run(config, tmp_path / "x")


def test_unknown_agent_and_bad_policy_paths(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown agent 'grpp'. Did you mean 'grpo'"):
        resolve_config("grpp")
    with pytest.raises(PolicyError, match="is not a model folder"):
        load_policy(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(PolicyError, match="is not a causal LM"):
        load_policy(tmp_path)


def test_cli_run_and_errors(small_policy, tmp_path, capsys):
    args = ["run", "--agent", "grpo", "--policy", small_policy, "--out", str(tmp_path / "cli"), "--steps", "1",
            "--groups-per-step", "2", "--group-size", "2", "--eval-instances", "1", "--max-new-tokens", "8",
            "--envs", "UnitConversion"]
    assert main(args) == 0
    assert (tmp_path / "cli" / "eval.json").is_file()
    assert main(args) == 2
    assert "already holds a run" in capsys.readouterr().out
    assert main(["run", "--group-size", "one", "--out", str(tmp_path / "y")]) == 2
    assert "group_size='one' is not allowed" in capsys.readouterr().out


def test_kill_9_mid_run_then_resume_equals_an_uninterrupted_run(small_policy, tmp_path):
    """A real SIGKILL of a CLI run at an arbitrary point after step 2, then ``--resume``."""
    import os
    import signal
    import subprocess
    import sys
    import time

    config = _config(small_policy, steps=5)
    full = run(config, tmp_path / "full")
    out = tmp_path / "killed"
    args = [sys.executable, "-m", "setgrpo_bench", "run", "--agent", "grpo", "--policy", small_policy,
            "--out", str(out), *(f"--{k.replace('_', '-')}={v}" for k, v in {**OVERRIDES, "steps": 5}.items())]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = out / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if metrics.is_file() and len(metrics.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out / "eval.json").exists()
    resumed = run(config, out, resume=True)
    assert resumed["final"] == full["final"]
    assert (tmp_path / "full" / "metrics.jsonl").read_bytes() == metrics.read_bytes()


@pytest.mark.parametrize("command", ["run", "diagnose", "sweep"])
def test_help_of_every_command_renders(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert "--group-size" in capsys.readouterr().out


def test_building_the_policy_leaves_the_callers_random_streams_alone(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("SETGRPO_BENCH_CACHE", str(tmp_path))
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    build_tiny(SMALL_POLICY)  # an empty cache: builds
    assert torch.equal(torch.rand(3), expected)


def test_random_streams_are_independent_of_seed_arithmetic():
    """Stream k of seed s is not stream k + 1 of seed s − 1 (as ``seed * 1000 + k`` seeding would make
    it), and a benchmark's grading stream does not depend on which other benchmarks are in the suite."""
    from setgrpo_bench.harness.seeds import generator, name_key

    draws = {(s, k): generator(s, "grading", k).random(4).tolist() for s in range(3) for k in range(3)}
    assert len({tuple(v) for v in draws.values()}) == len(draws)
    assert generator(0, "tasks").random() != generator(0, "audits").random()
    assert name_key("MedicationGuide") == name_key("MedicationGuide") != name_key("UnitConversion")


@pytest.fixture
def interrupted(small_policy, tmp_path):
    """A 5-step run killed after step 3 (checkpoints of steps 2 and 3 kept), and the uninterrupted
    run's result to compare with."""
    config = _config(small_policy, steps=5)
    full = run(config, tmp_path / "full")
    with pytest.raises(Killed):
        run(config, tmp_path / "cut", on_step=kill_after(3))
    checkpoints = tmp_path / "cut" / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("step_*")) == ["step_000002", "step_000003"]
    return config, full, tmp_path / "cut"


@pytest.mark.parametrize("damage", ["pointer", "truncated_state", "missing_weights", "garbled_weights"])
def test_resume_falls_back_past_a_damaged_checkpoint_and_says_so(interrupted, damage, capsys):
    config, full, out = interrupted
    newest = out / "checkpoints" / "step_000003"
    if damage == "pointer":
        (out / "checkpoints" / "latest").unlink()
    elif damage == "truncated_state":
        data = (newest / "trainer_state.pt").read_bytes()
        (newest / "trainer_state.pt").write_bytes(data[: len(data) // 3])
    elif damage == "missing_weights":
        (newest / "model.safetensors").unlink()
    else:
        (newest / "model.safetensors").write_bytes(b"\0" * 100)
    resumed = run(config, out, resume=True)
    assert resumed["final"] == full["final"]
    said = capsys.readouterr().out
    if damage != "pointer":  # (without the pointer, the newest step is found by its name)
        assert "trying the checkpoint before it" in said and "from step 2" in said
        assert "steps 3–3 came after the checkpoint of step 2" in said


def test_a_run_killed_between_its_first_metrics_line_and_checkpoint_starts_again(interrupted, monkeypatch, capsys):
    """The kill a sweep's retry meets: step 1 logged, its checkpoint not yet written."""
    from setgrpo_bench.harness import runner as run_module

    config, full, out = interrupted
    window = out.parent / "window"
    with monkeypatch.context() as patch:
        patch.setattr(run_module, "save_checkpoint", lambda *a: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            run(config, window)
    assert [json.loads(x)["step"] for x in (window / "metrics.jsonl").read_text().splitlines()] == [1]
    resumed = run(config, window, resume=True)
    assert resumed["final"] == full["final"]
    assert "steps 1–1 came after the checkpoint of step 0" in capsys.readouterr().out


def test_resume_without_a_usable_checkpoint_refuses_and_keeps_the_metrics(interrupted):
    config, _, out = interrupted
    for folder in (out / "checkpoints").glob("step_*"):
        (folder / "trainer_state.pt").write_bytes(b"garbage")
    lines = (out / "metrics.jsonl").read_text()
    with pytest.raises(CheckpointError, match=r"steps 1–3 were logged but .*trainer_state|damaged.*Pass --overwrite"):
        run(config, out, resume=True)
    assert (out / "metrics.jsonl").read_text() == lines
    import shutil

    shutil.rmtree(out / "checkpoints")
    with pytest.raises(CheckpointError, match=r"no checkpoint in .*--overwrite"):
        run(config, out, resume=True)


def test_run_files_are_standard_json_with_the_users_permissions(small_policy, tmp_path):
    import os

    result = run(resolve_config("setgrpo", {**OVERRIDES, "policy": small_policy, "steps": 1, "warmup_groups": 4,
                                            "window": 8}), tmp_path / "s")

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))

    for line in (tmp_path / "s" / "metrics.jsonl").read_text().splitlines():
        record = strict(line)
        assert isinstance(record["tau"], (float, str))  # "inf" while the gate accepts nothing
    strict((tmp_path / "s" / "eval.json").read_text())
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "s" / "eval.json").stat().st_mode & 0o777 == 0o666 & ~umask
    assert result["diagnostics"]["n_nonconstant"] >= 0


def test_the_run_that_builds_the_policy_gives_the_same_result_as_a_cached_one(tmp_path, monkeypatch):
    """``--policy tiny`` on an empty cache builds the policy inside the run; that must not shift any
    random stream of the run (a cached policy must give the same ``eval.json``)."""
    from setgrpo_bench.policy import load as load_module

    monkeypatch.setenv("SETGRPO_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(load_module, "build_tiny", lambda: build_tiny(SMALL_POLICY))
    config = _config("tiny")
    building = run(config, tmp_path / "first")
    assert (tmp_path / "cache").is_dir()
    cached = run(config, tmp_path / "second")
    assert building["final"] == cached["final"] and building["initial"] == cached["initial"]


def test_evaluate_command_scores_any_policy_folder(small_policy, tmp_path, capsys):
    args = ["evaluate", "--policy", small_policy, "--envs", "UnitConversion", "--eval-instances", "3",
            "--max-new-tokens", "8", "--out", str(tmp_path / "e")]
    assert main(args) == 0
    result = json.loads((tmp_path / "e" / "eval.json").read_text())
    assert result["per_env"]["UnitConversion"]["n"] == 3 and 0 <= result["macro_true_score"] <= 1
    assert "held-out true score" in capsys.readouterr().out
    again = main([*args[:-1], str(tmp_path / "f")])
    assert again == 0 and json.loads((tmp_path / "f" / "eval.json").read_text())["per_env"] == result["per_env"]


def test_each_step_logs_what_the_optimiser_did(small_policy, tmp_path):
    """param_step is ‖θ_k − θ_(k−1)‖ between consecutive checkpoints; eval.json pools the executed steps.
    A SetGRPO whose gate can certify nothing (α so small that no count of groups is testable) never steps."""
    from safetensors.torch import load_file

    from setgrpo_bench.harness.pooled import summarise_updates

    out = tmp_path / "grpo"
    result = run(_config(small_policy, steps=1), out)
    [record] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    before = load_file(Path(small_policy) / "model.safetensors")
    after = load_file(out / "checkpoints" / "step_000001" / "model.safetensors")
    moved = sum(float(((after[n] - before[n]) ** 2).sum()) for n in before) ** 0.5
    assert moved > 0 and record["param_step"] == pytest.approx(moved, rel=1e-4) and record["stepped"] == 1.0
    assert 1 <= record["groups_executed"] <= OVERRIDES["groups_per_step"]  # a constant group carries no update
    assert result["updates"] == summarise_updates([record]) and result["updates"]["executed_steps"] == 1.0
    stalled = run(resolve_config("setgrpo", {**OVERRIDES, "policy": small_policy, "alpha": 0.001, "warmup_groups": 4}),
                  tmp_path / "stalled")
    assert stalled["updates"] == {"executed_steps": 0.0, "param_step": 0.0, "groups_per_executed_step": 0.0}


def test_the_training_judge_flag_is_named_for_what_it_selects_and_the_old_name_still_works(capsys):
    from setgrpo_bench.cli import build_parser

    new = build_parser("grpo").parse_args(["run", "--train-judge", "learned"])
    assert new.noise == "learned" and "deprecated" not in capsys.readouterr().err
    old = build_parser("grpo").parse_args(["run", "--noise", "harsh"])
    assert old.noise == "harsh" and "--noise is deprecated: use --train-judge" in capsys.readouterr().err


def test_metrics_are_reported_to_tensorboard_under_trls_names(small_policy, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    run(_config(small_policy, steps=2, report_to="tensorboard"), out)
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [e.value for e in events.Scalars("reward")] == pytest.approx([r["reward"] for r in records])
    assert [e.step for e in events.Scalars("completions/mean_length")] == [1, 2]  # TRL's name for response_tokens
    assert "true_score" in events.Tags()["scalars"] and "time_step" in events.Tags()["scalars"]
    with pytest.raises(ConfigError, match="report_to='tensorbored' is not allowed"):
        _config(small_policy, report_to="tensorbored")


def test_wandb_runs_offline_in_the_run_folder(small_policy, tmp_path, monkeypatch):
    """wandb (an optional extra) is driven as its API says: offline, in the run folder, one log per step."""
    import sys
    import types

    calls = []
    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: calls.append(("init", kw)) or types.SimpleNamespace(
        log=lambda values, step: calls.append(("log", step, values)), finish=lambda: calls.append(("finish",)))
    monkeypatch.setitem(sys.modules, "wandb", fake)
    out = tmp_path / "run"
    run(_config(small_policy, steps=2, report_to="wandb"), out)
    init = calls[0][1]
    assert init["mode"] == "offline" and init["dir"] == str(out) and init["config"]["report_to"] == "wandb"
    assert [c[1] for c in calls if c[0] == "log"] == [1, 2] and calls[-1] == ("finish",)
    assert "reward" in calls[1][2] and "step" not in calls[1][2]


def test_setgrpos_figure_draws_the_level_chosen_in_each_step_and_says_why_early_steps_are_empty():
    from setgrpo_bench.harness.report import setgrpo_figure

    tau = [math.inf, math.inf, 0.3, 0.2, math.inf]
    metrics = [{"step": s + 1, "q": 1.0, "tau": t, "alpha_a": a, "coverage_ref": 0.5, "coverage_true": 0.4,
                "acceptance_nonconstant": 0.0 if math.isinf(t) else 0.6}
               for s, (t, a) in enumerate(zip(tau, [0.9, 0.9, 0.5, 0.8, 0.9]))]
    fig = setgrpo_figure(metrics, "t", alpha_a=0.9, alpha=0.2)
    cover = fig.axes[1]
    [level] = [line for line in cover.get_lines() if line.get_label().startswith("1 − α_a at the level chosen")]
    assert np.allclose(level.get_ydata(), [np.nan, np.nan, 0.5, 0.2, np.nan], equal_nan=True)
    assert any("nothing certified yet" in t.get_text() for t in cover.texts)
