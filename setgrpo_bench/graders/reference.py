"""Reference graders for calibration (DESIGN §4): what a practitioner can afford to audit with."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..tasks.model import TaskInstance
from ..tasks.scoring import rubric_score
from .bias import biased, has_feature
from .grade import Grade
from .judge_profiles import judge_profile, make_grader
from .rubric_grader import RubricGrader, injected_bias


class ConsensusReference:
    """K fresh calls of the same judge, majority vote per criterion (a tie counts as not met).

    The training draw is never among the K: these are new calls. Persistent judge errors survive the
    vote, as they would with a real judge.
    """

    def __init__(self, grader: RubricGrader, k: int = 5) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError("k", k, "an integer >= 1", "Use e.g. 'consensus:5'.")
        self.grader, self.k = grader, k
        self.name = f"consensus:{k}"
        self.cost_per_call = grader.cost_per_call  # calls of the training judge itself

    def grade_group(self, task: TaskInstance, responses: Sequence[str], rng: np.random.Generator) -> list[Grade]:
        bias = injected_bias(self.grader)

        def vote(text: str, ok: list[Grade]) -> Grade:
            votes = np.mean([g.verdicts for g in ok], axis=0) > 0.5
            score, raw = rubric_score(task.points, votes, self.grader.score_rule)
            if bias:  # the judge's injected bias survives the vote: it is the same on every call
                score = biased(score, has_feature(bias, text), bias["strength"])
            return Grade(score=float(score), raw_score=float(raw), verdicts=votes, true_score=ok[0].true_score,
                         true_raw_score=ok[0].true_raw_score, true_verdicts=ok[0].true_verdicts, valid=True,
                         judge_calls=0, spread=float(np.mean([g.spread for g in ok]) / np.sqrt(len(ok))))

        return _combined(self.grader, task, responses, rng, self.k, vote)


class AveragedReference:
    """N calls of another judge per response, scores averaged over the valid ones (``profile:NAME*N``):
    its own errors shrink with N, its persistent ones do not; every call is paid for."""

    def __init__(self, grader: Any, n: int) -> None:
        self.grader, self.n = grader, n
        self.name = f"{grader.name}*{n}"
        self.cost_per_call = grader.cost_per_call

    def grade_group(self, task: TaskInstance, responses: Sequence[str], rng: np.random.Generator) -> list[Grade]:
        def average(text: str, ok: list[Grade]) -> Grade:
            return replace(ok[0], score=float(np.mean([g.score for g in ok])), raw_score=float(np.mean([g.raw_score for g in ok])),
                           verdicts=np.mean([g.verdicts for g in ok], axis=0) > 0.5,
                           spread=float(np.mean([g.spread for g in ok]) / np.sqrt(len(ok))), confidence=None)

        return _combined(self.grader, task, responses, rng, self.n, average)


class SharedBiasReference:
    """Another judge whose errors share a fraction ``share`` of the training judge's injected bias
    (``shared:F:NAME``): its score is ``(s + F·α·b) / (1 + F·α)`` for its own score ``s``, the training
    judge's strength ``α`` and feature ``b``, so that an audit is blind to the bias in that proportion, as
    a stronger judge of the same family is."""

    def __init__(self, grader: Any, bias: Mapping[str, Any], share: float) -> None:
        self.grader, self.bias, self.share = grader, bias, share
        self.name = f"shared:{share:g}:{grader.name}"
        self.cost_per_call = grader.cost_per_call

    def grade_group(self, task: TaskInstance, responses: Sequence[str], rng: np.random.Generator) -> list[Grade]:
        strength = self.share * self.bias["strength"]
        out = []
        for text, grade in zip(responses, self.grader.grade_group(task, responses, rng)):
            out.append(replace(grade, score=float(biased(grade.score, has_feature(self.bias, text), strength)),
                               spread=grade.spread / (1.0 + strength), confidence=None) if grade.valid else grade)
        return out


def _combined(grader: Any, task: TaskInstance, responses: Sequence[str], rng: np.random.Generator, calls: int,
              combine: Callable[[str, list[Grade]], Grade]) -> list[Grade]:
    """``calls`` gradings of every response, ``combine``d over its valid ones (invalid when none is),
    each grade charged all the calls made for its response."""
    rounds = [grader.grade_group(task, responses, rng) for _ in range(calls)]
    out = []
    for i, text in enumerate(responses):
        draws = [r[i] for r in rounds]
        ok = [g for g in draws if g.valid]
        spent = sum(g.judge_calls for g in draws)
        out.append(replace(combine(text, ok) if ok else draws[0], judge_calls=spent))
    return out


def parse_reference(spec: str) -> tuple[str, str]:
    """Validate ``consensus:K`` (K ≥ 1), ``profile:NAME`` or ``profile:NAME*N`` (a profile of the catalog,
    averaged over N ≥ 1 calls) or ``shared:F:NAME`` (a profile sharing a fraction F ∈ [0, 1] of the training
    judge's injected bias) → (kind, arg)."""
    kind, _, arg = str(spec).partition(":")
    if kind == "shared":
        share, _, name = arg.partition(":")
        try:
            ok = 0.0 <= float(share) <= 1.0 and bool(name)
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError("reference", spec, "'shared:F:NAME' with a share F in [0, 1] and a judge profile NAME")
        judge_profile(name)
        return kind, arg
    if kind == "consensus":
        if not (arg or "5").isdigit() or int(arg or 5) < 1:
            raise ConfigError("reference", spec, "'consensus:K' with an integer K >= 1")
        return kind, arg or "5"
    if kind == "profile" and arg:
        name, _, repeats = arg.partition("*")
        if "*" in arg and (not repeats.isdigit() or int(repeats) < 1):
            raise ConfigError("reference", spec, "'profile:NAME*N' with an integer N >= 1")
        judge_profile(name)  # either kind of judge, or a located error naming every known one
        return kind, arg
    raise ConfigError("reference", spec, "'consensus:K', 'profile:NAME' or 'profile:NAME*N'")


def reference_calls(spec: str) -> tuple[str, int]:
    """(profile name, calls per audited response) of a ``profile:`` or ``shared:`` reference."""
    kind, arg = parse_reference(spec)
    if kind == "shared":
        return arg.partition(":")[2], 1
    name, _, repeats = arg.partition("*")
    return name, int(repeats or 1)


def make_reference(spec: str, grader: RubricGrader) -> Any:
    """``consensus:K`` (K-repeat consensus of ``grader``), ``profile:NAME`` (another, less noisy judge),
    ``profile:NAME*N`` (that judge's score averaged over N calls) or ``shared:F:NAME`` (that judge sharing a
    fraction F of ``grader``'s injected bias)."""
    kind, arg = parse_reference(spec)
    if kind == "consensus":
        return ConsensusReference(grader, int(arg))
    if kind == "shared":
        bias = injected_bias(grader)
        if not bias:
            raise ConfigError("reference", spec, "a training judge with an injected bias to share (its profile's "
                              f"'bias'); judge {grader.name!r} has none")
        share, _, name = arg.partition(":")
        return SharedBiasReference(make_grader(name, score_rule=grader.score_rule), bias, float(share))
    name, repeats = reference_calls(spec)
    other = make_grader(name, score_rule=grader.score_rule)
    return AveragedReference(other, repeats) if repeats > 1 else other
