"""Board protocols (DESIGN §10): the budget at which agents are compared, fixed in a versioned file.

A protocol (``protocols/<name>.yaml``, described by ``protocol.schema.json``) sets run settings —
steps, prompts × group size, optimiser passes per rollout batch, eval instances per benchmark — plus
the judge profiles of a board and what a complete board holds (``Protocol.cells``, the one source of
completeness). A run made under a protocol records its name and version; its settings can then not be
overridden, and ``publish`` refuses runs made under another protocol (or an older version of it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..catalog import catalog_files
from ..errors import ConfigError, SpecError, UnknownNameError
from ..hashing import stable_hash
from ..tasks.schema import load_schema, schema_problems
from ..tasks.yamlio import line_of, load_yaml

SCHEMA = Path(__file__).with_name("protocol.schema.json")


@dataclass(frozen=True)
class Protocol:
    """A named, versioned comparison budget, and what a complete board under it holds."""

    name: str
    version: int
    settings: dict[str, int]
    seeds: int  # seeds of every cell under the main profile
    noise: tuple[str, ...]
    main: str = "realistic"  # every preset runs under it
    other_seeds: int = 3  # seeds of the cells under the other profiles
    core: tuple[str, ...] = ()  # the agents run under every profile
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

    def cells(self, presets: Sequence[str]) -> list[tuple[str, str, int]]:
        """(agent, judge profile, seeds) of a complete board: every preset under the main profile,
        the core agents under every other one. The single source of completeness."""
        return [(a, self.main, self.seeds) for a in presets] + [
            (a, n, self.other_seeds) for n in self.noise if n != self.main for a in self.core if a in presets]

    def fingerprint(self) -> str:
        """What a run's budget depends on (the board's completeness fields do not change a run)."""
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
    problems = schema_problems(data, load_schema(SCHEMA), file=str(path), lines=lines)
    if not problems and data["main"] not in data["noise"]:
        problems.append(SpecError(f"expected one of the board's profiles {data['noise']}", file=str(path),
                                  line=line_of(lines, "main"), field="main"))
    if problems:
        raise problems[0]
    return Protocol(str(data.get("name", path.stem)), data["version"], dict(data["settings"]), data["seeds"],
                    tuple(data["noise"]), data["main"], data["other_seeds"], tuple(data["core"]),
                    str(data.get("description", "")), path)
