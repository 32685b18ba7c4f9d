"""The result of grading one response."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Grade:
    """One grading of one response.

    ``score`` is what a trainer sees (the judge's noisy score in [0, 1]; NaN when the judge failed,
    ``valid`` False). ``true_score`` is the noise-free rubric score, for the harness only.
    ``spread`` is the judge's own estimate of the standard deviation of its score (from its stated
    error rates and its verdicts; test-time information, never the truth).
    """

    score: float
    raw_score: float
    verdicts: np.ndarray
    true_score: float
    true_raw_score: float
    true_verdicts: np.ndarray
    valid: bool
    judge_calls: int
    spread: float
    true_score_is_estimate: bool = False  # True when the true score comes from repeated judge calls (no check)
    raw: str | None = None  # the judge's raw answers (JSON list) when they are text, kept for invalid grades
    confidence: np.ndarray | None = None  # per criterion: the judge's probability of the verdict it gave

    def info(self, criterion_ids: tuple[str, ...]) -> dict[str, Any]:
        """A JSON-friendly breakdown for ``env.step``'s info."""
        return {
            "score": self.score,
            "raw_score": self.raw_score,
            "valid": self.valid,
            "judge_calls": self.judge_calls,
            "spread": self.spread,
            "verdicts": {c: bool(v) for c, v in zip(criterion_ids, self.verdicts)} if self.valid else None,
            "true_score": self.true_score,
            "true_raw_score": self.true_raw_score,
            "true_score_is_estimate": self.true_score_is_estimate,
            **({"raw": self.raw} if self.raw is not None and not self.valid else {}),
        }
