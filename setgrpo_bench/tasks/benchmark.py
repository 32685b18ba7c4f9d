"""Benchmarks: a named source of task instances with disjoint ``train``/``calib``/``eval`` splits.

Two kinds (DESIGN §3): a *procedural* generator described by a YAML spec (templates, entity pools,
criterion templates), where any index is reproducible alone from its seed, and a *file* benchmark
reading fixed JSONL (native format or HealthBench's ``{prompt, rubrics}``).
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, SpecError
from .expressions import Record, evaluate
from .model import CATEGORIES, Criterion, TaskInstance
from .scoring import SCORE_RULES
from .yamlio import line_of, load_yaml, read_jsonl

SPLITS = ("train", "calib", "eval")
_SPLIT_BUCKETS = {"train": range(0, 12), "calib": range(12, 16), "eval": range(16, 20)}
_SINGLE_FIELD = re.compile(r"\{([^{}:!]+)\}")
_SPEC_KEYS = {"name", "domain", "kind", "description", "version", "grader", "score_rule"}
_PROCEDURAL_KEYS = _SPEC_KEYS | {"sizes", "pools", "variables", "prompt", "criteria", "examples"}
_FILE_KEYS = _SPEC_KEYS | {"tasks", "files"}


def stable_hash(obj: Any) -> str:
    """SHA-256 of the canonical JSON of ``obj`` (hex), stable across processes and platforms."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def split_of_prompt(benchmark: str, prompt: str) -> str:
    """The split a prompt belongs to, from a hash of its text: splits are disjoint by construction."""
    digest = hashlib.sha256(f"{benchmark}\0{prompt}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") % 20
    return next(s for s, r in _SPLIT_BUCKETS.items() if bucket in r)


class Benchmark(ABC):
    """A source of task instances. Subclasses implement ``size``, ``instance`` and ``content_hash``."""

    name: str
    domain: str
    description: str = ""
    default_grader: str = "realistic"
    score_rule: str = "healthbench"

    @abstractmethod
    def size(self, split: str) -> int:
        """Number of instances in ``split``."""

    @abstractmethod
    def instance(self, split: str, index: int) -> TaskInstance:
        """Instance ``index`` of ``split``; the same arguments always give the same instance."""

    @abstractmethod
    def content_hash(self) -> str:
        """Hash of everything that defines the instances and rubrics."""

    def examples(self, task: TaskInstance, rng: np.random.Generator, n: int, min_quality: float = 0.0,
                 max_quality: float = 1.0) -> list[str]:
        """Example responses of graded quality for the warm start; empty when the benchmark has none."""
        return []

    def instances(self, split: str) -> Iterator[TaskInstance]:
        for index in range(self.size(split)):
            yield self.instance(split, index)

    def _check_index(self, split: str, index: int) -> None:
        if split not in SPLITS:
            raise ConfigError("split", split, f"one of {list(SPLITS)}")
        size = self.size(split)
        if not isinstance(index, (int, np.integer)) or not 0 <= index < size:
            raise ConfigError("index", index, f"an integer in [0, {size}) for {self.name}/{split}")


# ---------------------------------------------------------------- procedural benchmarks


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
        for problem in _procedural_problems(self.spec):
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


def _procedural_problems(spec: Mapping[str, Any]) -> list[SpecError]:
    """Structural problems of a procedural spec (all of them, not only the first)."""
    problems = _common_problems(spec, _PROCEDURAL_KEYS)
    sizes = spec.get("sizes")
    if not isinstance(sizes, Mapping) or set(sizes) != set(SPLITS):
        problems.append(SpecError(f"expected a mapping with keys {list(SPLITS)}", field="sizes"))
    else:
        for s in SPLITS:
            if isinstance(sizes[s], bool) or not isinstance(sizes[s], int) or sizes[s] < 1:
                problems.append(SpecError(f"expected a positive integer, got {sizes[s]!r}", field=f"sizes.{s}"))
    if not isinstance(spec.get("prompt"), str):
        problems.append(SpecError("expected the prompt template (a string)", field="prompt"))
    pools = spec.get("pools", {})
    if not isinstance(pools, Mapping):
        problems.append(SpecError("expected a mapping of pool name to list", field="pools"))
        pools = {}
    for name, pool in pools.items():
        if not isinstance(pool, list) or not pool:
            problems.append(SpecError("expected a non-empty list", field=f"pools.{name}"))
    variables = spec.get("variables")
    if not isinstance(variables, Mapping):
        problems.append(SpecError("expected a mapping of variable name to definition", field="variables"))
        variables = {}
    kinds = ("pool", "sample", "choice", "range", "expr")
    for name, var in variables.items():
        field = f"variables.{name}"
        found = [k for k in kinds if isinstance(var, Mapping) and k in var]
        if len(found) != 1:
            problems.append(SpecError(f"expected exactly one of {list(kinds)}", field=field))
        elif found[0] in ("pool", "sample") and var[found[0]] not in pools:
            problems.append(SpecError(f"no pool named {var[found[0]]!r}; pools: {sorted(pools)}", field=f"{field}.{found[0]}"))
        elif found[0] == "choice" and (not isinstance(var["choice"], list) or not var["choice"]):
            problems.append(SpecError("expected a non-empty list", field=f"{field}.choice"))
        elif found[0] == "range" and not (
            isinstance(var["range"], list) and len(var["range"]) == 2 and all(isinstance(x, int) for x in var["range"])
            and var["range"][0] <= var["range"][1]
        ):
            problems.append(SpecError("expected [low, high] integers with low <= high", field=f"{field}.range"))
        elif found[0] == "sample" and (not isinstance(var.get("k"), int) or var["k"] > len(pools[var["sample"]])):
            problems.append(SpecError("expected an integer k no larger than the pool", field=f"{field}.k"))
    criteria = spec.get("criteria")
    if not isinstance(criteria, list) or not criteria:
        problems.append(SpecError("expected a non-empty list of criteria", field="criteria"))
    else:
        for i, raw in enumerate(criteria):
            if not isinstance(raw, Mapping):
                problems.append(SpecError("expected a mapping", field=f"criteria[{i}]"))
            elif raw.get("category") not in CATEGORIES:
                problems.append(SpecError(f"expected one of {list(CATEGORIES)}", field=f"criteria[{i}].category"))
    examples = spec.get("examples")
    if examples is not None and not (isinstance(examples, Mapping) and isinstance(examples.get("blocks"), list)):
        problems.append(SpecError("expected a mapping with a list of 'blocks'", field="examples"))
    elif examples is not None:
        for i, block in enumerate(examples["blocks"]):
            if not isinstance(block, Mapping) or not isinstance(block.get("good"), list) or not block["good"]:
                problems.append(SpecError("expected a block with a non-empty 'good' list", field=f"examples.blocks[{i}]"))
    return problems


