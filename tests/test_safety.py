"""What a hostile or careless user tries: nothing destroyed that a run did not write, nothing executed
from a run folder, no input that hangs or escapes its catalog, no plugin that breaks what it is not
part of, no built-in preset replaced by accident."""

import importlib.metadata
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import SMALL_RUN, Killed, kill_after

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.errors import SpecError
from setgrpo_bench.harness import run
from setgrpo_bench.harness.checkpoints import CheckpointError
from setgrpo_bench.harness.rundir import RunDirError, read_json, sha256_file, write_json
from setgrpo_bench.harness.runner import evaluate_policy
from setgrpo_bench.harness.state_file import StateFileError, load_state, save_state


def _config(policy, **kw):
    return resolve_config("grpo", {**SMALL_RUN, "steps": 1, "policy": policy, **kw})


# ---------------------------------------------------------------- nothing destroyed that a run did not write


def test_overwrite_replaces_a_run_and_nothing_else(small_policy, tmp_path):
    project = tmp_path / "project"  # a folder that holds no run: a repository, a model
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / "config.json").write_text('{"model_type": "gpt2"}')  # a model's config.json is not a run's
    for flags in ({}, {"overwrite": True}):
        with pytest.raises(RunDirError, match="holds no run of this package") as caught:
            run(_config(small_policy), project, **flags)
        assert "pass --overwrite" not in str(caught.value)
    assert (project / ".git" / "HEAD").is_file() and (project / "config.json").read_text() == '{"model_type": "gpt2"}'
    out = tmp_path / "run"
    run(_config(small_policy), out)
    (out / "notes.txt").write_text("mine")  # the user's file beside a run stays when the run is replaced
    run(_config(small_policy, lr=1e-3), out, overwrite=True)
    assert (out / "notes.txt").read_text() == "mine" and read_json(out / "config.json")["config"]["lr"] == 1e-3


def test_a_failed_extension_keeps_the_shorter_runs_result(small_policy, tmp_path):
    out = tmp_path / "run"
    run(_config(small_policy, steps=1), out)
    before = {name: (out / name).read_bytes() for name in ("eval.json", "manifest.json", "timings.json")}
    with pytest.raises(Killed):
        run(_config(small_policy, steps=3), out, resume=True, on_step=kill_after(2))
    kept = out / "superseded" / "steps1"
    assert {name: (kept / name).read_bytes() for name in before} == before
    assert read_json(kept / "config.json")["config"]["steps"] == 1
    run(_config(small_policy, steps=3), out, resume=True)
    assert read_json(out / "eval.json")["steps"] == 3 and (kept / "eval.json").read_bytes() == before["eval.json"]


def test_evaluate_refuses_to_write_into_a_run(small_policy, tmp_path):
    out = tmp_path / "run"
    run(_config(small_policy), out)
    before = (out / "eval.json").read_bytes()
    with pytest.raises(RunDirError, match="holds a run, whose eval.json is its result"):
        evaluate_policy(_config(small_policy), out)
    assert (out / "eval.json").read_bytes() == before


def test_a_sweep_reports_a_run_made_with_other_settings_and_leaves_it(small_policy, tmp_path):
    from setgrpo_bench.harness.sweep import SETTINGS_DIFFER, sweep

    overrides = {**SMALL_RUN, "steps": 1, "policy": small_policy}
    [done] = sweep(["grpo"], [0], tmp_path, overrides=overrides)
    result = (tmp_path / "realistic" / "grpo" / "seed0" / "eval.json").read_bytes()
    assert done["status"] == "done"
    [again] = sweep(["grpo"], [0], tmp_path, overrides={**overrides, "lr": 1e-3})
    assert again["status"] == SETTINGS_DIFFER and again["changed"]["lr"][1] == 1e-3
    assert (tmp_path / "realistic" / "grpo" / "seed0" / "eval.json").read_bytes() == result
    [same] = sweep(["grpo"], [0], tmp_path, overrides=overrides)
    assert same["status"] == "skipped (finished before)"


