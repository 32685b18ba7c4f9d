"""Agent presets (``agents/*.yaml`` in the catalog search path) and the config of a run: defaults ←
preset ← protocol budget ← overrides. Values from YAML and the command line are converted to the
field's type here; whether they are allowed is ``TrainConfig``'s to say."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..catalog import catalog_files
from ..errors import ConfigError, SpecError, UnknownNameError
from ..tasks.yamlio import line_of, load_yaml
from .config import FIELDS, TrainConfig, allowed_values
from .protocol import load_protocol


def coerce(name: str, value: Any, source: str = "override") -> Any:
    """``value`` (a CLI string, a YAML scalar) as the type of setting ``name``, converted by pydantic
    ("0.3" → 0.3, "yes" → True; a bool is never a number); its bounds are checked with the whole config."""
    if name not in FIELDS:
        raise UnknownNameError("config field", name, FIELDS)
    kind = type(FIELDS[name].default)
    if kind is str:
        return str(value)
    try:
        if isinstance(value, bool) and kind is not bool:
            raise ValueError("a bool is not a number")
        return TypeAdapter(kind).validate_python(value)
    except (ValidationError, ValueError):
        raise ConfigError(name, value, f"{allowed_values(FIELDS[name])} ({source})") from None


def preset_paths() -> dict[str, Path]:
    return {path.stem: path for path in catalog_files("agents", "*.yaml")}


def load_preset(name: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields set by preset ``name`` (``agents/<name>.yaml`` in the catalog search path).

    ``extends: OTHER`` starts from preset OTHER's fields, so an ablation states only what it changes.
    """
    paths = preset_paths()
    if name not in paths:
        raise UnknownNameError("agent", name, paths)
    path = paths[name]
    data, lines = load_yaml(path)
    if not isinstance(data, Mapping):
        raise SpecError("expected a mapping of config fields", file=str(path), line=1)
    out: dict[str, Any] = {}
    if "extends" in data:
        base = str(data["extends"])
        if base in (*_seen, name):
            raise SpecError(f"presets extend each other in a cycle: {' -> '.join((*_seen, name, base))}",
                            file=str(path), line=line_of(lines, "extends"), field="extends")
        try:
            out.update(load_preset(base, (*_seen, name)))
        except UnknownNameError as exc:
            raise SpecError(str(exc), file=str(path), line=line_of(lines, "extends"), field="extends") from None
    out["agent"] = name
    for key, value in data.items():
        if key == "extends":
            continue
        try:
            out[key] = coerce(key, value, source=str(path))
        except (ConfigError, UnknownNameError) as exc:
            raise SpecError(str(exc), file=str(path), line=line_of(lines, key), field=key) from None
    return out


def resolve_config(agent: str, overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """Defaults ← preset ``agent`` ← the budget of its ``protocol`` (if any) ← ``overrides`` (CLI values
    as strings or typed values). An override of the protocol's budget is refused by ``TrainConfig``."""
    values = load_preset(agent)
    overrides = {key: coerce(key, value) for key, value in (overrides or {}).items()}
    protocol = overrides.get("protocol", values.get("protocol"))
    if protocol:
        protocol = load_protocol(protocol)
        values.update(protocol.settings)
    values.update(overrides)
    if protocol:
        values["protocol"] = protocol.id
    return TrainConfig.from_flat(values)
