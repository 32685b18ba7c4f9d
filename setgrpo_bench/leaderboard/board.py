"""The leaderboard: submissions in ``<board>/results/*.json`` → a ranked table (pandas), Markdown and a
static HTML page with figures that opens from disk (DESIGN §10). Nothing is skipped silently: every
file that cannot go on the board is listed with its reason.

    load.py      which entries are accepted, and why the others are not
    tables.py    one row per entry, and the strings the pages show
    verdicts.py  win, tie or loss against the baseline under each judge
    figures.py   the figures, as PNGs
    pages.py     README.md and index.html
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..harness.rundir import write_texts
from .layout import FINDINGS, archive_note, archived_boards
from .load import load_board, missing_cells, still_to_run
from .pages import html_page, markdown
from .tables import board_frame, summary_frame
from .verdicts import noise_order

__all__ = ["board_frame", "build_board", "html_page", "load_board", "markdown", "missing_cells", "noise_order",
           "summary_frame"]


def build_board(board: str | Path, runs: str | Path | None = None) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Write ``README.md`` and ``index.html`` of the board (entries checked against ``runs``, default
    ``<board>/runs``), both or neither; returns (table of the ranked entries, rejected files). Entries
    whose runs are not on the board are listed apart, unranked."""
    board = Path(board)
    submissions, rejected = load_board(board, runs)
    apart = [s for s in submissions if not s["verified"]]
    ranked = [s for s in submissions if s["verified"]]
    frame = board_frame(ranked)
    ordered = sorted(ranked, key=lambda s: list(frame["name"]).index(s["name"])) if ranked else []
    note = archive_note(board)
    context = {"note": note, "earlier": [p.name for p in archived_boards(board)],
               "missing": [] if note else still_to_run(frame, ranked), "apart": apart,
               "findings": (board / FINDINGS).is_file()}
    write_texts({board / "README.md": markdown(frame, rejected, ordered, **context),
                 board / "index.html": html_page(frame, rejected, ordered, **context)})
    return frame, rejected