def test_an_interrupted_run_says_where_it_stopped_and_how_to_go_on(small_policy, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "setgrpo_bench", "run", "--policy", small_policy, "--out", str(out), "--steps", "500",
               "--envs", "UnitConversion", "--groups-per-step", "2", "--group-size", "3", "--eval-instances", "2",
               "--max-new-tokens", "8", "--threads", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not ((out / "checkpoints" / "latest").is_file() and process.poll() is None):
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM and "Traceback" not in stdout + stderr
    [line] = [x for x in stdout.splitlines() if x.startswith("interrupted")]
    step = int((out / "checkpoints" / "latest").read_text().removeprefix("step_"))
    assert re.search(rf"interrupted \(SIGTERM\): {re.escape(str(out))} keeps its checkpoint of step {step}; continue "
                     r"with: python -m setgrpo_bench run .* --resume$", line), line


# ---------------------------------------------------------------- nothing executed from a run folder


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_trainer_state_is_refused_unread(small_policy, tmp_path):
    out = tmp_path / "run"
    run(_config(small_policy, steps=2), out)
    marker = tmp_path / "executed"
    for folder in (out / "checkpoints").glob("step_*"):  # every checkpoint crafted, checksums made to match
        (folder / "trainer_state.pt").write_bytes(pickle.dumps({"step": 2, "trainer": _Payload(marker)}))
        sums = read_json(folder / "checksums.json")
        write_json(folder / "checksums.json", {**sums, "trainer_state.pt": sha256_file(folder / "trainer_state.pt")})
    with pytest.raises(CheckpointError):
        run(_config(small_policy, steps=3), out, resume=True)
    assert not marker.exists()
    with pytest.raises(StateFileError, match="refused unread, not executed"):
        load_state(next((out / "checkpoints").glob("step_*")) / "trainer_state.pt")
    assert not marker.exists()


def test_trainer_state_keeps_arrays_and_random_streams_exactly(tmp_path):
    rng = np.random.default_rng(5)
    state = {"window": [(0, {"a_hat": rng.normal(size=4), "gram": np.eye(2, dtype=np.float32)})],
             "rng": rng.bit_generator.state, "mask": np.array([True, False]), "count": np.int64(3)}
    save_state(tmp_path / "s.pt", state)
    back = load_state(tmp_path / "s.pt")
    assert back["rng"] == rng.bit_generator.state and back["count"] == 3 and back["window"][0][0] == 0
    np.testing.assert_array_equal(back["window"][0][1]["a_hat"], state["window"][0][1]["a_hat"])
    assert back["window"][0][1]["gram"].dtype == np.float32 and back["mask"].dtype == bool
    with pytest.raises(StateFileError, match=r"state.agent: a set is not plain data"):
        save_state(tmp_path / "t.pt", {"agent": {1, 2}})


# ---------------------------------------------------------------- bad input refused, fast


BOMB = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10 if i else ["x"] * 10) + "]\n" for i in range(6))
"""A billion-laughs document of 250 bytes: six levels of ten aliases, 10⁶ nodes once expanded."""


def test_an_alias_bomb_is_refused_at_its_line(tmp_path, monkeypatch):
    from setgrpo_bench.agents.presets import load_preset
    from setgrpo_bench.tasks.yamlio import load_yaml

    (tmp_path / "bomb.yaml").write_text(BOMB)
    with pytest.raises(SpecError, match=r"bomb.yaml:1: the document expands to more than 100,000 nodes"):
        load_yaml(tmp_path / "bomb.yaml")
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "bomb.yaml").write_text("extends: grpo\n" + BOMB.replace("l6:", "lr_list:"))
    monkeypatch.setenv("SETGRPO_BENCH_CATALOG", str(tmp_path))
    with pytest.raises(SpecError, match="expands to more than"):
        load_preset("bomb")
    (tmp_path / "fine.yaml").write_text("base: &b {x: 1}\nuse: [*b, *b]\n")  # a modest alias is fine
    assert load_yaml(tmp_path / "fine.yaml")[0] == {"base": {"x": 1}, "use": [{"x": 1}, {"x": 1}]}


