"""What every command shares: the console, the ``--catalog`` flag, the run config from the flags, and one
flag per config field."""

from __future__ import annotations

import argparse

from rich.console import Console

from ..errors import SetgrpoBenchError

console = Console(soft_wrap=True)  # messages stay whole lines when piped or in a narrow terminal


CATALOG_HELP = "extra catalog folder with envs/, agents/, graders/, protocols/ (repeatable; before or after the command)"


def catalog_flag() -> argparse.ArgumentParser:
    """``--catalog`` accepted after the command too (its values are read before parsing, see ``main``)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--catalog", action="append", default=argparse.SUPPRESS, metavar="DIR", help=CATALOG_HELP)
    return parent


def config_from(args: argparse.Namespace):
    from ..agents.config import FIELDS
    from ..agents.presets import resolve_config

    overrides = {name: getattr(args, name) for name in FIELDS if name != "agent" and getattr(args, name, None) is not None}
    if getattr(args, "suite", None):
        overrides["envs"] = args.suite
    return resolve_config(args.agent, overrides)


def floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def add_overrides(parser: argparse.ArgumentParser, agent: str, *, skip: tuple[str, ...] = ()) -> None:
    """One flag per config field, grouped by component; the defaults shown are those of ``agent``. (Built by
    hand: transformers' ``HfArgumentParser`` would do it from the dataclasses, but importing it takes
    0.49 s, as long as the whole ``--help`` without it.)"""
    from ..agents.config import GROUPS
    from ..agents.presets import load_preset

    try:
        preset = load_preset(agent)
    except SetgrpoBenchError:
        preset = {}  # an unknown agent is reported when the command runs
    for group_name, group in GROUPS.items():
        overrides = parser.add_argument_group(f"overrides of the preset: {group_name} ({group.__doc__.rstrip('.')})")
        for name, f in group.__pydantic_fields__.items():
            if name != "agent" and name not in skip:
                shown = preset.get(name, f.default)
                overrides.add_argument(*flags(name), dest=name, metavar=type(f.default).__name__.upper(),
                                       action=RenamedFlag, help=f"{f.description} (default for {agent}: {shown!r})"
                                       .replace("%", "%%") + (f"; {flags(name)[1]} is its old name" if name in RENAMED else ""))


RENAMED = {"noise": "train-judge"}
"""Settings whose flag is named for what it selects; the old flag (``--noise``) still works, with a note."""


def flags(name: str) -> list[str]:
    """The flags of setting ``name``: its name, then the old one it replaces."""
    old = f"--{name.replace('_', '-')}"
    return [f"--{RENAMED[name]}", old] if name in RENAMED else [old]


class RenamedFlag(argparse.Action):
    """Stores the value; given under a setting's old flag, says the new one (once, on stderr)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        if option_string is not None and option_string != self.option_strings[0]:
            Console(stderr=True, soft_wrap=True).print(
                f"note: {option_string} is deprecated: use {self.option_strings[0]} (the same setting)",
                style="yellow", highlight=False)
        setattr(namespace, self.dest, values)


def agents_help(default: str) -> str:
    from ..agents.presets import preset_paths

    return f"agent preset, one of: {', '.join(sorted(preset_paths()))} (default {default})"
