"""The Ray backend of ``sweep``: the same runs as the local backend, and a sweep that survives a worker
killed mid-run (the run resumes in a new task)."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from conftest import SMALL_RUN

from setgrpo_bench.harness.sweep import RayBackend, sweep


def _run_process(out: Path) -> int | None:
    """The pid of the ``setgrpo_bench run`` process writing ``out``."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"setgrpo_bench" in args and b"run" in args and str(out).encode() in args:
                return int(proc.name)
    return None


def _parent(pid: int) -> int:
    return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker through /proc (Linux)")
def test_a_ray_sweep_survives_a_killed_worker_and_matches_the_local_backend(small_policy, tmp_path):
    ray = pytest.importorskip("ray", reason="the Ray backend needs the [ray] extra")
    overrides = {**SMALL_RUN, "steps": 4, "policy": small_policy}
    local = sweep(["grpo"], [0], tmp_path / "local", overrides=overrides, jobs=max(1, os.cpu_count() or 1))
    assert local[0]["status"] == "done"
    victim = tmp_path / "ray" / "realistic" / "grpo" / "seed1"
    killed, sweep_over = [], threading.Event()

    def kill_the_worker_mid_run():  # no deadline: on a loaded machine Ray's start-up alone can take minutes
        while not sweep_over.is_set() and not killed:
            metrics = victim / "metrics.jsonl"
            if metrics.is_file() and metrics.read_text().count("\n") >= 1 and (pid := _run_process(victim)):
                worker = _parent(pid)
                os.kill(worker, signal.SIGKILL)
                killed.append(worker)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_worker_mid_run, daemon=True)
    killer.start()
    try:
        result = sweep(["grpo"], [0, 1], tmp_path / "ray", overrides=overrides, backend=RayBackend(cpus_per_run=1))
    finally:
        sweep_over.set()
        ray.shutdown()
    killer.join(timeout=1)
    assert killed, "the run finished before its worker could be killed"
    assert [r["status"] for r in result] == ["done", "done"]
    assert result[1]["attempts"][0] != 0 and result[1]["attempts"][-1] == 0 and len(result[1]["attempts"]) == 2
    metrics = [json.loads(x) for x in (victim / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]  # resumed: no step lost or repeated
    same = [json.loads((root / "realistic" / "grpo" / "seed0" / "eval.json").read_text())["final"]
            for root in (tmp_path / "local", tmp_path / "ray")]
    assert same[0] == same[1]  # one thread each: the backend does not change the result
