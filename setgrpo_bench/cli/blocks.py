"""``blocks``: what the training batches looked like as a run went on — any logged metric per block of steps,
mean ± SE over runs (by default the judge's grade, the true score and the answers' length, which together
show a judge being over-optimised)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .common import console

METRICS = ("reward", "true_score", "response_tokens")


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("blocks", help="logged metrics of the training batches per block of steps, "
                                 "mean ± SE over runs")
    parser.add_argument("runs", nargs="+", help="run folders (seeds of one agent under one judge) or a folder holding them")
    parser.add_argument("--metric", nargs="+", default=list(METRICS),
                        help=f"metrics of metrics.jsonl to show (default: {' '.join(METRICS)})")
    parser.add_argument("--block", type=int, default=20, help="steps per block")
    parser.add_argument("--out", help="also write the blocks as JSON here")
    parser.set_defaults(func=_blocks)


def _cell(row: dict) -> str:
    return f"{row['mean']:.3f} ± {row['se']:.3f}" if row["runs"] > 1 else f"{row['mean']:.3f}"


def _blocks(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..harness.overoptimisation import metric_blocks
    from ..harness.rundir import read_metrics, write_json
    from ..leaderboard.submission import run_folders

    if args.block < 1:
        raise ConfigError("--block", args.block, "a positive number of steps")
    runs = run_folders(args.runs)
    records = [read_metrics(r / "metrics.jsonl").records for r in runs]
    metrics = list(dict.fromkeys(args.metric))  # each once, in the order given
    blocks = {key: metric_blocks(records, key, block=args.block) for key in metrics}
    if unlogged := [key for key, rows in blocks.items() if not rows]:
        logged = sorted({k for rows in records for row in rows for k, v in row.items()
                         if isinstance(v, int | float) and k != "step"})
        raise ConfigError("--metric", unlogged, f"metrics the runs log: {', '.join(logged)}")
    table = Table(title=f"{len(runs)} runs: the training batches per {args.block} steps (mean ± SE over runs)")
    for column in ("steps", "runs", *metrics):
        table.add_column(column, justify="right")
    for first in sorted({row["first_step"] for rows in blocks.values() for row in rows}):
        rows = {key: next((row for row in blocks[key] if row["first_step"] == first), None) for key in metrics}
        held = [row for row in rows.values() if row]
        table.add_row(f"{first}–{max(row['last_step'] for row in held)}", str(max(row["runs"] for row in held)),
                      *(_cell(row) if row else "—" for row in rows.values()))
    Console(soft_wrap=False).print(table)
    if args.out:
        write_json(Path(args.out), {"runs": [str(r) for r in runs], "block": args.block, "metrics": blocks})
        console.print(f"written: {args.out}")
    return 0
