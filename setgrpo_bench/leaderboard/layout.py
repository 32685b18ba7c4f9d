"""Where a board keeps its files: ``results/`` (one JSON file per entry), ``runs/<entry name>/seed<k>/``
(each entry's run records), ``audits/<entry name>.json`` (its re-execution audits), and, in an archived
board, ``ARCHIVED.md`` (DESIGN §10)."""

from __future__ import annotations

from pathlib import Path

RESULTS = "results"
RUNS = "runs"
AUDITS = "audits"
FINDINGS = "FINDINGS.md"
"""What a board shows, written by hand beside the generated pages (which link it)."""
ARCHIVED = "ARCHIVED.md"
"""A board folder holding this file is archived: a board of an earlier suite, kept readable. Its text
(why and when it was archived) opens the page; its entries are checked against their runs and their
protocol, not against today's suite, and nothing more can be published to it."""


def archive_note(board: str | Path) -> str | None:
    """The archive note of ``board`` (None for a live board)."""
    path = Path(board) / ARCHIVED
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def archived_boards(board: str | Path) -> list[Path]:
    """The archived boards kept inside ``board`` (``<board>/v1/`` …), oldest first."""
    return sorted((p.parent for p in Path(board).glob(f"*/{ARCHIVED}")), key=lambda p: p.name)
