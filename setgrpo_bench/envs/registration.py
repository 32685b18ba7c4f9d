"""Registration of benchmarks as Gymnasium ids ``setgrpo/<Benchmark>-v<version>`` (DESIGN §5)."""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym

from ..tasks.benchmark import SPLITS, Benchmark
from ..tasks.catalog_benchmarks import (
    add_benchmark,
    benchmark_paths,
    load_env_benchmark,
)

NAMESPACE = "setgrpo"
ENTRY_POINT = "setgrpo_bench.envs.rubric_env:RubricEnv"


def env_id(benchmark_name: str, version: int = 0) -> str:
    return f"{NAMESPACE}/{benchmark_name}-v{version}"


def register_env(
    benchmark: Benchmark | str | Path,
    *,
    grader: str | None = None,
    version: int = 0,
) -> str:
    """Register a benchmark (object, catalog name or spec path) as a Gymnasium env; returns its id.

    The spec's kwargs carry the domain, split sizes and default grader profile, so
    ``gymnasium.spec(id).kwargs`` describes the env without building it.

    >>> from setgrpo_bench import register_env
    >>> register_env("MedicationGuide")
    'setgrpo/MedicationGuide-v0'
    """
    if isinstance(benchmark, Benchmark):
        add_benchmark(benchmark)
    else:
        benchmark = load_env_benchmark(benchmark)
    new_id = env_id(benchmark.name, version)
    kwargs = {
        "benchmark": benchmark.name,
        "noise": grader or benchmark.default_grader,
        "domain": benchmark.domain,
        "split_sizes": {s: benchmark.size(s) for s in SPLITS},
    }
    if new_id in gym.registry:
        if gym.registry[new_id].kwargs == kwargs:
            return new_id  # the same benchmark again (e.g. the catalog re-registered): nothing changes
        warnings.warn(f"{new_id} is already registered (benchmark {gym.registry[new_id].kwargs['benchmark']!r}, "
                      f"grader {gym.registry[new_id].kwargs['noise']!r}); replacing it with grader {kwargs['noise']!r}. "
                      "Register under another version to keep both.", stacklevel=2)
        del gym.registry[new_id]
    gym.register(id=new_id, entry_point=ENTRY_POINT, kwargs=kwargs)
    return new_id


def register_catalog() -> list[str]:
    """Register every benchmark of the catalog search path; returns the ids."""
    return [register_env(name) for name in benchmark_paths()]


def registered_env_ids() -> list[str]:
    return sorted(i for i in gym.registry if i.startswith(f"{NAMESPACE}/"))
