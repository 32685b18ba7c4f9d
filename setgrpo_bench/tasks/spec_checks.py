"""Structure checks of a benchmark spec: every problem at once, each naming its field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import SpecError
from .benchmark import SPLITS
from .model import CATEGORIES
from .scoring import SCORE_RULES

SPEC_KEYS = {"name", "domain", "kind", "description", "version", "grader", "score_rule"}
PROCEDURAL_KEYS = SPEC_KEYS | {"sizes", "pools", "variables", "prompt", "criteria", "examples"}
FILE_KEYS = SPEC_KEYS | {"tasks", "files"}


def procedural_problems(spec: Mapping[str, Any]) -> list[SpecError]:
    """Structural problems of a procedural spec (all of them, not only the first)."""
    problems = common_problems(spec, PROCEDURAL_KEYS)
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


def common_problems(spec: Mapping[str, Any], allowed: set[str]) -> list[SpecError]:
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

