"""LLM judges (DESIGN §4): one yes/no question per criterion to a language model, so the randomness of
the verdicts is the model's own.

Two backends behind one grader:
* ``TransformersJudge`` (``setgrpo_bench.judges``, above the policy layer) — a local causal LM (any
  transformers folder, or the embedded ``tiny`` for plumbing). The verdict is sampled from the model's own two-way distribution over the answer
  tokens " yes"/" no" at temperature T: p_T(yes) = p_yes^{1/T} / (p_yes^{1/T} + p_no^{1/T}).
* ``EndpointJudge`` (``endpoint.py``) — an OpenAI-compatible server (vLLM, TGI, a hosted API). The
  server samples an answer text, which is parsed (HealthBench's ``{"criteria_met": true}`` or a
  leading yes/no); unparseable answers are retried, then the grade is invalid, never 0.

When a criterion has a programmatic check the true score is the check's; otherwise it is estimated
from M extra judge calls (majority per criterion) and every report labels it an estimate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import ConfigError, SpecError, UnknownNameError
from ..tasks.model import TaskInstance
from ..tasks.scoring import SCORE_RULES, rubric_score
from ..tasks.yamlio import line_of, load_yaml
from .grade import Grade
from .profile_files import profile_files

_JSON_VERDICT = re.compile(r'"criteria_met"\s*:\s*(true|false)', re.IGNORECASE)
_WORD_VERDICT = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


@dataclass(frozen=True)
class JudgeProfile:
    """How to ask a judge model (``graders/judge-*.yaml``, ``kind: judge``)."""

    name: str
    template: str  # the question, with {prompt}, {response}, {criterion}
    system: str = ""
    temperature: float = 1.0
    max_retries: int = 2
    truth_repeats: int = 5  # M: judge calls per criterion that estimate the true score without a check
    max_tokens: int = 32  # answer length for endpoint judges
    concurrency: int = 8
    timeout_s: float = 60.0
    backoff_s: float = 0.5
    description: str = ""

    def __post_init__(self) -> None:
        for key in ("{prompt}", "{response}", "{criterion}"):
            if key not in self.template:
                raise SpecError(f"the template must contain {key}", field="template")
        if not self.temperature > 0:
            raise SpecError(f"expected a temperature > 0, got {self.temperature!r}", field="temperature")
        for name in ("max_retries", "truth_repeats", "max_tokens", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "max_retries" else 1):
                raise SpecError(f"expected a positive integer, got {value!r}", field=name)

    def question(self, task: TaskInstance, response: str, criterion: str) -> str:
        return self.template.format(prompt=task.prompt_text, response=response, criterion=criterion)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_verdict(text: str | None) -> bool | None:
    """``{"criteria_met": true}`` anywhere, or an answer starting with yes/no; None if neither."""
    if text is None:
        return None
    found = _JSON_VERDICT.search(text)
    if found:
        return found.group(1).lower() == "true"
    found = _WORD_VERDICT.search(text.strip())
    return None if found is None else found.group(1).lower() == "yes"


def judge_profile_names() -> list[str]:
    return sorted(_judge_paths())


def _judge_paths() -> dict[str, Path]:
    return profile_files({"judge"})


def load_judge_profile(name_or_path: str | Path) -> JudgeProfile:
    """A judge profile by catalog name (e.g. ``judge-default``) or YAML path."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        paths = _judge_paths()
        if str(name_or_path) not in paths:
            raise UnknownNameError("judge profile", str(name_or_path), paths)
        path = paths[str(name_or_path)]
    data, lines = load_yaml(path)
    if not isinstance(data, Mapping):
        raise SpecError("expected a mapping at the top level", file=str(path), line=1)
    allowed = {f.name for f in fields(JudgeProfile)} | {"kind"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise SpecError(f"unknown field(s) {unknown}; allowed: {sorted(allowed)}", file=str(path),
                        line=line_of(lines, unknown[0]), field=unknown[0])
    try:
        return JudgeProfile(**{k: v for k, v in data.items() if k != "kind"})
    except SpecError as exc:
        raise exc.located(file=str(path), line=line_of(lines, exc.field)) from None
    except TypeError as exc:
        raise SpecError(f"bad judge profile: {exc}", file=str(path)) from None


class JudgeBackend(Protocol):
    """Answers a batch of questions: per question, P(yes) (local models) or an answer text (endpoints)."""

    def identity(self) -> dict[str, Any]: ...


def tempered(p_yes: np.ndarray, temperature: float) -> np.ndarray:
    """The two-way distribution at temperature T: p^{1/T} / (p^{1/T} + (1 − p)^{1/T})."""
    p = np.clip(np.asarray(p_yes, float), 1e-12, 1 - 1e-12)
    logit = (np.log(p) - np.log1p(-p)) / temperature
    return 1.0 / (1.0 + np.exp(-logit))


class LLMJudgeGrader:
    """Grades every criterion of a group with an LLM judge (batched over responses × criteria)."""

    def __init__(self, backend: Any, profile: JudgeProfile, score_rule: str = "healthbench") -> None:
        if score_rule not in SCORE_RULES:
            raise ConfigError("score_rule", score_rule, f"one of {list(SCORE_RULES)}")
        self.backend, self.profile, self.score_rule = backend, profile, score_rule
        self.cost_per_call = 1.0  # the training judge is the unit of cost
        self.name = f"{profile.name}@{backend.identity().get('policy') or backend.identity().get('model')}"

    def stated_rates(self, task: TaskInstance) -> None:
        """An LLM judge states no error rates."""
        return None

    def fingerprint(self) -> dict[str, Any]:
        return {"kind": "judge", **self.profile.to_dict(), "backend": self.backend.identity()}

    def grade(self, task: TaskInstance, response: str, rng: np.random.Generator) -> Grade:
        return self.grade_group(task, [response], rng)[0]

    def _verdicts(self, task: TaskInstance, responses: Sequence[str], rng: np.random.Generator, repeats: int = 1
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str | None], np.ndarray]:
        """(verdicts (R, G, J), NaN where unparseable; P(yes) estimates (G, J); valid (G,); raw answers
        per response; judge calls per response (G,))."""
        questions = [self.profile.question(task, r, c.text) for r in responses for c in task.rubric]
        G, J = len(responses), len(task.rubric)
        if hasattr(self.backend, "yes_probabilities"):
            p = tempered(self.backend.yes_probabilities(questions, self.profile.system), self.profile.temperature)
            draws = (rng.random((repeats, G * J)) < p).astype(float).reshape(repeats, G, J)
            return draws, p.reshape(G, J), np.ones(G, bool), [None] * G, np.full(G, repeats * J)
        verdicts = np.full((repeats, G * J), np.nan)
        raw: list[str | None] = [None] * (G * J)
        calls = np.zeros(G * J, dtype=int)
        for r in range(repeats):
            pending = list(range(G * J))
            for attempt in range(self.profile.max_retries + 1):
                if not pending:
                    break
                texts = self.backend.answers([questions[i] for i in pending], self.profile,
                                             seeds=[int(rng.integers(2**31)) for _ in pending], attempt=attempt + 10 * r)
                calls[pending] += 1
                still = []
                for i, text in zip(pending, texts):
                    verdict = parse_verdict(text)
                    raw[i] = text
                    if verdict is None:
                        still.append(i)
                    else:
                        verdicts[r, i] = float(verdict)
                pending = still
        verdicts = verdicts.reshape(repeats, G, J)
        valid = ~np.isnan(verdicts[0]).any(axis=1)
        with np.errstate(invalid="ignore"):
            p = np.nanmean(verdicts, axis=0) if repeats > 1 else verdicts[0]
        texts_by_response = [json.dumps(raw[g * J : (g + 1) * J]) for g in range(G)]
        return verdicts, np.nan_to_num(p, nan=0.5), valid, texts_by_response, calls.reshape(G, J).sum(axis=1)

    def grade_group(self, task: TaskInstance, responses: Sequence[str], rng: np.random.Generator) -> list[Grade]:
        verdicts, p, valid, raw, calls = self._verdicts(task, responses, rng)
        observed = np.nan_to_num(verdicts[0], nan=0.0).astype(bool)
        score, raw_score = rubric_score(task.points, observed, self.score_rule)
        if task.gradable:
            true = np.stack([task.true_verdicts(r) for r in responses])
            estimate = False
        else:  # no check: M fresh judge calls, majority per criterion, labelled as an estimate
            extra, _, _, _, more = self._verdicts(task, responses, rng, repeats=self.profile.truth_repeats)
            true = np.nanmean(extra, axis=0) > 0.5
            calls += more
            estimate = True
        true_score, true_raw = rubric_score(task.points, true, self.score_rule)
        weights = task.points / task.points[task.points > 0].sum()
        spread = np.sqrt((weights**2 * p * (1 - p)).sum(axis=1))
        return [
            Grade(score=float(score[i]) if valid[i] else float("nan"),
                  raw_score=float(raw_score[i]) if valid[i] else float("nan"),
                  verdicts=observed[i], true_score=float(true_score[i]), true_raw_score=float(true_raw[i]),
                  true_verdicts=true[i], valid=bool(valid[i]), judge_calls=int(calls[i]), spread=float(spread[i]),
                  true_score_is_estimate=estimate, raw=raw[i])
            for i in range(len(responses))
        ]
