"""Agent presets (``agents/*.yaml`` in the catalog search path) and the config of a run: defaults ←
preset ← protocol budget ← overrides. Values from YAML and the command line are converted to the
field's type here; whether they are allowed is ``TrainConfig``'s to say."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..catalog import builtin_root, catalog_files
from ..errors import ConfigError, SpecError, UnknownNameError
from ..tasks.yamlio import line_of, load_yaml
from .config import FIELDS, TrainConfig
from .fields import allowed_values
from .protocol import Protocol, load_protocol


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
    """Preset name → file, later catalogs overriding earlier ones by name, except that a built-in preset
    is replaced only by a file that says so (``replaces: <name>``): a catalog or package that ships
    ``agents/grpo.yaml`` without it is left out with a warning, and ``grpo`` stays the built-in one."""
    builtin = builtin_root() / "agents"
    paths: dict[str, Path] = {}
    for path in catalog_files("agents", "*.yaml"):
        shadowed = paths.get(path.stem)
        if shadowed is not None and shadowed.is_relative_to(builtin) and not path.is_relative_to(builtin):
            if _replaces(path) != path.stem:
                _warn_once(f"{path}: left out, since {path.stem!r} is a built-in preset; rename the file, or add "
                           f"'replaces: {path.stem}' to replace the built-in on purpose (runs then record the file)")
                continue
        paths[path.stem] = path
    return paths


def board_presets(protocol: Protocol) -> list[str]:
    """The presets a complete board under ``protocol`` holds: its list, else every preset of the catalog."""
    return list(protocol.presets) or sorted(preset_paths())


def catalog_presets(name: str) -> list[Path]:
    """The files outside the built-in catalog that preset ``name`` is read from (itself and what it
    ``extends``): what a run records besides the package's own code."""
    builtin, paths, chain = builtin_root() / "agents", preset_paths(), []
    while name in paths and paths[name] not in chain:
        chain.append(paths[name])
        data, _ = load_yaml(paths[name])
        name = str(data.get("extends", "")) if isinstance(data, Mapping) else ""
    return [p for p in chain if not p.is_relative_to(builtin)]


def replaced_presets() -> dict[str, Path]:
    """Built-in presets that a catalog file replaces on purpose (``replaces:``): name → that file."""
    builtin = builtin_root() / "agents"
    return {name: path for name, path in preset_paths().items()
            if not path.is_relative_to(builtin) and (builtin / path.name).is_file()}


def _replaces(path: Path) -> str | None:
    try:
        data, _ = load_yaml(path)
    except SpecError:
        return None  # the file's own error is reported when the preset is loaded
    return str(data["replaces"]) if isinstance(data, Mapping) and "replaces" in data else None


@lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=3)


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
    if "replaces" in data and str(data["replaces"]) != name:
        raise SpecError(f"replaces: {data['replaces']!r} must be the preset's own name ({name!r}, its file name)",
                        file=str(path), line=line_of(lines, "replaces"), field="replaces")
    for key, value in data.items():
        if key in ("extends", "replaces"):
            continue
        try:
            out[key] = coerce(key, value, source=str(path))
        except (ConfigError, UnknownNameError) as exc:
            raise SpecError(str(exc), file=str(path), line=line_of(lines, key), field=key) from None
    if out.get("eval_split", "dev") != "dev":
        raise SpecError("a preset is chosen on the dev split and cannot select another ('eval_split: test' belongs to "
                        "a board's protocol)", file=str(path), line=line_of(lines, "eval_split"), field="eval_split")
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
