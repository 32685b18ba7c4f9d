"""Leaderboard: submissions aggregated over seeds, validated, and built into a static board (DESIGN §10)."""

from .board import board_frame, build_board, load_board
from .publish import publish
from .submission import SubmissionError, check_submission, make_submission

__all__ = ["SubmissionError", "board_frame", "build_board", "check_submission", "load_board", "make_submission", "publish"]
