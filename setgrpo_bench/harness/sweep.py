"""``sweep``: every (agent, judge profile, seed) run of a comparison, in parallel processes,
resumable (DESIGN §10).

Each run is a ``python -m setgrpo_bench run`` subprocess writing ``<root>/<noise>/<agent>/seed<k>/``:
a run whose ``eval.json`` exists is skipped, an interrupted one is resumed (a folder holding a run made
with other settings is neither: it is reported and left as it is), and a run that fails is
retried once (with ``--resume``) before it is reported as failed. ``sweep.json`` lists every run's
status. With ``jobs`` runs at once on C cores, each run gets ⌊C / jobs⌋ torch threads: under a
second load, a run with 2 threads was 3× slower than with 1 on 2 cores.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..agents.presets import preset_paths, resolve_config
from ..errors import ConfigError, UnknownNameError
from .rundir import (
    CONFIG,
    EVAL,
    FileError,
    RunLockedError,
    holds_run,
    read_json,
    write_json,
)
from .threads import available_cores

SWEEP = "sweep.json"
SETTINGS_DIFFER = "settings differ (not run)"


@dataclass(frozen=True)
class RunSpec:
    agent: str
    noise: str
    seed: int
    out: Path

    @property
    def finished(self) -> bool:
        """Whether the run wrote its final evaluation: a resumed sweep skips it."""
        return (self.out / EVAL).is_file()


def parse_seeds(text: str) -> list[int]:
    """``5`` → seeds 0…4; ``0,3,7`` → those seeds."""
    try:
        seeds = list(range(int(text))) if text.strip().isdigit() else [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ConfigError("seeds", text, "a count (e.g. 5) or comma-separated seeds (e.g. 0,1,2)") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError("seeds", text, "at least one distinct, non-negative seed")
    return seeds


def plan(agents: Sequence[str], noises: Sequence[str], seeds: Sequence[int], root: Path,
         overrides: Mapping[str, Any], cells: Sequence[tuple[str, str, int]] = ()) -> list[RunSpec]:
    """The runs of a sweep — every agent under every profile at ``seeds``, or, given ``cells`` (agent,
    profile, k: a board's, ``Protocol.cells``), each cell at seeds 0 … k − 1; every agent, profile and
    override is validated before anything starts."""
    runs = ([(agent, noise, range(k)) for agent, noise, k in cells] if cells
            else [(agent, noise, seeds) for noise in noises for agent in agents])
    known = preset_paths()
    for agent, noise, cell_seeds in runs:
        if agent not in known:
            raise UnknownNameError("agent", agent, known)
        resolve_config(agent, {**overrides, "noise": noise, "seed": cell_seeds[0]})
    return [RunSpec(agent, noise, seed, root / noise / agent / f"seed{seed}")
            for agent, noise, cell_seeds in runs for seed in cell_seeds]


def settings_changed(spec: RunSpec, overrides: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The settings in which the run already in ``spec.out`` differs from the one this sweep would make
    (setting → [saved, planned]; empty when it is the same run or there is none): such a folder is
    neither skipped as done nor resumed, and nothing in it is touched."""
    if not holds_run(spec.out):
        return {}
    try:
        saved = read_json(spec.out / CONFIG)["config"]
    except FileError:
        return {}  # damaged: the run's own resume reports it
    planned = resolve_config(spec.agent, {**overrides, "noise": spec.noise, "seed": spec.seed}).experiment()
    return {k: [saved[k], v] for k, v in sorted(planned.items()) if k in saved and saved[k] != v}  # recorded settings


def _command(spec: RunSpec, overrides: Mapping[str, Any], resume: bool, threads: int) -> list[str]:
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in overrides.items()]
    return [sys.executable, "-m", "setgrpo_bench", "run", "--agent", spec.agent, "--train-judge", spec.noise,
            "--seed", str(spec.seed), "--threads", str(threads), "--out", str(spec.out), *flags,
            *(["--resume"] if resume else [])]


def _status(spec: RunSpec, status: str, **extra: Any) -> dict[str, Any]:
    return {"agent": spec.agent, "noise": spec.noise, "seed": spec.seed, "out": str(spec.out), "status": status, **extra}