def _common_problems(spec: Mapping[str, Any], allowed: set[str]) -> list[SpecError]:
    problems = []
    for key in ("name", "domain"):
        if not isinstance(spec.get(key), str) or not spec.get(key):
            problems.append(SpecError("expected a non-empty string", field=key))
    unknown = sorted(set(spec) - allowed)
    if unknown:
        problems.append(SpecError(f"unknown field(s) {unknown}; allowed: {sorted(allowed)}", field=unknown[0]))
    if spec.get("score_rule", "healthbench") not in SCORE_RULES:
        problems.append(SpecError(f"expected one of {list(SCORE_RULES)}", field="score_rule"))
    return problems


# ---------------------------------------------------------------- file benchmarks


def _healthbench_category(points: float) -> str:
    """HealthBench criteria carry points in [-10, 10] and no category: negative → pitfall,
    ≥ 7 → essential, ≥ 4 → important, else optional."""
    if points < 0:
        return "pitfall"
    return "essential" if points >= 7 else "important" if points >= 4 else "optional"


def task_from_line(obj: Mapping[str, Any], *, benchmark: str, domain: str, split: str, index: int) -> TaskInstance:
    """A task from one JSONL object: native (``id, prompt, rubric``) or HealthBench (``prompt, rubrics``).
    Errors name the field as the line spells it (``rubrics[0].points`` for a HealthBench line)."""
    metadata = {"domain": domain, "benchmark": benchmark, "split": split, "index": index}
    if "rubrics" not in obj and "rubric" not in obj:
        raise SpecError("missing: expected 'rubrics' (HealthBench: [{criterion, points, tags}]) or 'rubric' "
                        "(native: [{id, text, points, category}])", field="rubrics")
    if "rubric" in obj:
        task = TaskInstance.from_dict({**obj, "id": obj.get("id", f"{benchmark}/{split}/{index}")})
        return TaskInstance(task.id, task.prompt, task.rubric, {**metadata, **task.metadata})
    if not isinstance(obj["rubrics"], list):
        raise SpecError(f"expected a list of {{criterion, points, tags}}, got {type(obj['rubrics']).__name__}",
                        field="rubrics")
    rubric = []
    for j, r in enumerate(obj["rubrics"]):
        if not isinstance(r, Mapping) or "criterion" not in r or "points" not in r:
            raise SpecError("expected {criterion, points, tags}", field=f"rubrics[{j}]")
        if isinstance(r["points"], bool) or not isinstance(r["points"], (int, float)):
            raise SpecError(f"expected a number, got {r['points']!r}", field=f"rubrics[{j}].points")
        rubric.append({"id": f"c{j}", "text": r["criterion"], "points": r["points"], "tags": r.get("tags") or [],
                       "category": _healthbench_category(r["points"])})
    raw = {"id": obj.get("prompt_id", f"{benchmark}/{split}/{index}"), "prompt": obj.get("prompt"), "rubric": rubric}
    try:
        task = TaskInstance.from_dict(raw)
    except SpecError as exc:  # name the HealthBench field the line holds, not the native one
        field = re.sub(r"^rubric(?=\[|$)", "rubrics", exc.field or "").replace(".text", ".criterion")
        raise SpecError(exc.reason, file=exc.file, line=exc.line, field=field or None) from None
    return TaskInstance(task.id, task.prompt, task.rubric, {**metadata, **task.metadata})


