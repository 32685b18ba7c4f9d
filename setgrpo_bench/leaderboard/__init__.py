"""Leaderboard: submissions aggregated over seeds, validated, and built into a static board (DESIGN §10)."""

from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".board": ["board_frame", "build_board", "load_board", "noise_order", "summary_frame"],
    ".publishing": ["publish"],
    ".submission": ["SubmissionError", "check_submission", "make_submission"],
})
