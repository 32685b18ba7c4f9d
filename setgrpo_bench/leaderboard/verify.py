"""Board entries checked against the runs they were made from (``leaderboard/runs/<entry name>/seed<k>/``:
each entry owns its records, so publishing one never touches another's): an entry is rebuilt from its
runs with today's code and must equal the file on the board; a schema-3 entry's run manifests must also
match the runs' files. Entries whose runs are not there are shown apart, unverified."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..files import exists
from ..harness.rundir import finite_json, manifest_problems, read_json
from .submission import SubmissionError, make_submission

PUBLISH_TIME_FIELDS = ("date", "git_hash")
"""Fields that record when and from which checkout an entry was published, not what its runs say."""


def entry_runs(submission: dict[str, Any], runs_root: str | Path) -> list[Path]:
    """The run folders of a board entry under ``runs_root`` (``<entry name>/seed<k>/``)."""
    return [Path(runs_root) / submission["name"] / f"seed{seed}" for seed in submission["seeds"]]


def rebuild_entry(submission: dict[str, Any], runs_root: str | Path) -> dict[str, Any]:
    """The entry its runs under ``runs_root`` give today (same name and command; date and git hash of
    now): every aggregate is re-derived from the runs' files."""
    return make_submission(entry_runs(submission, runs_root), name=submission["name"], command=submission.get("command"),
                           schema_version=submission["schema_version"])


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


def verify_entry(submission: dict[str, Any], runs_root: str | Path) -> list[str] | None:
    """None when the entry's runs are not under ``runs_root`` (unverified); else every way the entry
    contradicts them (empty: verified)."""
    folders = entry_runs(submission, runs_root)
    if not all(exists(f / "eval.json") for f in folders):
        return None
    problems = []
    for record in submission.get("runs", []):
        folder = Path(runs_root) / submission["name"] / f"seed{record['seed']}"
        on_disk = read_json(folder / "manifest.json") if exists(folder / "manifest.json") else None
        if on_disk != record["manifest"]:
            problems.append(f"seed {record['seed']}: its run's manifest is not the one the entry records")
        problems += manifest_problems(folder, weights_kept=False)  # a board keeps its runs' records, not their weights
    try:
        rebuilt = finite_json(rebuild_entry(submission, runs_root))
    except SubmissionError as exc:
        return problems + [f"its runs cannot be published again: {exc}"]
    differing = sorted(entry_differences(submission, rebuilt), key=lambda d: (not d.startswith("macro."), d))
    if differing:
        problems.append(f"differs from what its runs in {runs_root} give: {', '.join(differing[:6])}"
                        + (f" and {len(differing) - 6} more" if len(differing) > 6 else ""))
    return problems
