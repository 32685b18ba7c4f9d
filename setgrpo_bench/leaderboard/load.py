"""Which entries a board accepts (DESIGN §10): each checked on its own, against its protocol and preset,
against its runs and against its latest audit; every rejected file listed with its reason."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..agents.presets import board_presets
from ..agents.protocol import Protocol, load_protocol
from ..errors import SetgrpoBenchError
from .audit import NOT_REPRODUCED, failure, latest_audit, runs_key
from .layout import RESULTS, RUNS, archive_note
from .provenance import preset_problems
from .submission import check_submission
from .verify import verify_entry


def load_board(board: str | Path, runs: str | Path | None = None) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(accepted submissions, [(file, reason) for each rejected file]). Each entry is checked on its own
    (``check_submission``), against its preset when it was made under a protocol, against its runs
    under ``runs`` (default ``<board>/runs``) when they are there, and against its latest audit (an
    entry whose audit failed is rejected). An entry whose runs are absent is accepted with ``verified``
    False (the page lists it apart, unranked); two entries with the same runs are refused. On an
    archived board every entry must be rebuilt from its runs, which stand in for today's suite."""
    archived = archive_note(board) is not None
    runs = Path(board) / RUNS if runs is None else Path(runs)
    accepted, rejected, names = [], [], {}
    for path in sorted((Path(board) / RESULTS).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            rejected.append((path.name, f"not valid JSON, perhaps half-written ({exc})"))
            continue
        problems = check_submission(data, current=not archived)
        if not problems and data["name"] in names:
            problems = [f"duplicate of {names[data['name']]} (same name {data['name']!r})"]
        if not problems and not archived and "protocol" in data:  # a board compares presets, as publish checks
            problems = preset_problems({**data["config"], "seed": data["seeds"][0]})
        verdict = verify_entry(data, runs) if not problems else None
        problems += verdict or []
        if archived and not problems and verdict is None:
            problems = [f"its runs are not under {runs}: an archived board keeps only entries its runs reproduce"]
        audit = latest_audit(data, board) if not problems else None
        if audit is not None and audit["result"] == NOT_REPRODUCED:
            problems = [failure(audit)]
        if problems:
            rejected.append((path.name, "; ".join(problems)))
            continue
        names[data["name"]] = path.name
        accepted.append({**data, "verified": verdict is not None, "audit": audit, "file": path.name})
    return _one_entry_per_runs(accepted, rejected)


def _one_entry_per_runs(accepted: list[dict[str, Any]], rejected: list[tuple[str, str]]
                        ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Two entries with the same runs (their manifests) are one result counted twice: the first published
    of those rebuilt from runs on the board keeps them, every other is refused."""
    owners: dict[str, dict[str, Any]] = {}
    for entry in sorted(accepted, key=lambda e: (not e["verified"], e.get("date", ""), e["file"])):
        if "runs" in entry:
            owners.setdefault(runs_key(entry), entry)
    kept = []
    for entry in accepted:
        owner = owners.get(runs_key(entry)) if "runs" in entry else None
        if owner is not None and owner is not entry:
            rejected.append((entry["file"], f"has the same runs as {owner['file']}: an entry's runs are its own"))
        else:
            kept.append(entry)
    return kept, sorted(rejected)


def missing_cells(frame: pd.DataFrame, presets: Sequence[str], protocol: Protocol) -> list[str]:
    """What a complete board under ``protocol`` lacks (``Protocol.cells``; empty when complete)."""
    have = {(a, n): k for a, n, k in zip(frame["agent"], frame["noise"], frame["seeds"])} if not frame.empty else {}
    return [f"{a} under {n}: {have.get((a, n), 0)} of {k} seeds" for a, n, k in protocol.cells(presets)
            if have.get((a, n), 0) < k]


def entries_protocol(submissions: list[dict[str, Any]]) -> Protocol | None:
    """The one protocol the entries were made under (None when they follow several, or none, or one whose
    file is not in this checkout)."""
    ids = {s["protocol"]["id"] for s in submissions if "protocol" in s}
    if len(ids) != 1:
        return None
    try:
        return load_protocol(ids.pop())
    except SetgrpoBenchError:
        return None


def still_to_run(frame: pd.DataFrame, submissions: list[dict[str, Any]]) -> list[str]:
    """The cells a live board still lacks under the protocol of its entries (this package's presets)."""
    protocol = entries_protocol(submissions)
    return [] if protocol is None else missing_cells(frame, board_presets(protocol), protocol)
