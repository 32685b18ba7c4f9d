"""YAML and JSONL reading that remembers line numbers, so errors can point at them.

Every YAML file the package reads (benchmark specs, noise profiles, presets, protocols) goes through
``load_yaml``, which refuses what no spec needs and a hostile file could use: alias expansion beyond
``MAX_NODES`` (a "billion laughs" file of a few hundred bytes would otherwise expand to gigabytes) and
non-finite numbers (``.nan``, ``.inf``), each at its file and line."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError

Location = dict[str, int]
MAX_NODES = 100_000
"""The most nodes a YAML document may expand to, aliases counted at every use (the largest built-in
spec has a few thousand)."""
_FLOAT = "tag:yaml.org,2002:float"


def _walk(node: yaml.Node, path: str, lines: Location) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.ScalarNode) and node.tag == _FLOAT and not math.isfinite(_float(node.value)):
        raise _NotFinite(node)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = f"{path}.{key.value}" if path else str(key.value)
            lines[child] = key.start_mark.line + 1
            _walk(value, child, lines)
            lines[child] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, f"{path}[{i}]", lines)


class _NotFinite(Exception):
    def __init__(self, node: yaml.ScalarNode) -> None:
        self.node = node


def _float(text: str) -> float:
    """A YAML 1.1 float scalar's value (``.inf``, ``-.Inf``, ``.NaN``, ``1_000.5``)."""
    text = text.replace("_", "").lower()
    if text.endswith((".inf", ".nan")):
        return float(text.replace(".inf", "inf").replace(".nan", "nan"))
    try:
        return float(text)
    except ValueError:  # sexagesimal (190:20:30.15): finite
        return 0.0


def expanded_size(node: yaml.Node, limit: int = MAX_NODES) -> int:
    """How many nodes ``node`` expands to when every alias is copied out, counted without expanding
    (an aliased node is one object shared by its uses) and capped just above ``limit``."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        if id(n) not in sizes:
            sizes[id(n)] = min(limit + 1, 1 + sum(size(c) for c in _children(n)))
        return sizes[id(n)]

    return size(node)


def _children(n: yaml.Node) -> list[yaml.Node]:
    if isinstance(n, yaml.MappingNode):
        return [c for pair in n.value for c in pair]
    return list(n.value) if isinstance(n, yaml.SequenceNode) else []


def _first_shared(node: yaml.Node) -> int:
    """The line of the first node used more than once (an anchor that aliases repeat)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            return n.start_mark.line + 1
        seen.add(id(n))
        stack.extend(reversed(_children(n)))
    return node.start_mark.line + 1


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
        if node is not None and expanded_size(node) > MAX_NODES:
            raise SpecError(f"the document expands to more than {MAX_NODES:,} nodes (an anchor used by aliases that are "
                            "themselves used many times?); a spec never needs that many", file=str(path),
                            line=_first_shared(node))
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise SpecError(f"invalid YAML: {exc.problem}", file=str(path), line=line) from None
    except RecursionError:
        raise SpecError("the document is nested too deeply to be a spec", file=str(path)) from None
    finally:
        loader.dispose()
    lines: Location = {}
    if node is not None:
        try:
            _walk(node, "", lines)
        except RecursionError:
            raise SpecError("the document is nested too deeply to be a spec", file=str(path)) from None
        except _NotFinite as exc:
            raise SpecError(f"{exc.node.value!r} is not a finite number; expected a finite number", file=str(path),
                            line=exc.node.start_mark.line + 1) from None
    return data, lines


def line_of(lines: Location, field: str | None) -> int | None:
    """Line of ``field`` or of its nearest enclosing field."""
    while field:
        if field in lines:
            return lines[field]
        cut = max(field.rfind("."), field.rfind("["))
        field = field[:cut] if cut > 0 else ""
    return lines.get("")


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number; expected a finite number")


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line; a bad line names file and line."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, parse_constant=_refuse_constant)
            except ValueError as exc:
                if not isinstance(exc, json.JSONDecodeError):
                    raise SpecError(str(exc), file=str(path), line=number) from None
                raise SpecError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=str(path), line=number) from None
            if not isinstance(obj, dict):
                raise SpecError("expected a JSON object per line", file=str(path), line=number)
            yield number, obj
