"""Judge budgets: what a baseline may spend to match another agent's judge cost over the same run."""

from __future__ import annotations

import math

from ..graders.judge_profiles import judge_profile
from ..graders.reference import parse_reference, reference_calls
from .config import TrainConfig


def _reference_cost(setgrpo: TrainConfig) -> float:
    """K_ref: training-judge calls one reference grading of a response costs (the consensus size K, or
    the reference profile's ``cost`` times its calls)."""
    kind, arg = parse_reference(setgrpo.setgrpo.reference)
    if kind == "consensus":
        return int(arg)
    name, calls = reference_calls(setgrpo.setgrpo.reference)
    return judge_profile(name).cost * calls


def budget_matched_reference_groups(setgrpo: TrainConfig) -> int:
    """Groups a step that ``grpo_reference`` may have graded by the reference for SetGRPO's judge cost
    per step: (B + warm-up·(1 + K_ref)/steps + ⌈f·B⌉·K_ref) / K_ref, rounded down (the calls per group
    cancel: both grade groups of the same size from the same suite)."""
    s, run = setgrpo.setgrpo, setgrpo.run
    k_ref = _reference_cost(setgrpo)
    per_step = run.groups_per_step + s.warmup_groups * (1 + k_ref) / run.steps + math.ceil(s.audit_fraction * run.groups_per_step) * k_ref
    return max(1, math.floor(per_step / k_ref))


def budget_matched_repeats(setgrpo: TrainConfig) -> float:
    """K for GRPO-Kavg so that its judge cost matches SetGRPO's over the same run: SetGRPO grades
    steps·B groups for training, the warm-up batch once plus its audit, and ⌈f·B⌉ audited groups
    per step; an audit costs K_ref training-judge calls per call (the consensus size K, or the
    reference profile's ``cost``). Constant groups are not audited, so the measured ratio is lower."""
    s, run = setgrpo.setgrpo, setgrpo.run
    k_ref = _reference_cost(setgrpo)
    training = run.steps * run.groups_per_step
    audits = s.warmup_groups * (1 + k_ref) + run.steps * math.ceil(s.audit_fraction * run.groups_per_step) * k_ref
    return (training + audits) / training
