"""Where catalog folders (``envs/``, ``agents/``, ``graders/``) are found (DESIGN §2).

Search path, later entries overriding earlier ones by name: the built-in catalog shipped with the
package; folders from installed packages' ``setgrpo_bench.catalog`` entry points; folders listed in
``SETGRPO_BENCH_CATALOG`` (``os.pathsep``-separated); folders added with ``add_catalog`` (the CLI's
``--catalog``).
"""

from __future__ import annotations

import os
import warnings
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path

from .errors import SpecError

ENV_VAR = "SETGRPO_BENCH_CATALOG"
ENTRY_POINT_GROUP = "setgrpo_bench.catalog"
KINDS = ("envs", "agents", "graders", "protocols")
_added: list[Path] = []


def builtin_root() -> Path:
    """The built-in catalog: inside the installed wheel, or the source checkout's top level."""
    package = Path(__file__).resolve().parent
    shipped = package / "_catalog"
    return shipped if shipped.is_dir() else package.parent


def add_catalog(path: str | Path) -> None:
    """Add a user catalog folder for this process."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise SpecError("catalog folder does not exist", file=str(path))
    if root not in _added:
        _added.append(root)


def _entry_point_roots() -> list[Path]:
    """The catalog folders that installed packages name; one that fails to load or names no folder is
    left out with one warning naming its package, so that it breaks nothing else."""
    roots = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        package = ep.dist.metadata["Name"] if ep.dist is not None else ep.name
        try:
            target = ep.load()
            target = Path(target() if callable(target) else target)
            if not target.is_dir():
                raise NotADirectoryError(f"{target} is not a folder")
        except Exception as exc:  # a package's own code may fail in any way  # noqa: BLE001
            _warn_once(f"catalog of {package} (entry point {ep.name!r} = {ep.value}) is not loaded: "
                       f"{type(exc).__name__}: {exc}")
            continue
        roots.append(target)
    return roots


@lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=3)


def catalog_roots() -> list[Path]:
    """All catalog roots in search order."""
    from_env = [Path(p).expanduser() for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    roots = [builtin_root(), *_entry_point_roots(), *from_env, *_added]
    unique: list[Path] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return unique


def catalog_files(kind: str, pattern: str) -> list[Path]:
    """Files matching ``pattern`` under ``<root>/<kind>/`` of every catalog root, in search order."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return [path for root in catalog_roots() for path in sorted((root / kind).glob(pattern))]
