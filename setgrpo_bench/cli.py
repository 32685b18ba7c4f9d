"""Command line: ``python -m setgrpo_bench <command>``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from .catalog import add_catalog
from .envs import load_env_benchmark, register_catalog, registered_env_ids
from .errors import SetgrpoBenchError
from .tasks.benchmark import SPLITS, validate_benchmark

console = Console()


def _envs_list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    table = Table(title="Registered environments")
    for column in ("id", "domain", "train", "calib", "eval", "noise"):
        table.add_column(column)
    for env_id in registered_env_ids():
        kwargs = gym.spec(env_id).kwargs
        sizes = kwargs["split_sizes"]
        table.add_row(env_id, kwargs["domain"], *(str(sizes[s]) for s in SPLITS), kwargs["noise"])
    console.print(table)
    return 0


def _envs_show(args: argparse.Namespace) -> int:
    name = args.id.removeprefix("setgrpo/").rsplit("-v", 1)[0]
    benchmark = load_env_benchmark(name)
    task = benchmark.instance(args.split, args.index)
    if args.json:
        print(json.dumps(task.to_dict(), indent=2, ensure_ascii=False))
        return 0
    console.print(f"[bold]{benchmark.name}[/] ({benchmark.domain}): {benchmark.description}")
    console.print(f"[bold]{task.id}[/]\n{task.prompt_text}\n")
    table = Table(title="Rubric")
    for column in ("id", "category", "points", "criterion"):
        table.add_column(column)
    for c in task.rubric:
        table.add_row(c.id, c.category, f"{c.points:g}", c.text)
    console.print(table)
    return 0


def _envs_validate(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.paths:
        problems = validate_benchmark(path)
        if problems:
            failed += 1
            console.print(f"[red]✗ {path}: {len(problems)} problem(s)[/]")
            for problem in problems:
                console.print(f"  {problem}", markup=False)
        else:
            console.print(f"[green]✓ {path}[/]")
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m setgrpo_bench", description=__doc__)
    parser.add_argument("--catalog", action="append", default=[], metavar="DIR",
                        help="extra catalog folder with envs/, agents/, graders/ (repeatable)")
    commands = parser.add_subparsers(dest="command", required=True)

    envs = commands.add_parser("envs", help="list, show and validate environments").add_subparsers(dest="action", required=True)
    envs.add_parser("list", help="list registered environments").set_defaults(func=_envs_list)
    show = envs.add_parser("show", help="show one task instance and its rubric")
    show.add_argument("id", help="env id (setgrpo/Name-v0) or benchmark name")
    show.add_argument("--split", default="eval", choices=SPLITS)
    show.add_argument("--index", type=int, default=0)
    show.add_argument("--json", action="store_true", help="print the instance as JSON")
    show.set_defaults(func=_envs_show)
    validate = envs.add_parser("validate", help="check benchmark specs; prints every problem")
    validate.add_argument("paths", nargs="+", help="benchmark.yaml files or their folders")
    validate.set_defaults(func=_envs_validate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        for folder in args.catalog:
            add_catalog(folder)
        if args.catalog:
            register_catalog()
        return int(args.func(args))
    except SetgrpoBenchError as exc:
        console.print(f"[red]error:[/] {exc}", markup=True, highlight=False)
        return 2


if __name__ == "__main__":
    sys.exit(main())
