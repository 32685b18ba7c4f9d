"""JSON-schema checks of a parsed YAML spec (protocols, noise profiles, benchmark specs), each problem
located at its line: the declarative specs users write are described by schemas they can read, and
every violation is reported at once."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from ..errors import SpecError
from .yamlio import Location, line_of


@lru_cache(maxsize=16)
def load_schema(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _field(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def schema_problems(data: Any, schema: Mapping[str, Any], *, file: str | None = None,
                    lines: Location | None = None) -> list[SpecError]:
    """Every violation of ``schema`` by ``data``, as ``SpecError`` naming the file, line and field."""
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        field = _field(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
            allowed = set(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - allowed):
                name = f"{field}.{key}" if field else str(key)
                problems.append(SpecError(f"unknown field; allowed: {sorted(allowed)}", file=file,
                                          line=line_of(lines or {}, name), field=name))
            continue
        expected = error.schema.get("expected")  # a schema's own words for what a field takes
        message = f"expected {expected}, got {error.instance!r}" if expected else error.message
        problems.append(SpecError(message, file=file, line=line_of(lines or {}, field) if field else 1,
                                  field=field or None))
    return problems
