"""Graders: (task, responses, rng) → grades with per-criterion verdicts (DESIGN §4)."""

from .grade import Grade
from .noise import NoiseProfile, load_profile, profile_names
from .reference import ConsensusReference, make_reference, parse_reference
from .rubric_grader import RubricGrader, make_grader

__all__ = [
    "ConsensusReference", "Grade", "NoiseProfile", "RubricGrader", "load_profile", "make_grader",
    "make_reference", "parse_reference", "profile_names",
]
