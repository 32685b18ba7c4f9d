"""SetGRPO (DESIGN §8) as the abstract states it: three modules, each a file of small pure functions
(arrays in, arrays out; no model, no env), the calibration that joins them, and the agent.

    joint_set.py       (a) joint reward set calibration: a conformal box around â that holds a*
    recovery.py        (b) geometry-guided safe recovery: the largest safe step λ* from the anchor
    risk_gate.py       (c) selective risk-gated optimisation: the threshold τ̂ on the score λ*
      ltt.py               Learn-then-Test's hypotheses and binomial p-values
      fixed_sequence.py    family-wise error control over them (fixed sequence, Bonferroni)
    window.py          the calibration window's records
    calibration.py     (α_a, q, τ̂) from the window's folds D1 and D2
    agent.py           ``SetGRPOAgent``: needs, decide, update

Notation for one group of G responses: observed coefficients â = grpo(r̃), reference coefficients a*
(calibration groups only), per-response scales σ > 0, Gram matrix K = ΦᵀΦ of per-response gradients,
radii ρ = q·σ.
"""

from .agent import SetGRPOAgent
from .calibration import (
    Calibration,
    calibrate,
    calibrate_set_and_threshold,
    quantile,
    threshold,
)
from .fixed_sequence import bonferroni, fixed_sequence
from .joint_set import (
    conformal_quantile,
    conformal_rank,
    conformal_score,
    in_set,
    pac_rank,
    response_scales,
)
from .ltt import binomial_p_value, min_testable_count
from .recovery import (
    UNCERTIFIABLE,
    GroupDecider,
    GroupDecision,
    anchor,
    certified_radius_ratio,
    decide_group,
    executed,
    is_certifiable,
    safe_recovery_ratio,
    weighted_median,
    worst_case_alignment,
)
from .risk_gate import (
    acceptance_levels,
    calibrate_threshold,
    counts,
    first_testable,
    gate_trial,
    ltt_threshold,
    reversal,
    select_certified,
    threshold_grid,
)
from .window import AuditedGroup, RememberedDecisions

__all__ = [
    "UNCERTIFIABLE", "AuditedGroup", "Calibration", "GroupDecider", "GroupDecision", "RememberedDecisions",
    "SetGRPOAgent", "acceptance_levels", "anchor", "binomial_p_value", "bonferroni", "calibrate",
    "calibrate_set_and_threshold", "calibrate_threshold", "certified_radius_ratio", "conformal_quantile",
    "conformal_rank", "conformal_score", "counts", "decide_group", "executed", "first_testable", "fixed_sequence",
    "gate_trial", "in_set", "is_certifiable", "ltt_threshold", "min_testable_count", "pac_rank", "quantile",
    "response_scales", "reversal", "safe_recovery_ratio", "select_certified", "threshold", "threshold_grid",
    "weighted_median", "worst_case_alignment",
]
