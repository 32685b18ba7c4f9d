"""The price of a sweep before it runs (``sweep --dry-run``, DESIGN §10): its run count and CPU-hours,
estimated from the wall times that recorded runs measured (``timings.json``: training and the final
evaluation, times the run's threads).

A planned run is priced by the median CPU-seconds per rollout of the recorded runs closest to it — the
same agent under the same judge, else the same agent under other judges times the judge's cost factor
(what the judge costs its agents against their other judges: the median, over the agents recorded under
it and under others, of the ratio of their medians; 1 when no agent is), else any agent under the same
judge, else every recorded run — times its own rollouts (steps × groups × group size): the source of
each estimate is printed beside it. Recorded runs made two at a time on two cores ran slower than alone,
so the estimate is of the board's own way of running, not of an idle machine.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..files import FileError, exists
from .rundir import read_json


@dataclass(frozen=True)
class MeasuredRun:
    """What a recorded run cost: CPU-seconds per rollout (one response sampled and trained on)."""

    agent: str
    noise: str
    cpu_seconds_per_rollout: float


def _rollouts(config: dict[str, Any]) -> int:
    return int(config["steps"]) * int(config["groups_per_step"]) * int(config["group_size"])


def measured_runs(roots: Iterable[str | Path]) -> list[MeasuredRun]:
    """Every run under ``roots`` (at any depth) whose folder holds its config and its timings."""
    out = []
    for root in map(Path, roots):
        for config_file in sorted({*root.rglob("config.json"), *root.rglob("config.json.gz")}):
            folder = config_file.parent
            if not (exists(folder / "timings.json") and exists(folder / "eval.json")):
                continue
            try:
                config, timings = read_json(folder / "config.json")["config"], read_json(folder / "timings.json")
            except (FileError, KeyError):
                continue
            seconds = (timings.get("train_seconds", 0.0) + timings.get("final_eval_seconds", 0.0)) * timings.get("threads", 1)
            if seconds > 0:
                out.append(MeasuredRun(config["agent"], config["noise"], seconds / _rollouts(config)))
    return out


def judge_factor(noise: str, measured: Sequence[MeasuredRun]) -> tuple[float, int]:
    """(the judge's cost factor of the module docstring, how many agents it rests on)."""
    ratios = []
    for agent in sorted({r.agent for r in measured if r.noise == noise}):
        here = [r.cpu_seconds_per_rollout for r in measured if r.agent == agent and r.noise == noise]
        elsewhere = [r.cpu_seconds_per_rollout for r in measured if r.agent == agent and r.noise != noise]
        if elsewhere:
            ratios.append(float(np.median(here)) / float(np.median(elsewhere)))
    return (float(np.median(ratios)), len(ratios)) if ratios else (1.0, 0)


def estimate(agent: str, noise: str, rollouts: int, measured: Sequence[MeasuredRun]) -> tuple[float, str]:
    """(CPU-seconds, source) of a planned run: the module docstring's nearest recorded runs."""
    for source, match, scaled in (("this agent under this judge", lambda r: r.agent == agent and r.noise == noise, False),
                                  ("this agent, other judges", lambda r: r.agent == agent, True),
                                  ("other agents, this judge", lambda r: r.noise == noise, False),
                                  ("every recorded run", lambda r: True, False)):
        near = [r.cpu_seconds_per_rollout for r in measured if match(r)]
        if near:
            seconds = float(np.median(near)) * rollouts
            factor, agents = judge_factor(noise, measured) if scaled else (1.0, 0)
            if agents:
                return seconds * factor, f"{source} ({len(near)} runs) × {factor:.2f}, this judge's cost factor ({agents} agents)"
            return seconds, f"{source} ({len(near)} runs)"
    return float("nan"), "no recorded run"


def price(cells: Sequence[tuple[str, str, int, dict[str, Any]]], measured: Sequence[MeasuredRun]) -> list[dict[str, Any]]:
    """One row per (agent, judge) cell — (agent, judge, seeds, its resolved config) — with its runs, the
    estimated CPU-seconds of one run and of all, and the estimate's source."""
    rows = []
    for agent, noise, seeds, config in cells:
        seconds, source = estimate(agent, noise, _rollouts(config), measured)
        rows.append({"agent": agent, "noise": noise, "runs": seeds, "cpu_seconds_per_run": seconds,
                     "cpu_hours": seconds * seeds / 3600, "source": source})
    return rows
