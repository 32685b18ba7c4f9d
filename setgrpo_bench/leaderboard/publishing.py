"""``publish``: validate a run (or a sweep) and add it to the board as one JSON file (DESIGN §10)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..harness.rundir import write_json
from .board import RESULTS, build_board
from .submission import SubmissionError, check_submission, make_submission, run_folders


def _existing(results: Path) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(results.glob("*.json")):
        try:
            out.append((path, json.loads(path.read_text(encoding="utf-8"))))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue  # a broken file is reported by the board build, not by publish
    return out


def publish(paths: Sequence[str | Path], board: str | Path, *, name: str | None = None,
            command: str | None = None, replace: bool = False, protocol: str | None = None) -> list[Path]:
    """Turn run folders (or a sweep folder: one submission per agent) into board files; rebuild the board.

    Refuses, with the reason, anything that does not validate, was made on another suite or (with
    ``protocol``, a ``name@version``) under another protocol, has repeated seeds, or duplicates a
    submission already on the board (``replace`` lets a submission
    take the place of the one with its name, e.g. the same agent with more seeds).
    """
    folders = run_folders(paths)
    by_agent: dict[str, list[Path]] = {}
    for folder in folders:  # one submission per (agent, judge profile)
        config = folder / "config.json"
        saved = json.loads(config.read_text(encoding="utf-8"))["config"] if config.is_file() else {}
        key = f"{saved.get('agent', folder.name)} ({saved.get('noise', '?')})"
        by_agent.setdefault(key, []).append(folder)
    if name and len(by_agent) > 1:
        raise SubmissionError(f"--name names one submission, but the runs hold {len(by_agent)}: {sorted(by_agent)}")
    results = Path(board) / RESULTS
    results.mkdir(parents=True, exist_ok=True)
    written = []
    for agent, runs in sorted(by_agent.items()):
        submission = make_submission(runs, name=name, command=command)
        problems = check_submission(submission)
        if protocol and submission.get("protocol", {}).get("id") != protocol:
            problems.append(f"protocol: the runs were made under {submission.get('protocol', {}).get('id') or 'no protocol'}, "
                            f"this board compares agents under {protocol}; rerun with --protocol {protocol}")
        if problems:
            raise SubmissionError(f"{agent}: " + "; ".join(problems))
        for path, other in _existing(results):
            same_runs = (other.get("config_hash"), other.get("suite", {}).get("hash"), other.get("seeds")) == (
                submission["config_hash"], submission["suite"]["hash"], submission["seeds"])
            if replace and other.get("name") == submission["name"]:
                continue
            if other.get("name") == submission["name"] or same_runs:
                raise SubmissionError(f"{agent}: already on the board as {path.name} "
                                      f"({'same name' if other.get('name') == submission['name'] else 'same config, suite and seeds'})")
        target = results / f"{submission['name']}.json"
        write_json(target, submission)
        written.append(target)
    build_board(board)
    return written


PUBLISH_TIME_FIELDS = ("date", "git_hash")
"""Fields that record when and from which checkout an entry was published, not what its runs say."""


def entry_runs(submission: dict[str, Any], runs_root: str | Path) -> list[Path]:
    """The run folders of a board entry under ``runs_root`` (``<noise>/<agent>/seed<k>/``)."""
    folder = Path(runs_root) / submission["suite"]["noise"] / submission["agent"]
    return [folder / f"seed{seed}" for seed in submission["seeds"]]


def rebuild_entry(submission: dict[str, Any], runs_root: str | Path) -> dict[str, Any]:
    """The entry its runs under ``runs_root`` give today (same name and command; date and git hash of
    now): every aggregate is re-derived from the runs' files."""
    return make_submission(entry_runs(submission, runs_root), name=submission["name"], command=submission.get("command"))


def entry_differences(shipped: Any, rebuilt: Any, prefix: str = "", *, rel: float = 1e-9) -> list[str]:
    """Fields where two entries differ (publish-time fields aside), as dotted paths. Numbers agree
    within ``rel`` (another scipy's root finder moves an exact interval in its 13th digit; an
    aggregation slip moves it in the 2nd)."""
    if isinstance(shipped, dict) and isinstance(rebuilt, dict):
        return [d for key in sorted(set(shipped) | set(rebuilt)) if prefix or key not in PUBLISH_TIME_FIELDS
                for d in entry_differences(shipped.get(key), rebuilt.get(key), f"{prefix}{key}.", rel=rel)]
    if isinstance(shipped, list) and isinstance(rebuilt, list) and len(shipped) == len(rebuilt):
        return [d for i, (a, b) in enumerate(zip(shipped, rebuilt))
                for d in entry_differences(a, b, f"{prefix}{i}.", rel=rel)]
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (shipped, rebuilt))
    if numbers and math.isclose(shipped, rebuilt, rel_tol=rel, abs_tol=rel):
        return []
    return [] if shipped == rebuilt else [prefix.rstrip(".")]