class FileBenchmark(Benchmark):
    """Fixed instances from JSONL: ``tasks`` (one file, each line with a ``split``) or ``files``
    (one file per split)."""

    def __init__(self, spec: Mapping[str, Any], root: Path, source: str | None = None, lines: Mapping[str, int] | None = None):
        problems = _common_problems(spec, _FILE_KEYS)
        if ("tasks" in spec) == ("files" in spec):
            problems.append(SpecError("expected exactly one of 'tasks' or 'files'", field="tasks"))
        for problem in problems:
            raise problem.located(file=source, line=line_of(dict(lines or {}), problem.field))
        self.name, self.domain = spec["name"], spec["domain"]
        self.description = spec.get("description", "")
        self.default_grader = spec.get("grader", "realistic")
        self.score_rule = spec.get("score_rule", "healthbench")
        self._tasks: dict[str, list[TaskInstance]] = {s: [] for s in SPLITS}
        self._hash = hashlib.sha256()
        files = {None: spec["tasks"]} if "tasks" in spec else dict(spec["files"])
        for split, name in files.items():
            path = root / name
            if not path.is_file():
                raise SpecError(f"no such file {str(path)!r}", file=source, field="files" if split else "tasks")
            self._hash.update(path.read_bytes())
            for line, obj in read_jsonl(path):
                task_split = split or obj.pop("split", None)
                if task_split not in SPLITS:
                    raise SpecError(f"expected a split in {list(SPLITS)}, got {task_split!r}", file=str(path), line=line, field="split")
                index = len(self._tasks[task_split])
                try:
                    task = task_from_line(obj, benchmark=self.name, domain=self.domain, split=task_split, index=index)
                except SpecError as exc:
                    raise exc.located(file=str(path), line=line) from None
                self._tasks[task_split].append(task)

    def size(self, split: str) -> int:
        if split not in SPLITS:
            raise ConfigError("split", split, f"one of {list(SPLITS)}")
        return len(self._tasks[split])

    def instance(self, split: str, index: int) -> TaskInstance:
        self._check_index(split, index)
        return self._tasks[split][index]

    def content_hash(self) -> str:
        return self._hash.hexdigest()


# ---------------------------------------------------------------- loading


def benchmark_from_spec(spec: Mapping[str, Any], root: Path, source: str | None = None, lines: Mapping[str, int] | None = None) -> Benchmark:
    """A benchmark from a parsed spec mapping; ``root`` resolves relative task files."""
    if not isinstance(spec, Mapping):
        raise SpecError("expected a mapping at the top level", file=source, line=1)
    kind = spec.get("kind", "procedural")
    if kind == "procedural":
        return ProceduralBenchmark(spec, source, lines)
    if kind == "file":
        return FileBenchmark(spec, root, source, lines)
    raise SpecError(f"expected 'procedural' or 'file', got {kind!r}", file=source, line=line_of(dict(lines or {}), "kind"), field="kind")


def load_benchmark(path: str | Path) -> Benchmark:
    """Load a benchmark from its YAML spec (a file, or a folder holding ``benchmark.yaml``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "benchmark.yaml"
    if not path.is_file():
        raise SpecError("no such benchmark spec", file=str(path))
    spec, lines = load_yaml(path)
    return benchmark_from_spec(spec, path.parent, str(path), lines)


def validate_benchmark(path: str | Path, *, samples: int = 3) -> list[SpecError]:
    """Every problem of a benchmark spec: structure, then rendering of ``samples`` instances per split
    (templates, criteria, checks, regexes, examples). Empty when the spec is valid."""
    path = Path(path)
    if path.is_dir():
        path = path / "benchmark.yaml"
    try:
        spec, lines = load_yaml(path)
    except (SpecError, OSError) as exc:
        return [exc if isinstance(exc, SpecError) else SpecError(str(exc), file=str(path))]
    if isinstance(spec, Mapping) and spec.get("kind", "procedural") == "procedural":
        problems = [p.located(file=str(path), line=line_of(lines, p.field)) for p in _procedural_problems(spec)]
        if problems:
            return problems
    try:
        benchmark = benchmark_from_spec(spec, path.parent, str(path), lines)
    except SpecError as exc:
        return [exc]
    if not isinstance(benchmark, ProceduralBenchmark):
        return []
    found: dict[str, SpecError] = {}
    for split in SPLITS:
        for index in range(min(samples, benchmark.size(split))):
            try:
                names = benchmark.names(split, index).values
            except SpecError as exc:
                found.setdefault(str(exc.field), exc)
                continue
            for i, raw in enumerate(spec["criteria"]):
                try:
                    benchmark._criterion(i, raw, names)
                except SpecError as exc:
                    found.setdefault(str(exc.field), exc)
            try:
                task = benchmark.instance(split, index)
                benchmark.examples(task, np.random.default_rng(index), 2)
            except SpecError as exc:
                found.setdefault(str(exc.field), exc)
    return list(found.values())
