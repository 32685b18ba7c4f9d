"""One home for the judge a profile name selects (DESIGN §4): a simulated judge (a noise profile,
``graders/*.yaml``) or a model-backed one (``kind: learned``). ``judge_profile(name)`` resolves a name
once into what every user of a judge needs — whether a model backs it, what a call costs, what defines
its scores (for suite hashes) and its grader — so that the envs, the references, the judge budgets, the
suite hash and the ``judges`` commands never branch on the kind themselves.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UnknownNameError
from .kinds import GRADER_KINDS, model_profiles
from .noise import NoiseProfile, load_profile, profile_names
from .rubric_grader import RubricGrader


@dataclass(frozen=True)
class JudgeProfile:
    """A judge profile resolved: its name, whether a model backs it, its cost per call (in calls of the
    default training judge) and what it was read from."""

    name: str
    model_backed: bool
    cost: float
    source: Mapping[str, Any] | NoiseProfile = field(repr=False, compare=False)

    def fingerprint(self) -> dict[str, Any]:
        """What defines the judge's scores, for suite hashes: a noise profile's fields (its price
        aside), or a model-backed profile's fields and the key of the model's build."""
        if not self.model_backed:
            return self.source.fingerprint()
        return {**self.source, "build": _resolve(self.source["kind"], "build_key")(self.source)}

    @property
    def bias(self) -> Mapping[str, Any]:
        """The judge's injected bias (``graders/bias.py``); empty when it has none (always, model-backed)."""
        return {} if self.model_backed else self.source.bias

    def grader(self, score_rule: str = "healthbench") -> Any:
        """The judge's grader (a model-backed one loads its model: only then is its module imported)."""
        if not self.model_backed:
            return RubricGrader(self.source, score_rule=score_rule)
        grader = _resolve(self.source["kind"], "grader")
        return grader(score_rule=score_rule, temperature=float(self.source.get("temperature", 1.0)),
                      cost=self.cost, name=self.name, build=self.source.get("build") or {})


def judge_profile(name: str | Path | NoiseProfile) -> JudgeProfile:
    """The judge profile ``name`` (a catalog name of either kind, or a noise profile's path or object);
    an unknown name lists every known one of both kinds."""
    if isinstance(name, str) and name in model_profiles():
        fields = model_profiles()[name]
        return JudgeProfile(name, True, float(fields.get("cost", 1.0)), fields)
    try:
        profile = load_profile(name)
    except UnknownNameError:
        raise UnknownNameError("judge profile", str(name), judge_profile_names()) from None
    return JudgeProfile(profile.name, False, float(profile.cost), profile)


def judge_profile_names() -> list[str]:
    """Every judge profile of the catalog search path, simulated and model-backed."""
    return sorted({*profile_names(), *model_profiles()})


def _resolve(kind: str, part: str) -> Any:
    """A model-backed kind's ``part`` (its grader class, or its build key), named ``module:attribute``
    and imported only when used, as Gymnasium resolves an env's entry point: this layer imports no
    model code."""
    module, _, attribute = GRADER_KINDS[kind][part].partition(":")
    return getattr(importlib.import_module(module), attribute)


def make_grader(grader: Any = "realistic", score_rule: str = "healthbench") -> Any:
    """A grader from a profile name (a noise profile, or a model-backed one such as ``learned``), a
    noise-profile path or profile; any other grader object (a ``RubricGrader``, an ``LLMJudgeGrader``)
    is returned as it is."""
    if isinstance(grader, (str, Path, NoiseProfile)):
        return judge_profile(grader).grader(score_rule)
    return grader
