"""Judge profiles backed by a model (``kind: learned`` in ``graders/*.yaml``): selectable by name like a
noise profile (``--noise learned``), built by a grader class that lives above the policy layer and is
named here as ``module:Class`` — resolved only when such a profile is used, as Gymnasium resolves an
env's entry point — so that this layer imports no model code."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..catalog import catalog_roots
from ..errors import SpecError
from ..tasks.yamlio import line_of, load_yaml
from .profile_files import profile_files

GRADER_KINDS = {"learned": {"grader": "setgrpo_bench.judges.learned:LearnedJudgeGrader",
                            "build_key": "setgrpo_bench.judges.learned_paths:profile_build_key"}}
"""Profile kind → the grader class that builds it and the function naming its model's build from the
profile's fields (for suite hashes), as ``module:attribute`` (``judge_profiles`` resolves them)."""
PROFILE_FIELDS = {"name", "kind", "description", "temperature", "cost", "build"}
BUILD_FIELDS = {"n_embd", "n_layer", "n_head", "label_budget", "policy_share", "held_out", "max_response_tokens", "epochs",
                "batch_size", "lr", "seed", "reads_prompt", "max_prompt_tokens", "n_positions", "split_by_task", "hack_share"}
"""What a profile's ``build`` may set (``judges.learned_paths.JudgeBuildConfig``, named here without importing it)."""


def model_profiles() -> dict[str, dict[str, Any]]:
    """Model-backed profiles of the catalog search path by name (their YAML fields)."""
    return dict(_profiles(tuple(catalog_roots())))


@lru_cache(maxsize=8)
def _profiles(roots: tuple[Path, ...]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, path in profile_files(GRADER_KINDS).items():
        data, lines = load_yaml(path)
        for key in sorted(set(data) - PROFILE_FIELDS):
            raise SpecError(f"unknown field; allowed: {sorted(PROFILE_FIELDS)}", file=str(path), line=line_of(lines, key),
                            field=key)
        build = data.get("build", {})
        if not isinstance(build, Mapping):
            raise SpecError(f"expected a mapping of build fields, got {build!r}", file=str(path), line=line_of(lines, "build"),
                            field="build")
        for key in sorted(set(build) - BUILD_FIELDS):
            raise SpecError(f"unknown build field; allowed: {sorted(BUILD_FIELDS)}", file=str(path),
                            line=line_of(lines, f"build.{key}"), field=f"build.{key}")
        for key in ("temperature", "cost"):
            value = data.get(key, 1.0)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise SpecError(f"expected a number > 0, got {value!r}", file=str(path), line=line_of(lines, key), field=key)
        out[name] = dict(data)
    return out
