"""How a setting is declared, parsed and checked (DESIGN §7): a field with its help and bounds, the
validators of names, levels and geometries, and errors that say which setting, what was given and what
is allowed. ``config`` declares the settings with these."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from ..errors import ConfigError, SetgrpoBenchError, UnknownNameError


def field_of(default: Any, help: str, *, fix: str = "", **bounds: float) -> Any:
    """A setting: its default, its one-line help (the ``--help`` of its flag), its bounds (``ge``,
    ``gt``, ``le``, ``lt``, checked by pydantic) and the fix an error message suggests."""
    return Field(default, description=help, json_schema_extra={"fix": fix} if fix else None, **bounds)


def check_device(value: str) -> str:
    if value in ("cpu", "cuda") or value.startswith("cuda:"):
        return value
    raise ConfigError("device", value, "'cpu', 'cuda' or 'cuda:N'")


def one_of(kind: str, known: Sequence[str] | Mapping[str, Any] | Callable[[], Sequence[str]]) -> Callable[[str], str]:
    """A validator of a name; ``known`` may be a function (names that installed plugins add)."""
    def check(value: str) -> str:
        names = known() if callable(known) else known
        if value not in names:
            raise UnknownNameError(kind, value, names)
        return value

    return check


STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)
"""Unknown fields, NaN and ±∞ are refused; values from the command line (strings) are converted."""


def parse_levels(spec: str) -> tuple[float, ...]:
    """``"0.5,0.8,0.9"`` → (0.5, 0.8, 0.9): set levels α_a, each in (0, 1); ``""`` → () (none)."""
    try:
        levels = tuple(float(x) for x in str(spec).split(",") if x.strip())
    except ValueError:
        raise ConfigError("alpha_a_grid", spec, "comma-separated numbers in (0, 1), e.g. '0.5,0.8,0.9'") from None
    if any(not 0 < x < 1 for x in levels) or len(set(levels)) != len(levels):
        raise ConfigError("alpha_a_grid", spec, "distinct numbers in (0, 1), e.g. '0.5,0.8,0.9'")
    return levels


def parse_geometry(spec: str) -> tuple[str, int]:
    """``full`` | ``identity`` | ``last:N`` | ``sketch:D`` → (kind, size)."""
    kind, _, arg = str(spec).partition(":")
    if kind in ("full", "identity") and not arg:
        return kind, 0
    if kind in ("last", "sketch") and arg.isdigit() and int(arg) >= 1:
        return kind, int(arg)
    raise ConfigError("geometry", spec, "'full', 'identity', 'last:N' or 'sketch:D' with a positive integer")


REPORTERS = ("tensorboard", "wandb")
"""Where a run may also report its per-step metrics (``harness.reporting``)."""


def known_reporters(spec: str) -> str:
    """``report_to``: comma-separated reporters of ``REPORTERS``, or ``""`` for none."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if any(n not in REPORTERS for n in names):
        raise ConfigError("report_to", spec, f"comma-separated reporters of {list(REPORTERS)}, or '' for none")
    return spec


def known_judge(name: str) -> str:
    from ..graders.judge_profiles import (
        judge_profile,  # the graders load scipy: not for ``--help``
    )

    judge_profile(name)
    return name


def known_reference(spec: str) -> str:
    from ..graders.reference import parse_reference

    parse_reference(spec)
    return spec


Settings = TypeVar("Settings")


def build_settings(group: type[Settings], values: Mapping[str, Any]) -> Settings:
    """``group(**values)`` with pydantic's verdict turned into ours: the first bad value as a
    ``ConfigError`` naming the setting, the value, what is allowed (its type and bounds) and the fix."""
    for name, value in values.items():  # pydantic would read True as 1
        info = group.__pydantic_fields__.get(name)
        if isinstance(value, bool) and info is not None and not isinstance(info.default, bool):
            raise ConfigError(name, value, allowed_values(info))
    try:
        return group(**values)
    except ValidationError as exc:
        raise config_error(group, exc.errors()[0]) from None


_BOUND_WORDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def allowed_values(info: FieldInfo) -> str:
    """A setting's type and bounds in words: 'an integer >= 2', 'a number in (0, 1]'."""
    kind = {int: "an integer", float: "a number", bool: "true or false"}.get(type(info.default), "a string")
    bounds = {name: getattr(m, name) for m in info.metadata for name in _BOUND_WORDS if hasattr(m, name)}
    low = next(((k, v) for k, v in bounds.items() if k in ("ge", "gt")), None)
    high = next(((k, v) for k, v in bounds.items() if k in ("le", "lt")), None)
    if low and high:
        return f"{kind} in {'[' if low[0] == 'ge' else '('}{low[1]:g}, {high[1]:g}{']' if high[0] == 'le' else ')'}"
    return " ".join([kind, *(f"{_BOUND_WORDS[k]} {v:g}" for k, v in bounds.items())])


def config_error(group: type, error: dict[str, Any]) -> SetgrpoBenchError:
    """Our error for one of pydantic's: the original of a check of ours, else a ``ConfigError``."""
    if error["type"] == "value_error" and isinstance(error.get("ctx", {}).get("error"), SetgrpoBenchError):
        return error["ctx"]["error"]
    if error["type"] == "unexpected_keyword_argument":
        return UnknownNameError("config field", str(error["loc"][0]), group.__pydantic_fields__)
    name = str(error["loc"][0]) if error["loc"] else group.__name__
    info = group.__pydantic_fields__.get(name)
    if info is None:
        return ConfigError(name, error.get("input"), error["msg"])
    fix = (info.json_schema_extra or {}).get("fix", "") if isinstance(info.json_schema_extra, dict) else ""
    return ConfigError(name, error.get("input"), allowed_values(info), fix)
