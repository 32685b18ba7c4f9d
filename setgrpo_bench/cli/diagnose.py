"""``diagnose``: SetGRPO's coverage and risk measured on sampled groups, without training."""

from __future__ import annotations

import argparse

from .common import (
    add_overrides,
    agents_help,
    catalog_flag,
    config_from,
    console,
    floats,
)


def add_parser(commands: argparse._SubParsersAction, agent: str) -> None:
    parser = commands.add_parser("diagnose", help="measure SetGRPO's coverage and risk on sampled groups, no training",
                                 parents=[catalog_flag()])
    parser.add_argument("--agent", default="setgrpo", help="a SetGRPO preset: " + agents_help("setgrpo"))
    parser.add_argument("--groups", type=int, default=192, help="non-constant groups to sample and audit")
    parser.add_argument("--alphas-a", type=floats, default=[0.05, 0.1, 0.2, 0.3, 0.4, 0.5],
                        help="miscoverage levels α_a of the coverage curve")
    parser.add_argument("--alphas", type=floats, default=[0.05, 0.1, 0.15, 0.2, 0.3],
                        help="risk levels α of the risk curve")
    parser.add_argument("--repeats", type=int, default=200, help="random splits per level")
    parser.add_argument("--compare", help="comma-separated SetGRPO presets whose gates are compared on the same groups "
                                          "(stalled steps, acceptance, chosen α_a, reversal rates, retained alignment)")
    parser.add_argument("--compare-geometry", help="comma-separated geometries (identity, last:N, sketch:D) whose "
                                                   "decisions are compared with the run's exact K on the same groups "
                                                   "(agreement, mean |Δλ*|, acceptance, reversal under the exact K)")
    parser.add_argument("--out", help="output folder (default runs/diagnose-<agent>-seed<seed>)")
    add_overrides(parser, agent or "setgrpo")
    parser.set_defaults(func=_diagnose)


def _diagnose(args: argparse.Namespace) -> int:
    from ..harness.diagnose import diagnose

    config = config_from(args)
    out = args.out or f"runs/diagnose-{config.run.agent}-seed{config.run.seed}"
    from ..agents import resolve_config

    compare = {name: resolve_config(name, {"noise": config.grading.noise}).setgrpo
               for name in (args.compare or "").split(",") if name.strip()}
    diagnose(config, n_groups=args.groups, alphas_a=args.alphas_a, alphas=args.alphas, repeats=args.repeats,
             out=out, console=console, compare=compare,
             geometries=[g.strip() for g in (args.compare_geometry or "").split(",") if g.strip()])
    console.print(f"diagnostics: {out}/diagnose.json, {out}/diagnose.png")
    return 0
