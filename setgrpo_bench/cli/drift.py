"""``drift``: whether SetGRPO's certificate held as the policy moved — the reversal of audited accepted
groups against the reference per block of steps and by the calibration window's age, pooled over runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .common import console


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("drift", help="SetGRPO's reversal of accepted groups per block of steps and by "
                                 "window age, pooled over runs, each block tested against α (Holm over blocks)")
    parser.add_argument("runs", nargs="+", help="run folders (seeds of one agent under one judge) or a folder holding them")
    parser.add_argument("--alpha", type=float, help="the risk level tested (default: the runs' own α)")
    parser.add_argument("--min-groups", dest="min_groups", type=int, default=25,
                        help="audited accepted groups a block needs to be tested")
    parser.add_argument("--out", help="also write the pooled blocks, ages and tests as JSON here")
    parser.set_defaults(func=_drift)


def _rate(row: dict) -> str:
    if row["reversal_ref"] is None:
        return "—"
    return f"{row['reversal_ref']:.3f} [{row['reversal_ref_low']:.3f}, {row['reversal_ref_high']:.3f}]"


def _drift(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..harness.pooled import drift_diagnostics, pool_drift, pool_seeds, summarise_diagnostics
    from ..harness.rundir import read_json, read_metrics, write_json
    from ..leaderboard.submission import run_folders
    from ..leaderboard.verdicts import certificate_by_block

    runs = run_folders(args.runs)
    alphas = {read_json(r / "config.json")["config"].get("alpha") for r in runs}
    if args.alpha is None and len(alphas) != 1:
        raise ConfigError("--alpha", None, f"a level: the runs' own α differ ({sorted(map(str, alphas))})")
    alpha = args.alpha if args.alpha is not None else alphas.pop()
    metrics = [read_metrics(r / "metrics.jsonl").records for r in runs]
    pooled = pool_drift(drift_diagnostics(m) for m in metrics)
    if not pooled:
        raise ConfigError("runs", [str(r) for r in runs], "SetGRPO runs (runs that log audited accepted groups)")
    tests = {b["first_step"]: b for b in certificate_by_block(pooled["blocks"], alpha=alpha, min_groups=args.min_groups)}
    whole = pool_seeds(summarise_diagnostics(m) for m in metrics)
    table = Table(title=f"{len(runs)} runs: reversal of audited accepted groups against the reference (α = {alpha:g})")
    for column in ("steps", "groups", "reversal [95% CI]", "p(> α), Holm"):
        table.add_column(column, justify="right")
    for b in pooled["blocks"]:
        test = tests.get(b["first_step"])
        verdict = f"{test['p_adjusted']:.3f}" + ("" if test["held"] else " above α") if test else "untested"
        table.add_row(f"{b['first_step']}–{b['last_step']}", str(b["n_audited_accepted"]), _rate(b), verdict)
    table.add_row("all", str(whole["n_audited_accepted"]), _rate(whole), "")
    Console(soft_wrap=False).print(table)
    if pooled["ages"]:
        ages = Table(title="by the calibration window's mean age (steps)")
        for column in ("age", "groups", "reversal [95% CI]"):
            ages.add_column(column, justify="right")
        for row in pooled["ages"]:
            span = f"≥ {row['min_age']}" if row["max_age"] is None else f"{row['min_age']}–{row['max_age']}"
            ages.add_row(span, str(row["n_audited_accepted"]), _rate(row))
        Console(soft_wrap=False).print(ages)
    if args.out:
        write_json(Path(args.out), {"runs": [str(r) for r in runs], "alpha": alpha, "pooled": whole, **pooled,
                                    "tests": list(tests.values())})
        console.print(f"written: {args.out}")
    return 0
