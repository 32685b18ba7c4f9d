"""Methods from installed packages: coefficient rules, agent classes and presets (DESIGN §7).

A package adds its method under the ``setgrpo_bench.agents`` entry point group, naming a ``Plugin``,
and its presets as a catalog folder under ``setgrpo_bench.catalog`` (the group that also adds envs and
judge profiles):

    # pyproject.toml of the package
    [project.entry-points."setgrpo_bench.agents"]
    median_grpo = "median_grpo:plugin"
    [project.entry-points."setgrpo_bench.catalog"]
    median_grpo = "median_grpo:catalog"          # a folder holding agents/median_grpo.yaml

    # median_grpo/__init__.py
    plugin = Plugin(rules={"median_grpo": median_coefficients})
    catalog = Path(__file__).parent / "catalog"

``rules`` join ``COEFFICIENT_RULES`` (a preset names one with ``rule:``) and ``agents`` are ``Agent``
classes with ``from_config(config) -> Agent`` (a preset names one with ``selector:``); ``--agent``
finds the presets like the built-in ones. A run records each plugin its config uses (distribution
name, version and a hash of its source), and so does every board entry made from it.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..hashing import stable_hash

ENTRY_POINT_GROUP = "setgrpo_bench.agents"
BUILTIN_SELECTORS = ("none", "setgrpo")


@dataclass(frozen=True)
class Plugin:
    """What an installed package adds: coefficient rules by name and agent classes by selector name
    (each with ``from_config(config) -> Agent``)."""

    rules: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    agents: Mapping[str, type] = field(default_factory=dict)


@dataclass(frozen=True)
class Installed:
    """A plugin with the distribution that installed it: what a run records."""

    name: str
    version: str
    source_hash: str
    plugin: Plugin
    source: Path  # its package folder (or its one module)

    def record(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "source_hash": self.source_hash}


def _source_hash(source: Path) -> str:
    """sha256 over the plugin's files (its package folder, or its one module), path and content, so an
    entry says exactly which code made it."""
    files = [source] if source.is_file() else sorted(
        p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    root = source.parent if source.is_file() else source
    return stable_hash({str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files})


@lru_cache(maxsize=1)
def installed_plugins() -> tuple[Installed, ...]:
    """Every ``setgrpo_bench.agents`` entry point that loads and is a valid ``Plugin``. A broken one — it
    raises on import, is not a ``Plugin``, or names a selector that is built in or a rule or selector
    that another plugin took — is left out with one warning naming its package, so commands that do not
    need it work (a rule named like a built-in one is left out by ``coefficient_rules``)."""
    out: list[Installed] = []
    rules: dict[str, str] = {}  # built-in rule names are left out by ``coefficients.coefficient_rules``
    selectors = dict.fromkeys(BUILTIN_SELECTORS, "setgrpo_bench")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        name, version = (dist.metadata["Name"], dist.version) if dist is not None else (ep.name, "unknown")
        try:
            installed = _load(ep, name, version)
            for kind, seen, names in (("coefficient rule", rules, installed.plugin.rules),
                                      ("selector", selectors, installed.plugin.agents)):
                taken = [key for key in names if key in seen]
                if taken:
                    raise ConfigError(kind, taken[0], f"a name not already taken (by {seen[taken[0]]})",
                                      f"Rename it in {name}.")
        except Exception as exc:  # a plugin's own code may fail in any way  # noqa: BLE001
            warnings.warn(f"plugin {name} (entry point {ep.name!r} = {ep.value}) is not loaded: {type(exc).__name__}: "
                          f"{exc}", stacklevel=2)
            continue
        for seen, names in ((rules, installed.plugin.rules), (selectors, installed.plugin.agents)):
            seen.update(dict.fromkeys(names, name))
        out.append(installed)
    return tuple(out)


def _load(ep: Any, name: str, version: str) -> Installed:
    plugin = ep.load()
    if not isinstance(plugin, Plugin):
        raise ConfigError(f"entry point {ep.name!r}", ep.value, "a setgrpo_bench.agents.plugins.Plugin")
    top = Path(import_module(ep.module.split(".")[0]).__file__)
    source = top.parent if top.name == "__init__.py" else top
    return Installed(name, version, _source_hash(source), plugin, source)


def plugin_rules() -> dict[str, tuple[str, Callable[..., Any]]]:
    """Every installed plugin's coefficient rules: name → (distribution, rule)."""
    return {k: (p.name, v) for p in installed_plugins() for k, v in p.plugin.rules.items()}


def selectors() -> tuple[str, ...]:
    """The built-in selectors and every installed plugin's agent classes."""
    return (*BUILTIN_SELECTORS, *(k for p in installed_plugins() for k in p.plugin.agents))


def agent_class(selector: str) -> type | None:
    """A plugin's agent class for ``selector`` (None for the built-in selectors)."""
    return next((p.plugin.agents[selector] for p in installed_plugins() if selector in p.plugin.agents), None)


def plugins_used(rule: str, selector: str, presets: list[Path] = ()) -> list[dict[str, str]]:
    """What a run with this rule, selector and preset files (those outside the built-in catalog) depends
    on besides this package, as a run records it: each plugin (distribution, version, source hash), and
    each preset file that no plugin ships (its name, ``catalog file``, the file's sha256) — so a catalog
    preset that replaces a built-in one is on the record."""
    used, covered = [], set()
    for p in installed_plugins():
        shipped = {f for f in presets if p.source.is_dir() and p.source in Path(f).resolve().parents}
        if rule in p.plugin.rules or selector in p.plugin.agents or shipped:
            used.append(p.record())
        covered |= shipped
    return used + [{"name": f"preset {f.stem} ({f})", "version": "catalog file",
                    "source_hash": hashlib.sha256(f.read_bytes()).hexdigest()} for f in presets if f not in covered]
