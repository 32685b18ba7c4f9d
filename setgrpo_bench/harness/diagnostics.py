"""SetGRPO's promises measured against the *true* rubric score (DESIGN §9), for reports only.

These functions read true scores, so they run after the agent has decided and never feed back
into an update. With a* replaced by a_true = grpo(true scores):
  coverage_true  = share of non-constant groups with a_true ∈ C
  reversal_true  = share of accepted groups with c_gᵀK_g a_true < 0 (realised conditional risk)
  retained_alignment = Σ_accepted c_gᵀK_g a_true / Σ_all âᵀK_g a_true (share of GRPO's true-aligned
                       first-order progress that the executed updates keep)
with the integer counts behind the rates, so that a run's rates are pooled over its groups.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..agents import setgrpo as sm
from ..agents.base import GroupRecord
from ..agents.coefficients import group_coefficients


def true_coefficients(record: GroupRecord, true_scores: np.ndarray, *, std_floor: float) -> np.ndarray:
    """a_true of a group: GRPO coefficients of its true scores over the same valid responses."""
    return group_coefficients("grpo", true_scores[record.index][record.valid], std_floor=std_floor)


def true_score_diagnostics(records: Sequence[GroupRecord], true_scores: np.ndarray, *, std_floor: float) -> dict[str, float]:
    """Coverage, realised reversal rate and retained alignment w.r.t. the true score (empty for
    agents that build no set)."""
    if not records:
        return {}
    covered, reversed_, kept, full = [], [], 0.0, 0.0
    for r in records:
        a_true = true_coefficients(r, true_scores, std_floor=std_floor)
        covered.append(sm.in_set(a_true, r.a_hat, r.rho))
        full += float(r.a_hat @ r.gram @ a_true)
        if r.accepted:
            reversed_.append(sm.reversal(r.executed, r.gram, a_true))
            kept += float(r.executed @ r.gram @ a_true)
    return {
        "coverage_true": float(np.mean(covered)),
        "reversal_true": float(np.mean(reversed_)) if reversed_ else math.nan,
        "retained_alignment": kept / full if full > 0 else math.nan,
        "n_covered_true": int(sum(covered)), "n_reversed_true": int(sum(reversed_)),
        "alignment_executed_true": kept, "alignment_grpo_true": full,
    }
