"""Benchmarks found in the catalog search path, by name: the lookup every layer above the task model
uses (envs, the embedded policy, the learned judge), so none of them imports the envs for it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..catalog import builtin_root, catalog_files, catalog_roots
from ..errors import SpecError, UnknownNameError
from .benchmark import Benchmark
from .loading import load_benchmark
from .yamlio import line_of, load_yaml

_registered: dict[str, Benchmark] = {}


def benchmark_paths() -> dict[str, Path]:
    """Benchmark name → spec path for every ``envs/*/benchmark.yaml`` and ``envs/*.yaml`` in the catalog."""
    return dict(_benchmark_paths(tuple(catalog_roots())))


@lru_cache(maxsize=8)
def _benchmark_paths(roots: tuple[Path, ...]) -> dict[str, Path]:
    """Later catalogs override earlier ones by name, except that a built-in benchmark is replaced only
    by a spec that says so (``replaces: <Name>``): a user folder never shadows one silently."""
    builtin = builtin_root() / "envs"
    paths: dict[str, Path] = {}
    for path in catalog_files("envs", "*/benchmark.yaml") + catalog_files("envs", "*.yaml"):
        data, lines = load_yaml(path)
        name = str((data.get("name") if isinstance(data, dict) else None) or path.parent.name)
        shadowed = paths.get(name)
        if shadowed is not None and shadowed.is_relative_to(builtin) and not path.is_relative_to(builtin):
            if not (isinstance(data, dict) and data.get("replaces") == name):
                raise SpecError(f"{name} is a built-in benchmark ({shadowed}); this spec would replace it. Rename it, "
                                f"or add 'replaces: {name}' to replace the built-in on purpose",
                                file=str(path), line=line_of(lines, "name"), field="name")
        paths[name] = path
    return paths


@lru_cache(maxsize=None)
def _load_path(path: Path) -> Benchmark:
    return load_benchmark(path)


def add_benchmark(benchmark: Benchmark) -> None:
    """Make an in-memory benchmark loadable by name (used by ``register_env``)."""
    _registered[benchmark.name] = benchmark


def load_env_benchmark(name: str | Path) -> Benchmark:
    """A benchmark by name (registered in memory or in the catalog) or by spec path."""
    name = str(name)
    if name in _registered:
        return _registered[name]
    if name.endswith((".yaml", ".yml")) or Path(name).is_dir():
        return _load_path(Path(name).resolve())
    paths = benchmark_paths()
    if name not in paths:
        raise UnknownNameError("benchmark", name, set(paths) | set(_registered))
    return _load_path(paths[name])
