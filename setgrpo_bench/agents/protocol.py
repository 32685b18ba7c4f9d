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
    settings: dict[str, Any]
    seeds: int  # seeds of the core agents under the main profiles
    noise: tuple[str, ...]
    main: str | tuple[str, ...] = "realistic"  # the profile(s) every preset runs under
    other_seeds: int = 3  # seeds of the cells under the other profiles
    core: tuple[str, ...] = ()  # the agents run under every profile
    preset_seeds: int | None = None  # seeds of the non-core presets under the main profiles (default: seeds)
    once: tuple[str, ...] = ()  # agents run under the first main profile only (their policy ignores the judge)
    presets: tuple[str, ...] = ()  # the presets a complete board holds (default: every preset of the catalog)
    judge_seeds: Mapping[str, int] = field(default_factory=dict)  # seeds of every cell under these profiles
    extra: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()  # (agents, profiles) cells outside the rule
    controls: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # method → the agents its verdicts also face
    description: str = ""
    path: Path | None = field(default=None, compare=False)

    @property
    def id(self) -> str:
        """``name@version``: what a run records."""
        return f"{self.name}@{self.version}"

    @property
    def mains(self) -> tuple[str, ...]:
        return (self.main,) if isinstance(self.main, str) else tuple(self.main)

    def check(self, settings: Mapping[str, Any]) -> None:
        """Refuse a run config (flat settings) whose budget differs from this protocol's."""
        for key, value in self.settings.items():
            if settings.get(key) != value:
                raise ConfigError(key, settings.get(key), f"{value}, the budget of protocol {self.id}",
                                  f"Drop --{key.replace('_', '-')} or run without --protocol.")

    def cells(self, presets: Sequence[str]) -> list[tuple[str, str, int]]:
        """(agent, judge profile, seeds) of a complete board: the core agents under every profile
        (``seeds`` under the main ones, ``other_seeds`` elsewhere), the ``once`` agents under the first
        main profile, every other preset under each main profile (``preset_seeds``); under a profile of
        ``judge_seeds``, its seeds instead; and the ``extra`` cells (each agent under each of its profiles
        only). The single source of completeness."""
        out = []
        outside = {a for agents, _ in self.extra for a in agents}
        for a in presets:
            if a in outside:
                continue
            if a in self.once:
                out.append((a, self.mains[0], self.judge_seeds.get(self.mains[0], self.seeds)))
            elif a in self.core:
                out += [(a, n, self.judge_seeds.get(n, self.seeds if n in self.mains else self.other_seeds))
                        for n in self.noise]
            else:
                out += [(a, n, self.judge_seeds.get(n, self.preset_seeds or self.seeds)) for n in self.mains]
        out += [(a, n, self.judge_seeds.get(n, self.seeds if n in self.mains else self.other_seeds))
                for agents, profiles in self.extra for a in agents if a in presets for n in profiles]
        order = {n: i for i, n in enumerate((*self.mains, *(n for n in self.noise if n not in self.mains)))}
        return sorted(out, key=lambda cell: (order[cell[1]], presets.index(cell[0])))

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
    mains = [data["main"]] if not problems and isinstance(data["main"], str) else data.get("main") or []
    if not problems and any(m not in data["noise"] for m in mains):
        problems.append(SpecError(f"expected one of the board's profiles {data['noise']} (or a list of them)", file=str(path),
                                  line=line_of(lines, "main"), field="main"))
    named = [*data.get("judge_seeds", {}), *(n for cell in data.get("extra", ()) for n in cell["noise"])] if not problems else []
    if any(n not in data["noise"] for n in named):
        problems.append(SpecError(f"expected judge profiles of the board {data['noise']}, got "
                                  f"{sorted(set(named) - set(data['noise']))}", file=str(path),
                                  line=line_of(lines, "judge_seeds" if "judge_seeds" in data else "extra"), field="judge_seeds/extra"))
    named = [*data.get("controls", {}), *(a for c in data.get("controls", {}).values() for a in c)] if not problems else []
    if any(a not in data["core"] for a in named):
        problems.append(SpecError(f"expected core agents {data['core']}, got {sorted(set(named) - set(data['core']))}",
                                  file=str(path), line=line_of(lines, "controls"), field="controls"))
    if problems:
        raise problems[0]
    main = data["main"] if isinstance(data["main"], str) else tuple(data["main"])
    return Protocol(str(data.get("name", path.stem)), data["version"], dict(data["settings"]), data["seeds"],
                    tuple(data["noise"]), main, data["other_seeds"], tuple(data["core"]), data.get("preset_seeds"),
                    tuple(data.get("once", ())), tuple(data.get("presets", ())), dict(data.get("judge_seeds", {})),
                    tuple((tuple(c["agents"]), tuple(c["noise"])) for c in data.get("extra", ())),
                    {a: tuple(c) for a, c in data.get("controls", {}).items()}, str(data.get("description", "")), path)
