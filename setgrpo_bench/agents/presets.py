"""Agent presets (``agents/*.yaml`` in the catalog search path) and the config of a run: defaults ←
preset ← protocol budget ← overrides. Values from YAML and the command line are converted to the
field's type here; whether they are allowed is ``TrainConfig``'s to say."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING
from pathlib import Path
from typing import Any

from ..catalog import catalog_files
from ..errors import ConfigError, SpecError, UnknownNameError
from ..tasks.yamlio import line_of, load_yaml
from .config import FIELDS, TrainConfig
from .protocol import load_protocol


def coerce(name: str, value: Any, source: str = "override") -> Any:
    """Convert ``value`` (e.g. a CLI string) to the type of field ``name``; clear error otherwise."""
    if name not in FIELDS:
        raise UnknownNameError("config field", name, FIELDS)
    default = FIELDS[name].default
    kind = type(default) if default is not MISSING else str
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "1", "yes"):
                return True
            if str(value).lower() in ("false", "0", "no"):
                return False
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(name, value, f"a {kind.__name__} ({source})") from None


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
        values.update(protocol.settings, protocol=protocol.id)
    values.update(overrides)
    if protocol:
        values["protocol"] = protocol.id
    return TrainConfig.from_flat(values)
