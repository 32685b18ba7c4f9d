"""Checks of a benchmark spec: its structure against ``benchmark_spec.schema.json`` (the format users
read), then the cross-references a schema cannot state (a variable's pool exists, ``k`` is no larger
than its pool, a range runs upwards). Every problem at once, each naming its field."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import SpecError, UnknownNameError
from .schema import load_schema, schema_problems

SCHEMA = Path(__file__).with_name("benchmark_spec.schema.json")


def _kind_schema(kind: str) -> dict[str, Any]:
    schema = load_schema(SCHEMA)
    return {"$defs": schema["$defs"], "$ref": f"#/$defs/{kind}"}


def procedural_problems(spec: Mapping[str, Any]) -> list[SpecError]:
    """Every problem of a procedural spec."""
    problems = schema_problems(spec, _kind_schema("procedural"))
    if not isinstance(spec, Mapping):
        return problems
    pools = spec.get("pools") if isinstance(spec.get("pools"), Mapping) else {}
    variables = spec.get("variables") if isinstance(spec.get("variables"), Mapping) else {}
    for name, var in variables.items():
        if not isinstance(var, Mapping):
            continue
        field = f"variables.{name}"
        for kind in ("pool", "sample"):
            if kind in var and var[kind] not in pools:
                problems.append(SpecError(f"no pool named {var[kind]!r}; pools: {sorted(pools)}", field=f"{field}.{kind}"))
        if "sample" in var and var["sample"] in pools and isinstance(var.get("k"), int) and var["k"] > len(pools[var["sample"]]):
            problems.append(SpecError("expected an integer k no larger than the pool", field=f"{field}.k"))
        low_high = var.get("range")
        if isinstance(low_high, list) and len(low_high) == 2 and all(isinstance(x, int) for x in low_high) and low_high[0] > low_high[1]:
            problems.append(SpecError("expected [low, high] integers with low <= high", field=f"{field}.range"))
    return problems + _check_problems(spec.get("criteria"))


def _check_problems(criteria: Any) -> list[SpecError]:
    """Each criterion's check built as written (a value holding a ``{template}`` is left to rendering):
    a check type, field or regular expression that can never work is reported beside the structure's
    problems, so that one pass lists them all."""
    from .checks import CHECK_TYPES, build_check

    problems = []
    for i, criterion in enumerate(criteria if isinstance(criteria, list) else []):
        check = criterion.get("check") if isinstance(criterion, Mapping) else None
        if not isinstance(check, Mapping):
            continue
        if "pattern" in check:  # a template in a pattern stands for text: the rest must compile as written
            check = {**check, "pattern": re.sub(r"\{[^{}]*\}", "x", str(check["pattern"]))}
        if check.get("type") not in CHECK_TYPES:
            problems.append(SpecError(str(UnknownNameError("check type", str(check.get("type")), CHECK_TYPES)),
                                      field=f"criteria[{i}].check.type"))
            continue
        if any("{" in str(v) for k, v in check.items() if k != "pattern"):
            continue  # values that rendering supplies (a number, a list of terms) are checked when rendered
        try:
            build_check(check)
        except SpecError as exc:
            problems.append(SpecError(exc.reason, field=f"criteria[{i}].check" + (f".{exc.field}" if exc.field else "")))
    return problems


def file_problems(spec: Mapping[str, Any]) -> list[SpecError]:
    """Every problem of a file benchmark's spec."""
    return schema_problems(spec, _kind_schema("file"))