def _die_with_parent() -> None:
    """In the run's child process: die with the process that started it (Linux), so that a killed
    sweep worker never leaves an orphan run writing into a folder its retry resumes."""
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def attempt(spec: RunSpec, overrides: Mapping[str, Any], threads: int) -> tuple[int, str]:
    """One attempt at a run, as a subprocess (resuming when its folder holds the run): (exit code,
    the end of its output)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    resume = holds_run(spec.out)
    done = subprocess.run(_command(spec, overrides, resume, threads), env=env, capture_output=True, text=True,
                          preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    return done.returncode, (done.stdout + done.stderr)[-2000:]


@dataclass(frozen=True)
class RayBackend:
    """Runs as Ray tasks, each with its own resources, on a local Ray (started for the sweep) or the
    cluster at ``address``."""

    address: str | None = None
    cpus_per_run: int = 1
    gpus_per_run: float = 0.0

    def __post_init__(self) -> None:
        if self.cpus_per_run < 1:
            raise ConfigError("cpus_per_run", self.cpus_per_run, "an integer >= 1")
        if self.gpus_per_run < 0:
            raise ConfigError("gpus_per_run", self.gpus_per_run, "a number >= 0")

    def submitter(self, overrides: Mapping[str, Any]) -> Callable[[RunSpec], Future]:
        try:
            import ray
        except ImportError:
            raise ConfigError("backend", "ray", "an installed Ray", "pip install -e '.[ray]'") from None
        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        remote = ray.remote(num_cpus=self.cpus_per_run, num_gpus=self.gpus_per_run, max_retries=0)(attempt)
        return lambda spec: remote.remote(spec, overrides, self.cpus_per_run).future()


def sweep(agents: Sequence[str], seeds: Sequence[int], root: str | Path, *, noises: Sequence[str] = ("realistic",),
          overrides: Mapping[str, Any] | None = None, jobs: int = 1, backend: RayBackend | None = None,
          threads: int | None = None, console: Console | None = None,
          cells: Sequence[tuple[str, str, int]] = ()) -> list[dict[str, Any]]:
    """Run (or skip, or resume) every (agent, noise, seed), or every run of ``cells`` (``plan``); returns
    and writes the status of each run.

    Locally, ``jobs`` runs at a time with ``threads`` (default ⌊cores / jobs⌋) threads each; on Ray
    (``backend``), every run is a task with the backend's resources and ``cpus_per_run`` threads. A run
    whose folder another process writes is reported as locked, not retried. Either way a run whose
    attempt fails (or whose worker dies) is tried once more, resuming from its last checkpoint; the
    same seed and thread count give the same ``eval.json`` on either backend.
    """
    if jobs < 1:
        raise ConfigError("jobs", jobs, "an integer >= 1")
    console = console or Console()
    root, overrides = Path(root), dict(overrides or {})
    specs = plan(agents, noises, seeds, root, overrides, cells)
    root.mkdir(parents=True, exist_ok=True)
    statuses = {s: _status(s, SETTINGS_DIFFER, changed=changed) for s in specs if (changed := settings_changed(s, overrides))}
    statuses.update({s: _status(s, "skipped (finished before)") for s in specs
                     if s not in statuses and s.finished})
    columns = (TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
               TimeRemainingColumn(), TextColumn("{task.fields[last]}"))
    with Progress(*columns, console=console) as progress, ThreadPoolExecutor(max_workers=jobs) as pool:
        bar = progress.add_task("sweep", total=len(specs), completed=len(statuses), last="")
        threads = threads or max(1, available_cores() // jobs)
        submit = backend.submitter(overrides) if backend else (lambda spec: pool.submit(attempt, spec, overrides, threads))
        pending = {submit(s): s for s in specs if s not in statuses}
        attempts: dict[RunSpec, list[int]] = {}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                spec = pending.pop(future)
                try:
                    code, tail = future.result()
                except Exception as exc:  # the worker running the attempt died  # noqa: BLE001
                    code, tail = -1, f"{type(exc).__name__}: {exc}"[-2000:]
                attempts.setdefault(spec, []).append(code)
                if code == 0 and spec.finished:
                    statuses[spec] = _status(spec, "done", attempts=attempts[spec])
                elif code == RunLockedError.exit_status:  # another process writes the folder: a retry is refused too
                    statuses[spec] = _status(spec, "failed", attempts=attempts[spec], error=tail)
                elif len(attempts[spec]) < 2:  # retried once, resuming from its last checkpoint
                    pending[submit(spec)] = spec
                    continue
                else:
                    statuses[spec] = _status(spec, "failed", attempts=attempts[spec], error=tail)
                progress.update(bar, advance=1, last=f"{spec.agent} {spec.noise} seed {spec.seed}: {statuses[spec]['status']}")
                write_json(root / SWEEP, {"runs": [statuses[s] for s in specs if s in statuses], "overrides": overrides})
    result = [statuses[s] for s in specs]
    write_json(root / SWEEP, {"runs": result, "overrides": overrides})
    for r in result:
        if r["status"] == "failed":
            console.print(f"[red]failed:[/] {r['agent']} {r['noise']} seed {r['seed']} ({r['out']}), exit codes {r['attempts']}")
        elif r["status"] == SETTINGS_DIFFER:
            changed = ", ".join(f"{k} {saved!r} → {planned!r}" for k, (saved, planned) in r["changed"].items())
            console.print(f"[red]{SETTINGS_DIFFER}:[/] {r['out']} holds a run made with other settings ({changed}); "
                          "left as it is: sweep into another --out, or move that run away", highlight=False)
    return result
