"""YAML and JSONL reading that remembers line numbers, so errors can point at them."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError

Location = dict[str, int]


def _walk(node: yaml.Node, path: str, lines: Location) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = f"{path}.{key.value}" if path else str(key.value)
            lines[child] = key.start_mark.line + 1
            _walk(value, child, lines)
            lines[child] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, f"{path}[{i}]", lines)


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it: ~10× faster


def load_yaml(path: Path) -> tuple[Any, Location]:
    """Load a YAML file; returns (data, {field path: line}). Parse errors name file and line.

    The file is parsed once (its node tree gives the lines, then the data), and a file read before
    with the same size and modification time is not parsed again: the catalog's specs are read by
    several lookups at import."""
    stat = path.stat()
    data, lines = _load_yaml(path, stat.st_mtime_ns, stat.st_size)
    return copy.deepcopy(data), lines


@lru_cache(maxsize=256)
def _load_yaml(path: Path, _mtime_ns: int, _size: int) -> tuple[Any, Location]:
    text = path.read_text(encoding="utf-8")
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise SpecError(f"invalid YAML: {exc.problem}", file=str(path), line=line) from None
    finally:
        loader.dispose()
    lines: Location = {}
    if node is not None:
        _walk(node, "", lines)
    return data, lines


def line_of(lines: Location, field: str | None) -> int | None:
    """Line of ``field`` or of its nearest enclosing field."""
    while field:
        if field in lines:
            return lines[field]
        cut = max(field.rfind("."), field.rfind("["))
        field = field[:cut] if cut > 0 else ""
    return lines.get("")


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line; a bad line names file and line."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SpecError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=str(path), line=number) from None
            if not isinstance(obj, dict):
                raise SpecError("expected a JSON object per line", file=str(path), line=number)
            yield number, obj
