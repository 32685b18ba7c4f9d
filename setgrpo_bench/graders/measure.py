"""Measures of a judge that every layer above the graders reads (the judges' cards, ``judges measure``)."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties counted half (the Mann–Whitney statistic)."""
    scores, positive = np.asarray(scores, float), np.asarray(positive, bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return float("nan")
    ranks = rankdata(scores)  # ties get their average rank
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def calibration_error(probability: np.ndarray, outcome: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error: |mean probability − frequency| per equal-width bin, weighted by its share."""
    p, y = np.asarray(probability, float), np.asarray(outcome, bool)
    which = np.minimum((p * bins).astype(int), bins - 1)
    return float(sum(abs(p[which == b].mean() - y[which == b].mean()) * (which == b).mean()
                     for b in range(bins) if (which == b).any()))


def label_measures(p_yes: np.ndarray, met: np.ndarray) -> dict[str, float]:
    """How a judge's own P(yes) predicts the checks' verdicts: accuracy of P(yes) > ½, calibration, AUROC."""
    p_yes, met = np.asarray(p_yes, float), np.asarray(met, bool)
    return {"accuracy": float(np.mean((p_yes > 0.5) == met)), "ece": calibration_error(p_yes, met),
            "auroc": auroc(p_yes, met)}
