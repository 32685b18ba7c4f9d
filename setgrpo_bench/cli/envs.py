"""``envs list | show | validate``: the registered environments, one instance with its rubric, and
every problem of a benchmark spec."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from ..tasks.benchmark import SPLITS
from .common import console


def add_parser(commands: argparse._SubParsersAction) -> None:
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


def _envs_list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from ..envs import registered_env_ids

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
    from ..envs import load_env_benchmark

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
    from ..tasks.loading import benchmark_warnings, validate_benchmark

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
            for warning in benchmark_warnings(path):
                console.print(f"  [yellow]warning:[/] {warning}", highlight=False)
    return 1 if failed else 0