def test_non_finite_numbers_are_refused_at_their_line(tmp_path):
    from setgrpo_bench.tasks import load_benchmark, validate_benchmark
    from setgrpo_bench.tasks.yamlio import load_yaml

    (tmp_path / "x.yaml").write_text("a: 1.5\nb: [2, .NaN]\nc: -.inf\n")
    with pytest.raises(SpecError, match=r"x.yaml:2: '.NaN' is not a finite number"):
        load_yaml(tmp_path / "x.yaml")
    (tmp_path / "y.yaml").write_text("a: 1.0e+400\n")
    with pytest.raises(SpecError, match=r"y.yaml:1: '1.0e\+400' is not a finite number"):
        load_yaml(tmp_path / "y.yaml")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "benchmark.yaml").write_text(
        "name: Kitchen\ndomain: cooking\nsizes: {train: 5, calib: 5, eval: 5}\nprompt: Cook.\ncriteria:\n"
        "  - id: cook\n    text: Cooks.\n    points: .nan\n    category: essential\n"
        "    check: {type: keyword_any, terms: [cook]}\n")
    problems = [str(p) for p in validate_benchmark(tmp_path / "bench")]
    assert any("benchmark.yaml:8" in p and "not a finite number" in p for p in problems), problems
    line = {"id": "n1", "prompt": "Hi.", "rubric": [{"id": "a", "text": "A", "points": float("nan"), "category": "essential"}]}
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "tasks.jsonl").write_text(json.dumps({**line, "split": "eval"}) + "\n")  # json writes NaN
    (tmp_path / "f" / "benchmark.yaml").write_text("name: F\ndomain: d\nkind: file\ntasks: tasks.jsonl\n")
    with pytest.raises(SpecError, match=r"tasks.jsonl:1: NaN is not a finite number"):
        load_benchmark(tmp_path / "f" / "benchmark.yaml")


@pytest.mark.parametrize("where", ["../outside.jsonl", "/etc/passwd", "link.jsonl"])
def test_task_files_stay_inside_their_benchmark(tmp_path, where):
    from setgrpo_bench.tasks import load_benchmark

    folder = tmp_path / "catalog" / "envs" / "F"
    folder.mkdir(parents=True)
    (tmp_path / "catalog" / "envs" / "outside.jsonl").write_text("{}\n")
    (folder / "link.jsonl").symlink_to(tmp_path / "catalog" / "envs" / "outside.jsonl")
    (folder / "benchmark.yaml").write_text(f"name: F\ndomain: d\nkind: file\ntasks: {where}\n")
    with pytest.raises(SpecError, match=r"benchmark.yaml: tasks: .*(must be a path inside|leads outside) the benchmark's folder"):
        load_benchmark(folder / "benchmark.yaml")


def test_regex_checks_stay_on_their_line_and_find_what_they_found():
    """``^\\s*`` and ``^\\W*`` are kept to their line in every built-in check (a response of 16,000
    newlines took seconds; benchmarks/test_grading_speed.py measures it), and on random responses
    the kept pattern is found exactly where the written one is."""
    from setgrpo_bench.envs import load_env_benchmark
    from setgrpo_bench.policy.embedded import builtin_names
    from setgrpo_bench.tasks.checks import Regex
    from setgrpo_bench.tasks.response import line_local

    rewritten = 0
    for name in builtin_names():
        task = load_env_benchmark(name).instance("eval", 0)
        for criterion in task.rubric:
            if isinstance(criterion.check, Regex):
                compiled = criterion.check._compiled.pattern
                assert compiled == line_local(criterion.check.pattern)
                assert not re.search(r"\^\\[sW]\*", compiled), compiled
                rewritten += compiled != criterion.check.pattern
    assert rewritten >= 3  # EventInvitation's greeting, MeetingMinutes' two action items
    rng = np.random.default_rng(0)
    pieces = ["\n", " ", "\t", "-", "* ", "dear", "hi", "Ana", ",", "x", "\n\n", "  -"]
    for pattern in (r"^\W*(?:dear|hi)\s+ana\b", r"^\s*[-*•]\s*ana\b.*\bx\b", r"(?:^\s*x|^\W*hi)", r"[^\s]^\s*-"):
        written, kept = (re.compile(p, re.M | re.I) for p in (pattern, line_local(pattern)))
        for _ in range(3000):
            text = "".join(rng.choice(pieces, size=rng.integers(0, 12)))
            assert (written.search(text) is None) == (kept.search(text) is None), (pattern, text)


