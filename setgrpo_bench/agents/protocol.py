"""Board protocols (DESIGN §10): the budget at which agents are compared, fixed in a versioned file.

A protocol (``protocols/<name>.yaml``) sets run settings — steps, prompts × group size, optimiser
passes per rollout batch, eval instances per benchmark — plus the seeds and judge profiles of a
board. A run made under a protocol records its name and version; its settings can then not be
overridden, and ``publish`` refuses runs made under another protocol (or an older version of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..catalog import catalog_files
from ..errors import ConfigError, SpecError, UnknownNameError
from ..hashing import stable_hash
from ..tasks.yamlio import line_of, load_yaml

PROTOCOL_SETTINGS = ("steps", "groups_per_step", "group_size", "mu", "eval_instances")
"""The run settings a protocol fixes."""


@dataclass(frozen=True)
class Protocol:
    """A named, versioned comparison budget."""

    name: str
    version: int
    settings: dict[str, int]
    seeds: int
    noise: tuple[str, ...]
    description: str = ""
    path: Path | None = field(default=None, compare=False)

    @property
    def id(self) -> str:
        """``name@version``: what a run records."""
        return f"{self.name}@{self.version}"

    def check(self, settings: Mapping[str, Any]) -> None:
        """Refuse a run config (flat settings) whose budget differs from this protocol's."""
        for key, value in self.settings.items():
            if settings.get(key) != value:
                raise ConfigError(key, settings.get(key), f"{value}, the budget of protocol {self.id}",
                                  f"Drop --{key.replace('_', '-')} or run without --protocol.")

    def fingerprint(self) -> str:
        return stable_hash({"name": self.name, "version": self.version, "settings": self.settings,
                            "seeds": self.seeds, "noise": list(self.noise)})


def protocol_paths() -> dict[str, Path]:
    return {path.stem: path for path in catalog_files("protocols", "*.yaml")}


def load_protocol(spec: str) -> Protocol:
    """A protocol by name (``board-v1``) or ``name@version`` (the version must be the file's)."""
    name, _, version = str(spec).partition("@")
    paths = protocol_paths()
    if name not in paths:
        raise UnknownNameError("protocol", name, paths)
    protocol = _load(paths[name])
    if version and version != str(protocol.version):
        raise SpecError(f"protocol {name} is at version {protocol.version}, not {version}: the run was made "
                        "under another version of it", field="protocol")
    return protocol


@lru_cache(maxsize=16)
def _load(path: Path) -> Protocol:
    data, lines = load_yaml(path)
    where = {"file": str(path)}
    if not isinstance(data, Mapping):
        raise SpecError("expected a mapping", line=1, **where)
    allowed = {"name", "version", "description", "settings", "seeds", "noise"}
    for key in sorted(set(data) - allowed):
        raise SpecError(f"unknown field; allowed: {sorted(allowed)}", line=line_of(lines, key), field=key, **where)
    for key in ("version", "settings", "seeds", "noise"):
        if key not in data:
            raise SpecError("missing required field", field=key, **where)
    settings = data["settings"]
    if not isinstance(settings, Mapping) or set(settings) != set(PROTOCOL_SETTINGS):
        raise SpecError(f"expected exactly the settings {list(PROTOCOL_SETTINGS)}", line=line_of(lines, "settings"),
                        field="settings", **where)
    for key, value in settings.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "eval_instances" else 1):
            raise SpecError(f"expected a positive integer, got {value!r}", line=line_of(lines, "settings"),
                            field=f"settings.{key}", **where)
    if isinstance(data["seeds"], bool) or not isinstance(data["seeds"], int) or data["seeds"] < 1:
        raise SpecError(f"expected a positive integer, got {data['seeds']!r}", line=line_of(lines, "seeds"), field="seeds", **where)
    noise = data["noise"]
    if not isinstance(noise, list) or not noise or not all(isinstance(n, str) for n in noise):
        raise SpecError("expected a list of judge profile names", line=line_of(lines, "noise"), field="noise", **where)
    return Protocol(str(data.get("name", path.stem)), int(data["version"]), dict(settings), int(data["seeds"]),
                    tuple(noise), str(data.get("description", "")), path)
