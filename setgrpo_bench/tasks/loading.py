"""Loading and validating benchmark specs (YAML) into benchmarks."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SpecError
from .benchmark import SPLITS, Benchmark
from .procedural import ProceduralBenchmark
from .spec_checks import procedural_problems
from .task_files import FileBenchmark
from .yamlio import line_of, load_yaml


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
        problems = [p.located(file=str(path), line=line_of(lines, p.field)) for p in procedural_problems(spec)]
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


DISTINCT_SHARE = 0.95
"""A split warns when fewer than this share of its instances have distinct prompts. (The built-in
benchmarks repeat 0–4% of their prompts by chance, which changes a standard error by under 2%; the
docs' Kitchen example (docs/environments.md) repeats 70%.)"""


def benchmark_warnings(path: str | Path) -> list[str]:
    """What is allowed but probably unintended in a valid procedural spec: a split whose instances
    repeat prompts (fewer distinct prompts than its declared size overstates the number of independent
    instances behind a standard error). Empty for a spec with problems (see ``validate_benchmark``)."""
    try:
        benchmark = load_benchmark(path)
    except SpecError:
        return []
    if not isinstance(benchmark, ProceduralBenchmark):
        return []
    out = []
    for split in SPLITS:
        size = benchmark.size(split)
        distinct = len({benchmark.instance(split, i).prompt_text for i in range(size)})
        if distinct < DISTINCT_SHARE * size:
            out.append(f"{benchmark.source}: split {split!r} declares {size} instances but its variables give "
                       f"{distinct} distinct prompts ({size - distinct} repeats): add pool entries or variables, "
                       f"or lower sizes.{split}")
    return out
