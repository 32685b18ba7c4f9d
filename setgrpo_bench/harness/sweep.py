"""``sweep``: every (agent, judge profile, seed) run of a comparison, in parallel processes,
resumable (DESIGN §10).

Each run is a ``python -m setgrpo_bench run`` subprocess writing ``<root>/<noise>/<agent>/seed<k>/``:
a run whose ``eval.json`` exists is skipped, an interrupted one is resumed, and a run that fails is
retried once (with ``--resume``) before it is reported as failed. ``sweep.json`` lists every run's
status. With ``jobs`` runs at once on C cores, each run gets ⌊C / jobs⌋ torch threads: under a
second load, a run with 2 threads was 3× slower than with 1 on 2 cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..agents.config import preset_paths, resolve_config
from ..errors import ConfigError, UnknownNameError
from .rundir import write_json

SWEEP = "sweep.json"


@dataclass(frozen=True)
class RunSpec:
    agent: str
    noise: str
    seed: int
    out: Path


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
         overrides: Mapping[str, Any]) -> list[RunSpec]:
    """The runs of a sweep; every agent, profile and override is validated before anything starts."""
    known = preset_paths()
    for agent in agents:
        if agent not in known:
            raise UnknownNameError("agent", agent, known)
        for noise in noises:
            resolve_config(agent, {**overrides, "noise": noise, "seed": seeds[0]})
    return [RunSpec(agent, noise, seed, root / noise / agent / f"seed{seed}")
            for noise in noises for agent in agents for seed in seeds]


def _command(spec: RunSpec, overrides: Mapping[str, Any], resume: bool, threads: int) -> list[str]:
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in overrides.items()]
    return [sys.executable, "-m", "setgrpo_bench", "run", "--agent", spec.agent, "--noise", spec.noise,
            "--seed", str(spec.seed), "--threads", str(threads), "--out", str(spec.out), *flags,
            *(["--resume"] if resume else [])]


def _status(spec: RunSpec, status: str, **extra: Any) -> dict[str, Any]:
    return {"agent": spec.agent, "noise": spec.noise, "seed": spec.seed, "out": str(spec.out), "status": status, **extra}


def _execute(spec: RunSpec, overrides: Mapping[str, Any], threads: int) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    attempts = []
    for _ in range(2):  # a crashed run is retried once, resuming from its last checkpoint
        resume = (spec.out / "config.json").is_file()
        done = subprocess.run(_command(spec, overrides, resume, threads), env=env, capture_output=True, text=True)
        attempts.append(done.returncode)
        if done.returncode == 0 and (spec.out / "eval.json").is_file():
            return _status(spec, "done", attempts=attempts)
    return _status(spec, "failed", attempts=attempts, error=(done.stdout + done.stderr)[-2000:])


def sweep(agents: Sequence[str], seeds: Sequence[int], root: str | Path, *, noises: Sequence[str] = ("realistic",),
          overrides: Mapping[str, Any] | None = None, jobs: int = 1, console: Console | None = None) -> list[dict[str, Any]]:
    """Run (or skip, or resume) every (agent, noise, seed); returns and writes the status of each run."""
    if jobs < 1:
        raise ConfigError("jobs", jobs, "an integer >= 1")
    console = console or Console()
    root, overrides = Path(root), dict(overrides or {})
    specs = plan(agents, noises, seeds, root, overrides)
    root.mkdir(parents=True, exist_ok=True)
    statuses = {s: _status(s, "skipped (finished before)") for s in specs if (s.out / "eval.json").is_file()}
    pending = [s for s in specs if s not in statuses]
    threads = max(1, available_cores() // jobs)
    columns = (TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
               TimeRemainingColumn(), TextColumn("{task.fields[last]}"))
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("sweep", total=len(specs), completed=len(statuses), last="")
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(_execute, s, overrides, threads): s for s in pending}
            for future in as_completed(futures):
                spec, status = futures[future], future.result()
                statuses[spec] = status
                progress.update(bar, advance=1, last=f"{spec.agent} {spec.noise} seed {spec.seed}: {status['status']}")
                write_json(root / SWEEP, {"runs": [statuses[s] for s in specs if s in statuses], "overrides": overrides})
    result = [statuses[s] for s in specs]
    write_json(root / SWEEP, {"runs": result, "overrides": overrides})
    for r in result:
        if r["status"] == "failed":
            console.print(f"[red]failed:[/] {r['agent']} {r['noise']} seed {r['seed']} ({r['out']}), exit codes {r['attempts']}")
    return result


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