def test_names_are_drawn_as_written(tmp_path):
    from setgrpo_bench.harness.report import plot_curves

    name = r"$\fooo{$"  # mathtext that does not parse
    records = [{"step": s, "reward": 0.3, "true_score": 0.2} for s in (1, 2)]
    evaluation = {"macro_true_score": 0.2, "macro_true_score_se": 0.01, "macro_judge_score": 0.3}
    plot_curves(records, {"initial": evaluation, "final": evaluation}, tmp_path / "c.png", title=name)
    assert (tmp_path / "c.png").stat().st_size > 0


# ---------------------------------------------------------------- plugins isolated, presets not shadowed


def _entry_points(group, *values):
    return lambda **kw: [importlib.metadata.EntryPoint(name=f"ep{i}", value=v, group=group)
                         for i, v in enumerate(values)] if kw.get("group") == group else []


def test_a_broken_plugin_is_one_warning_and_breaks_nothing_else(tmp_path, monkeypatch):
    from setgrpo_bench.agents import coefficients, plugins
    from setgrpo_bench.agents.coefficients import coefficient_rules
    from setgrpo_bench.cli import main

    (tmp_path / "takes_grpo.py").write_text(
        "from setgrpo_bench.agents.plugins import Plugin\nplugin = Plugin(rules={'grpo': lambda r, **_: r})\n")
    (tmp_path / "good_rule.py").write_text(
        "from setgrpo_bench.agents.plugins import Plugin\nplugin = Plugin(rules={'good_rule': lambda r, **_: r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = ("no_such_module_xyz:plugin", "json:dumps", "takes_grpo:plugin", "good_rule:plugin")
    monkeypatch.setattr(plugins, "entry_points", _entry_points(plugins.ENTRY_POINT_GROUP, *broken))
    plugins.installed_plugins.cache_clear()
    try:
        with pytest.warns(UserWarning) as caught:
            loaded = plugins.installed_plugins()
        messages = [str(w.message) for w in caught]
        assert sorted(name for p in loaded for name in p.plugin.rules) == ["good_rule", "grpo"]
        assert any("no_such_module_xyz" in m and "is not loaded: ModuleNotFoundError" in m for m in messages)
        assert any("json:dumps" in m and "a setgrpo_bench.agents.plugins.Plugin" in m for m in messages)
        coefficients._warn_once.cache_clear()
        with pytest.warns(UserWarning, match="its coefficient rule 'grpo' is not loaded: 'grpo' is a built-in rule"):
            rules = coefficient_rules()
        assert rules["grpo"].__module__ == "setgrpo_bench.agents.coefficients" and "good_rule" in rules
        assert resolve_config("grpo").coefficients.rule == "grpo"
        with pytest.raises(SystemExit) as help_exit:
            main(["--help"])
        assert help_exit.value.code == 0
    finally:
        plugins.installed_plugins.cache_clear()


def test_a_broken_catalog_package_is_one_warning(monkeypatch):
    from setgrpo_bench import catalog
    from setgrpo_bench.agents.presets import preset_paths

    monkeypatch.setattr(catalog, "entry_points", _entry_points(catalog.ENTRY_POINT_GROUP, "no_such_catalog_xyz:CATALOG"))
    catalog._warn_once.cache_clear()
    with pytest.warns(UserWarning, match="catalog of ep0 .* is not loaded: ModuleNotFoundError"):
        assert "grpo" in preset_paths()


def test_a_built_in_preset_is_replaced_only_on_purpose_and_then_on_the_record(small_policy, tmp_path, monkeypatch):
    from setgrpo_bench.agents import presets
    from setgrpo_bench.harness.runner import plugins_of
    from setgrpo_bench.leaderboard import build_board, publish

    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "grpo.yaml").write_text("lr: 1.0e-9\n")  # the package: GRPO, 100× smaller steps
    (tmp_path / "protocols").mkdir()
    (tmp_path / "protocols" / "tiny.yaml").write_text(
        "name: tiny\nversion: 1\ndescription: a test budget\nsettings: {steps: 1, groups_per_step: 2, group_size: 3, "
        "mu: 1, eval_instances: 2}\nseeds: 2\nnoise: [realistic]\nmain: realistic\nother_seeds: 2\ncore: []\n")
    monkeypatch.setenv("SETGRPO_BENCH_CATALOG", str(tmp_path))
    presets._warn_once.cache_clear()
    with pytest.warns(UserWarning, match=r"grpo.yaml: left out, since 'grpo' is a built-in preset; .*'replaces: grpo'"):
        builtin_lr = resolve_config("grpo").objective.lr
    assert builtin_lr != 1e-9
    (tmp_path / "agents" / "grpo.yaml").write_text(  # a protocol run is its preset unchanged: the preset sets it all
        f"replaces: grpo\nlr: 1.0e-9\nenvs: {SMALL_RUN['envs']}\nmax_new_tokens: 8\npolicy: {small_policy}\n")
    config = resolve_config("grpo", {"protocol": "tiny"})
    assert config.objective.lr == 1e-9
    [record] = plugins_of(config)
    assert record["name"].startswith("preset grpo") and record["version"] == "catalog file"
    for seed in (0, 1):
        run(resolve_config("grpo", {"protocol": "tiny", "seed": seed}), tmp_path / "runs" / f"seed{seed}")
    [written] = publish([tmp_path / "runs"], tmp_path / "board", protocol="tiny@1")  # accepted where it was made
    assert json.loads(written.read_text())["plugins"] == [record]
    (tmp_path / "agents" / "grpo.yaml").unlink()  # elsewhere, where grpo is the built-in preset
    reason = dict(build_board(tmp_path / "board")[1])[written.name]
    assert "differs from preset 'grpo'" in reason and "lr=1e-09" in reason


