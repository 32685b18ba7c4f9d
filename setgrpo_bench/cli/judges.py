"""``judges measure | overoptimisation``: how each judge errs, and whether training over-optimises it."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .common import catalog_flag, config_from, console


def add_parser(commands: argparse._SubParsersAction) -> None:
    judges = commands.add_parser("judges", help="measure how each judge profile errs").add_subparsers(dest="action", required=True)
    parser = judges.add_parser("measure", help="grade the same policy samples with every profile and measure each judge",
                               parents=[catalog_flag()])
    parser.add_argument("--profiles", help="comma-separated noise profiles (default: every one in the catalog)")
    parser.add_argument("--prompts", type=int, default=64, help="train-split prompts sampled from the suite")
    parser.add_argument("--group-size", dest="group_size", type=int, default=8, help="responses per prompt")
    parser.add_argument("--policy", default="tiny", help="the policy whose responses are graded (comma-separated: "
                                                          "several, their samples pooled, --prompts each)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompts, samples and judge noise")
    parser.add_argument("--label", help="what the samples are, in words, kept with the measurements (for judges pages)")
    parser.add_argument("--out", help="also write the measurements as JSON here")
    parser.set_defaults(func=_judges_measure, agent="grpo")
    pages = judges.add_parser("pages", help="write one documentation page per judge profile from judges measure results",
                              parents=[catalog_flag()])
    pages.add_argument("measured", nargs="+", help="judges measure --out files (one table row each: whose samples)")
    pages.add_argument("--out", default="docs/judges", help="folder of the pages (default docs/judges)")
    pages.set_defaults(func=_judges_pages)
    over = judges.add_parser("overoptimisation", help="the judge's and the true score of training runs per step: "
                             "does the true score peak and fall while the judge's rises?")
    over.add_argument("runs", nargs="+", help="run folders (seeds of one agent under one judge) or a folder holding them")
    over.add_argument("--block", type=int, default=20, help="steps per block mean")
    over.add_argument("--title", help="the plot's title")
    over.add_argument("--out", help="folder for overoptimisation.json and overoptimisation.png")
    over.set_defaults(func=_judges_overoptimisation)


def _judges_measure(args: argparse.Namespace) -> int:
    from ..harness.judges import flat_measures, measure_judges
    from ..harness.rundir import write_json

    config = config_from(args)
    result = measure_judges(config, profiles=[p for p in (args.profiles or "").split(",") if p] or None,
                            prompts=args.prompts, group_size=args.group_size)
    table = Table(title=f"judges on {result['prompts']} × {result['group_size']} responses of {result['policy']} "
                        f"(seed {result['seed']})")
    columns = {"error_rms": "error RMS", "verdict_error": "verdict errors", "confidence_auroc": "confidence AUROC",
               "spread_spearman": "Spearman(σ, |err|)", "length_effect": "judge−true / 2× length",
               "gross_calls": "gross calls", "true_spearman": "Spearman(judge, true)",
               "label_accuracy": "P(yes) accuracy", "label_ece": "ECE", "label_auroc": "P(yes) AUROC",
               "feature_rate": "feature rate", "bias_share": "bias share", "cost": "cost"}
    table.add_column("profile")
    for label in columns.values():
        table.add_column(label, justify="right")
    table.add_column("best hack / perfect", justify="right")
    for name, row in result["profiles"].items():
        row = flat_measures(row)
        table.add_row(name, *("—" if k not in row else f"{row[k]:+.3f}" if k == "length_effect" else f"{row[k]:.3f}"
                              for k in columns), _hacks(row))
    Console(soft_wrap=False).print(table)
    if args.out:
        write_json(Path(args.out), {**result, **({"label": args.label} if args.label else {})})
        console.print(f"measurements: {args.out}")
    return 0


def _judges_pages(args: argparse.Namespace) -> int:
    from ..harness.judge_pages import write_judge_pages

    written = write_judge_pages(args.measured, args.out)
    console.print(f"{len(written)} judge pages written to {args.out}")
    return 0


def _hacks(row: dict) -> str:
    """The judge's score of its best hack against a perfect answer's, and whether the answer wins."""
    if "hack_table" not in row:
        return "—"
    hacks = row["hack_table"]["hacks"]
    best = max((k for k in hacks if k != "perfect answer"), key=lambda k: hacks[k]["judge_score"])
    mark = "" if row["hack_table"]["perfect_wins"] else " ✗"
    return f"{best} {hacks[best]['judge_score']:.2f} / {hacks['perfect answer']['judge_score']:.2f}{mark}"


def _judges_overoptimisation(args: argparse.Namespace) -> int:
    from ..harness.overoptimisation import curves, overoptimisation
    from ..harness.report import plot_overoptimisation
    from ..harness.rundir import write_json
    from ..leaderboard.submission import run_folders

    runs = run_folders(args.runs)
    judge, true = curves(runs)
    result = overoptimisation(judge, true, block=args.block)
    console.print(f"{len(runs)} runs, {result['steps']} steps: the true score peaks at {result['true_peak']:.3f} "
                  f"(steps {result['peak_block'] * args.block + 1}–{(result['peak_block'] + 1) * args.block}) and ends at "
                  f"{result['true_end']:.3f}: a drop of {result['drop']:.3f} ± {result['drop_se']:.3f} "
                  f"({result['drop_in_se']:.1f} SE); the judge's score rose by {result['judge_gain']:+.3f} and ends "
                  f"{result['judge_minus_true_end']:+.3f} above the true score", highlight=False)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "overoptimisation.json", result)
        plot_overoptimisation(judge, true, out / "overoptimisation.png", title=args.title or f"{len(runs)} runs", block=args.block)
        console.print(f"written: {out}/overoptimisation.json, {out}/overoptimisation.png")
    return 0
