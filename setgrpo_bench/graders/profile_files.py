"""The grader profiles' files (``graders/*.yaml`` of every catalog root) by name and kind: one scan that
noise profiles, model-backed profiles, judge-model profiles and the judge pages all read, so that they
agree on which file a name means."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import lru_cache
from pathlib import Path

from ..catalog import catalog_files, catalog_roots
from ..tasks.yamlio import load_yaml

DEFAULT_KIND = "noise"
"""The kind of a profile file that names none."""


def profile_files(kinds: Collection[str] | None = None) -> dict[str, Path]:
    """Grader profile files by name (the ``name`` field, else the file's stem; a later catalog root's file
    overrides an earlier one's of the same name), only those of ``kinds`` when given."""
    return {name: path for name, (kind, path) in _files(tuple(catalog_roots())).items() if kinds is None or kind in kinds}


@lru_cache(maxsize=8)
def _files(roots: tuple[Path, ...]) -> dict[str, tuple[str, Path]]:
    out = {}
    for path in catalog_files("graders", "*.yaml"):
        data, _ = load_yaml(path)
        if isinstance(data, Mapping):
            out[str(data.get("name", path.stem))] = (str(data.get("kind", DEFAULT_KIND)), path)
    return out
