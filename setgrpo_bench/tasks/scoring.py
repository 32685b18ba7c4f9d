"""Rubric scores from criterion verdicts (DESIGN §3)."""

from __future__ import annotations

import numpy as np

from ..errors import UnknownNameError

SCORE_RULES = ("healthbench", "rar")


def rubric_score(points: np.ndarray, met: np.ndarray, rule: str = "healthbench") -> tuple[np.ndarray, np.ndarray]:
    """Score responses from verdicts.

    ``healthbench`` (Arora et al. 2025, HealthBench): Σ_j points_j·met_j / Σ_{points_j>0} points_j, which
    is negative when pitfalls outweigh; the reported score clips it to [0, 1].
    ``rar`` (Gunjal et al. 2025, Rubrics as Rewards, explicit aggregation): weighted mean of satisfied
    criteria with weights |points|, a pitfall being satisfied when it is *not* met; already in [0, 1].

    Args:
        points: shape (J,), signed points.
        met: shape (..., J), bool verdicts.
        rule: ``healthbench`` or ``rar``.
    Returns:
        (clipped, unclipped), each of shape met.shape[:-1].

    >>> rubric_score(np.array([2.0, 1.0, -1.0]), np.array([True, False, True]))
    (array(0.33333333), array(0.33333333))
    """
    met = np.asarray(met, dtype=float)
    if rule == "healthbench":
        raw = met @ points / points[points > 0].sum()
        return np.clip(raw, 0.0, 1.0), raw
    if rule == "rar":
        satisfied = np.where(points > 0, met, 1.0 - met)
        raw = satisfied @ np.abs(points) / np.abs(points).sum()
        return raw, raw
    raise UnknownNameError("score rule", rule, SCORE_RULES)
