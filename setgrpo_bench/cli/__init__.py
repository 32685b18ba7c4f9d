"""Command line: ``python -m setgrpo_bench <command>``. One module per command, its parser beside its
handler (``run.py``, ``sweep.py``, ``leaderboard.py`` …); every heavy import happens inside a handler,
so ``--help`` answers without torch."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..catalog import add_catalog
from ..errors import SetgrpoBenchError
from . import (
    blocks,
    build,
    diagnose,
    drift,
    envs,
    evaluate,
    judges,
    leaderboard,
    run,
    serve_judge,
    sweep,
)
from .common import CATALOG_HELP, console


def _early(argv: Sequence[str]) -> argparse.Namespace:
    """The flags that shape the parser itself, wherever they are: catalogs and the agent."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--catalog", action="append", default=[])
    early.add_argument("--agent")
    return early.parse_known_args(list(argv))[0]



def build_parser(agent: str | None = None) -> argparse.ArgumentParser:
    """The CLI; ``agent`` (the ``--agent`` of the command line) sets the defaults its help shows."""
    parser = argparse.ArgumentParser(prog="python -m setgrpo_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--catalog", action="append", default=[], metavar="DIR", help=CATALOG_HELP)
    commands = parser.add_subparsers(dest="command", required=True)
    envs.add_parser(commands)
    run.add_parser(commands, agent)
    diagnose.add_parser(commands, agent)
    drift.add_parser(commands)
    blocks.add_parser(commands)
    sweep.add_parser(commands)
    leaderboard.add_parser(commands)
    serve_judge.add_parser(commands)
    build.add_judge_parser(commands)
    build.add_policy_parser(commands)
    evaluate.add_parser(commands)
    judges.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # read by transformers and huggingface_hub when a command first imports them (not before: ``--help``
    # and the light commands never import transformers)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    argv = sys.argv[1:] if argv is None else list(argv)
    early = _early(argv)
    try:
        for folder in early.catalog:
            add_catalog(folder)
        if early.catalog:
            from ..envs.registration import register_catalog

            register_catalog()
        args = build_parser(early.agent).parse_args(argv)
        args.argv = argv
        return int(args.func(args))
    except SetgrpoBenchError as exc:
        console.print(f"[red]error:[/] {exc}", markup=True, highlight=False, soft_wrap=True)
        return int(getattr(exc, "exit_status", 2))  # 3: another process writes the run folder (``RunLockedError``)
