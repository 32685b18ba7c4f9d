"""Judge budgets: what a baseline may spend to match another agent's judge cost over the same run."""

from __future__ import annotations

import math

from ..graders.judge_profiles import judge_profile
from ..graders.reference import parse_reference, reference_calls
from .config import TrainConfig


def budget_matched_repeats(setgrpo: TrainConfig) -> float:
    """K for GRPO-Kavg so that its judge cost matches SetGRPO's over the same run: SetGRPO grades
    steps·B groups for training, the warm-up batch once plus its audit, and ⌈f·B⌉ audited groups
    per step; an audit costs K_ref training-judge calls per call (the consensus size K, or the
    reference profile's ``cost``). Constant groups are not audited, so the measured ratio is lower."""
    s, run = setgrpo.setgrpo, setgrpo.run
    kind, arg = parse_reference(s.reference)
    if kind == "consensus":
        k_ref = int(arg)
    else:
        name, calls = reference_calls(s.reference)
        k_ref = judge_profile(name).cost * calls
    training = run.steps * run.groups_per_step
    audits = s.warmup_groups * (1 + k_ref) + run.steps * math.ceil(s.audit_fraction * run.groups_per_step) * k_ref
    return (training + audits) / training