# ---------------------------------------------------------------- the board's pages, the cached evaluation


def test_a_full_disk_while_building_replaces_neither_page(tmp_path, monkeypatch):
    import errno

    from setgrpo_bench import files

    for name in ("README.md", "index.html"):
        (tmp_path / name).write_text("old")
    calls = {"n": 0}
    real = files.os.fsync

    def second_fails(fd):
        calls["n"] += 1
        if calls["n"] == 2:  # the first page is staged; the disk fills while the second is written
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(files.os, "fsync", second_fails)
    with pytest.raises(files.FileError, match="the disk is full.*none was replaced"):
        files.write_texts({tmp_path / "README.md": "new", tmp_path / "index.html": "new"})
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"README.md": "old", "index.html": "old"}


def test_the_cached_initial_evaluation_is_keyed_by_the_code_and_checked(small_policy, tmp_path, monkeypatch):
    from setgrpo_bench.harness import runner
    from setgrpo_bench.policy.embedded import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    first = run(_config(small_policy), tmp_path / "a")["initial"]
    [cached] = (tmp_path / "cache" / "evaluations").glob("*.json")
    edited = read_json(cached)
    edited["evaluation"]["macro_true_score"] = 0.99  # an edited cache file is not reused
    write_json(cached, edited)
    assert run(_config(small_policy), tmp_path / "b")["initial"] == first
    assert read_json(cached)["evaluation"]["macro_true_score"] == first["macro_true_score"]
    monkeypatch.setattr(runner, "code_fingerprint", lambda: "other code")  # an edit of the code computes it again
    run(_config(small_policy), tmp_path / "c")
    assert len(list((tmp_path / "cache" / "evaluations").glob("*.json"))) == 2
