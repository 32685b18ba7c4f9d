"""Procedural benchmarks (DESIGN §3): variables sampled per instance from a seed, then templates rendered."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, SpecError
from ..hashing import stable_hash
from .benchmark import SPLITS, Benchmark, split_of_prompt
from .expressions import Record, evaluate
from .model import Criterion, TaskInstance
from .spec_checks import procedural_problems
from .yamlio import line_of

_SINGLE_FIELD = re.compile(r"\{([^{}:!]+)\}")


@dataclass(frozen=True)
class _Names:
    values: dict[str, Any]
    attempt: int


def render(template: str, names: Mapping[str, Any]) -> str:
    """Fill ``{name}``, ``{record.field}``, ``{items[0]}`` placeholders; unknown names are spec errors."""
    try:
        return string.Formatter().vformat(template, (), names)
    except (KeyError, AttributeError, IndexError) as exc:
        raise SpecError(f"template {template!r} refers to an undefined variable: {exc}") from None
    except ValueError as exc:
        raise SpecError(f"bad template {template!r}: {exc}") from None


def _render_deep(value: Any, names: Mapping[str, Any]) -> Any:
    """Render every string inside ``value``; a string that is one placeholder of a list variable
    (``terms: "{comparison.kw}"``) becomes that list."""
    if isinstance(value, str):
        whole = _SINGLE_FIELD.fullmatch(value)
        if whole:
            try:
                obj, _ = string.Formatter().get_field(whole.group(1), (), names)
            except (KeyError, AttributeError, IndexError) as exc:
                raise SpecError(f"template {value!r} refers to an undefined variable: {exc}") from None
            if isinstance(obj, list):
                return [str(v) for v in obj]
        return render(value, names)
    if isinstance(value, list):
        return [_render_deep(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _render_deep(v, names) for k, v in value.items()}
    return value


def _as_record(entry: Any) -> Any:
    return Record(entry) if isinstance(entry, dict) else entry


class ProceduralBenchmark(Benchmark):
    """Instances generated from a spec: variables sampled per instance, then templates rendered.

    Instance ``(split, index)`` is drawn from ``SeedSequence([benchmark key, split, index, attempt])``;
    attempts continue until the rendered prompt hashes into ``split`` (see ``split_of_prompt``).
    """

    def __init__(self, spec: Mapping[str, Any], source: str | None = None, lines: Mapping[str, int] | None = None):
        self.spec, self.source, self._lines = dict(spec), source, dict(lines or {})
        for problem in procedural_problems(self.spec):
            raise problem.located(file=source, line=line_of(self._lines, problem.field))
        self.name, self.domain = spec["name"], spec["domain"]
        self.description = spec.get("description", "")
        self.default_grader = spec.get("grader", "realistic")
        self.score_rule = spec.get("score_rule", "healthbench")
        self._sizes = {s: int(spec["sizes"][s]) for s in SPLITS}
        self._key = int(stable_hash([self.name, spec.get("version", 1)])[:8], 16)

    def size(self, split: str) -> int:
        if split not in SPLITS:
            raise ConfigError("split", split, f"one of {list(SPLITS)}")
        return self._sizes[split]

    def content_hash(self) -> str:
        return stable_hash(self.spec)

    def _error(self, exc: SpecError, field: str) -> SpecError:
        field = field + (f".{exc.field}" if exc.field else "")
        return SpecError(exc.reason, file=self.source, line=line_of(self._lines, field), field=field)

    def _sample(self, rng: np.random.Generator) -> dict[str, Any]:
        pools = self.spec.get("pools", {})
        names: dict[str, Any] = {}
        for name, var in self.spec["variables"].items():
            try:
                if "pool" in var:
                    names[name] = _as_record(pools[var["pool"]][rng.integers(len(pools[var["pool"]]))])
                elif "sample" in var:
                    pool = pools[var["sample"]]
                    picked = rng.choice(len(pool), size=int(var["k"]), replace=False)
                    names[name] = [_as_record(pool[i]) for i in picked]
                elif "choice" in var:
                    names[name] = _as_record(var["choice"][rng.integers(len(var["choice"]))])
                elif "range" in var:
                    lo, hi = var["range"]
                    step = var.get("step", 1)
                    names[name] = int(lo + step * rng.integers((hi - lo) // step + 1))
                else:
                    names[name] = evaluate(var["expr"], names)
            except SpecError as exc:
                raise self._error(exc, f"variables.{name}") from None
        return names

    def names(self, split: str, index: int) -> _Names:
        """The variables of instance ``(split, index)`` and the attempt that produced them."""
        self._check_index(split, index)
        for attempt in range(10_000):
            seed = np.random.SeedSequence([self._key, SPLITS.index(split), int(index), attempt])
            names = self._sample(np.random.default_rng(seed))
            if split_of_prompt(self.name, self._prompt(names)) == split:
                return _Names(names, attempt)
        raise SpecError(
            f"no prompt of split {split!r} in 10000 draws: the variables give too few distinct prompts",
            file=self.source, line=line_of(self._lines, "variables"), field="variables",
        )

    def _prompt(self, names: Mapping[str, Any]) -> str:
        try:
            return render(self.spec["prompt"], names)
        except SpecError as exc:
            raise self._error(exc, "prompt") from None

    def _criterion(self, i: int, raw: Mapping[str, Any], names: Mapping[str, Any]) -> Criterion | None:
        try:
            if "when" in raw and not evaluate(raw["when"], names):
                return None
            return Criterion.from_dict(_render_deep({k: v for k, v in raw.items() if k != "when"}, names))
        except SpecError as exc:
            raise self._error(exc, f"criteria[{i}]") from None

    def instance(self, split: str, index: int) -> TaskInstance:
        drawn = self.names(split, index)
        rubric = tuple(
            c for i, raw in enumerate(self.spec["criteria"]) if (c := self._criterion(i, raw, drawn.values)) is not None
        )
        metadata = {
            "domain": self.domain, "benchmark": self.name, "split": split, "index": int(index),
            "seed": [self._key, SPLITS.index(split), int(index), drawn.attempt],
        }
        task_id = f"{self.name}/{split}/{index}"
        try:
            return TaskInstance(id=task_id, prompt=self._prompt(drawn.values), rubric=rubric, metadata=metadata)
        except SpecError as exc:
            raise self._error(exc, "criteria") from None

    def examples(self, task: TaskInstance, rng: np.random.Generator, n: int, min_quality: float = 0.0,
                 max_quality: float = 1.0) -> list[str]:
        """``n`` example responses whose quality is drawn uniformly from [min_quality, max_quality]
        (0 poor, 1 excellent)."""
        spec = self.spec.get("examples")
        if not spec:
            return []
        names = self.names(task.metadata["split"], task.metadata["index"]).values
        try:
            return [_example(spec, names, rng, float(rng.uniform(min_quality, max_quality))) for _ in range(n)]
        except SpecError as exc:
            raise self._error(exc, "examples") from None


def _pick(rng: np.random.Generator, templates: Sequence[str], names: Mapping[str, Any]) -> str:
    return render(templates[rng.integers(len(templates))], names)


def _example(spec: Mapping[str, Any], names: Mapping[str, Any], rng: np.random.Generator, quality: float) -> str:
    """One example response at ``quality`` ∈ [0, 1]: good blocks kept with probability rising with
    quality; flawed variants, pitfall sentences, filler, shuffling and degenerate forms (keyword
    list, repetition, truncation) more likely at low quality."""
    parts = []
    for block in spec["blocks"]:
        if "when" in block and not evaluate(block["when"], names):
            continue
        u = rng.random()
        if u < 0.1 + 0.9 * quality:
            parts.append(_pick(rng, block["good"], names))
        elif block.get("bad") and u < 0.1 + 0.9 * quality + 0.6 * (1 - quality):
            parts.append(_pick(rng, block["bad"], names))
    if spec.get("pitfalls") and rng.random() < 0.7 * (1 - quality):
        parts.insert(int(rng.integers(len(parts) + 1)), _pick(rng, spec["pitfalls"], names))
    if spec.get("filler") and rng.random() < 0.5 * (1 - quality):
        for _ in range(int(rng.integers(1, 3))):
            parts.insert(int(rng.integers(len(parts) + 1)), _pick(rng, spec["filler"], names))
    if len(parts) > 1 and rng.random() < 0.4 * (1 - quality):
        parts = [parts[i] for i in rng.permutation(len(parts))]
    text = spec.get("joiner", " ").join(parts)
    if text and rng.random() < 0.3 * (1 - quality):
        words = text.split()
        kind = rng.integers(3)
        if kind == 0:  # keyword string without sentences
            keep = sorted(rng.choice(len(words), size=max(1, len(words) // 3), replace=False))
            text = " ".join(words[i].strip(".,!?:;").lower() for i in keep)
        elif kind == 1:  # repetition
            text = " ".join(words + words[: max(3, len(words) // 2)])
        else:  # truncation
            text = " ".join(words[: max(1, int(len(words) * rng.uniform(0.3, 0.8)))]).rstrip(".!?")
    return text

