"""Graders: (task, responses, rng) → grades with per-criterion verdicts (DESIGN §4)."""

from .grade import Grade
from .judge_profiles import (
    JudgeProfile,
    judge_profile,
    judge_profile_names,
    make_grader,
)
from .noise import NoiseProfile, load_profile, profile_names
from .reference import ConsensusReference, make_reference, parse_reference
from .rubric_grader import RubricGrader

__all__ = [
    "ConsensusReference", "Grade", "JudgeProfile", "NoiseProfile", "RubricGrader", "judge_profile", "judge_profile_names",
    "load_profile", "make_grader",
    "make_reference", "parse_reference", "profile_names",
]
