"""``sweep``: every (agent, seed) run of a comparison, in parallel processes, resumable (DESIGN §10).

Each run is a ``python -m setgrpo_bench run`` subprocess writing ``<root>/<agent>/seed<k>/``: a run
whose ``eval.json`` exists is skipped, an interrupted one is resumed, and a run that fails is retried
once (with ``--resume``) before it is reported as failed. ``sweep.json`` lists every run's status.
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
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..agents.config import preset_paths, resolve_config
from ..errors import ConfigError, UnknownNameError
from .rundir import write_json

SWEEP = "sweep.json"


@dataclass(frozen=True)
class RunSpec:
    agent: str
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


def plan(agents: Sequence[str], seeds: Sequence[int], root: Path, overrides: Mapping[str, Any]) -> list[RunSpec]:
    """The runs of a sweep; every agent and override is validated before anything starts."""
    known = preset_paths()
    for agent in agents:
        if agent not in known:
            raise UnknownNameError("agent", agent, known)
        resolve_config(agent, {**overrides, "seed": seeds[0]})
    return [RunSpec(agent, seed, root / agent / f"seed{seed}") for agent in agents for seed in seeds]


def _command(spec: RunSpec, overrides: Mapping[str, Any], resume: bool) -> list[str]:
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in overrides.items()]
    return [sys.executable, "-m", "setgrpo_bench", "run", "--agent", spec.agent, "--seed", str(spec.seed),
            "--out", str(spec.out), *flags, *(["--resume"] if resume else [])]


def _execute(spec: RunSpec, overrides: Mapping[str, Any], threads: int) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    attempts = []
    for _ in range(2):  # a crashed run is retried once, resuming from its last checkpoint
        resume = (spec.out / "config.json").is_file()
        done = subprocess.run(_command(spec, overrides, resume), env=env, capture_output=True, text=True)
        attempts.append(done.returncode)
        if done.returncode == 0 and (spec.out / "eval.json").is_file():
            return {"agent": spec.agent, "seed": spec.seed, "out": str(spec.out), "status": "done", "attempts": attempts}
    return {"agent": spec.agent, "seed": spec.seed, "out": str(spec.out), "status": "failed", "attempts": attempts,
            "error": (done.stdout + done.stderr)[-2000:]}


def sweep(agents: Sequence[str], seeds: Sequence[int], root: str | Path, *, overrides: Mapping[str, Any] | None = None,
          jobs: int = 1, console: Console | None = None) -> list[dict[str, Any]]:
    """Run (or skip, or resume) every (agent, seed); returns and writes the status of each run."""
    if jobs < 1:
        raise ConfigError("jobs", jobs, "an integer >= 1")
    console = console or Console()
    root, overrides = Path(root), dict(overrides or {})
    specs = plan(agents, seeds, root, overrides)
    root.mkdir(parents=True, exist_ok=True)
    statuses = {s: {"agent": s.agent, "seed": s.seed, "out": str(s.out), "status": "skipped (finished before)"}
                for s in specs if (s.out / "eval.json").is_file()}
    pending = [s for s in specs if s not in statuses]
    threads = max(1, (os.cpu_count() or 1) // jobs)
    columns = (TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.fields[last]}"))
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("sweep", total=len(specs), completed=len(statuses), last="")
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(_execute, s, overrides, threads): s for s in pending}
            for future in as_completed(futures):
                spec, status = futures[future], future.result()
                statuses[spec] = status
                progress.update(bar, advance=1, last=f"{spec.agent} seed {spec.seed}: {status['status']}")
                write_json(root / SWEEP, {"runs": [statuses[s] for s in specs if s in statuses], "overrides": overrides})
    result = [statuses[s] for s in specs]
    write_json(root / SWEEP, {"runs": result, "overrides": overrides})
    failed = [r for r in result if r["status"] == "failed"]
    for r in failed:
        console.print(f"[red]failed:[/] {r['agent']} seed {r['seed']} ({r['out']}), exit codes {r['attempts']}")
    return result
