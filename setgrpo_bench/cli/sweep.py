"""``sweep``: every (agent, judge profile, seed) of a comparison, resumable, in parallel processes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .common import add_overrides, catalog_flag, console

if TYPE_CHECKING:
    from ..agents.protocol import Protocol


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ..agents.presets import preset_paths

    parser = commands.add_parser("sweep", help="run every (agent, judge profile, seed), resumable, in parallel processes",
                                 parents=[catalog_flag()], allow_abbrev=False)  # --seed is not --seeds
    parser.add_argument("--agents", required=True, help="comma-separated agent presets, or 'board': every cell of "
                        "--protocol's complete board at its seeds (0 … k − 1); of: " + ", ".join(sorted(preset_paths())))
    parser.add_argument("--seeds", help="a count (5 → seeds 0..4) or comma-separated seeds (default: the protocol's, else 5)")
    parser.add_argument("--jobs", type=int, default=1, help="local backend: runs at once (each gets cores / jobs threads)")
    parser.add_argument("--backend", choices=["local", "ray"], default="local",
                        help="local processes, or Ray tasks (the [ray] extra)")
    parser.add_argument("--address", help="ray: the cluster to join (default: a local Ray started for the sweep)")
    parser.add_argument("--cpus-per-run", type=int, default=1, help="ray: CPUs (and torch threads) of each run")
    parser.add_argument("--gpus-per-run", type=float, default=0.0, help="ray: GPUs of each run")
    parser.add_argument("--out", default="runs/sweep", help="sweep folder: <out>/<noise>/<agent>/seed<k>/")
    parser.add_argument("--board", default="leaderboard",
                        help="with --agents board: the board whose entries made under --protocol are not run again "
                        "(default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true",
                        help="run nothing: print the runs left (not finished in --out) and their CPU-hours, estimated "
                        "from recorded runs' timings")
    parser.add_argument("--timings", action="append",
                        help="--dry-run: folders of recorded runs to price from, at any depth (default: leaderboard)")
    add_overrides(parser, "grpo", skip=("seed",))  # seeds come from --seeds; --train-judge takes a comma-separated list
    parser.set_defaults(func=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    from ..agents.config import FIELDS
    from ..agents.protocol import load_protocol
    from ..harness.sweep import RayBackend, parse_seeds, sweep

    overrides = {name: getattr(args, name) for name in FIELDS if name not in ("agent", "seed", "noise", "threads")
                 and getattr(args, name, None) is not None}
    protocol = load_protocol(args.protocol) if args.protocol else None
    noises = [n.strip() for n in args.noise.split(",") if n.strip()] if args.noise else (
        list(protocol.noise) if protocol else ["realistic"])
    seeds = parse_seeds(args.seeds or (str(protocol.seeds) if protocol else "5"))
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    cells = []
    if agents == ["board"]:
        cells = _board_cells(protocol, args.board)
        if not cells:
            return 0  # the board holds every cell
    if args.dry_run:
        return _dry_run(agents, noises, seeds, overrides, args, cells)
    backend = RayBackend(args.address, args.cpus_per_run, args.gpus_per_run) if args.backend == "ray" else None
    result = sweep(agents, seeds, args.out, noises=noises, overrides=overrides, jobs=args.jobs, backend=backend,
                   threads=args.threads, console=console, cells=cells)
    failed = sum(r["status"] not in ("done", "skipped (finished before)") for r in result)
    console.print(f"{len(result) - failed} of {len(result)} runs finished; status in {args.out}/sweep.json")
    return 1 if failed else 0


def _board_cells(protocol: Protocol | None, board: str) -> list[tuple[str, str, int]]:
    """``--agents board``: every cell of the protocol's complete board (``Protocol.cells``) that ``board``
    does not hold yet: a published cell's runs live in the board, so a sweep resumed where its folder is
    gone (a fresh clone) does not make them again."""
    from ..agents.presets import board_presets
    from ..errors import ConfigError
    from ..leaderboard.publishing import held_cells

    if protocol is None:
        raise ConfigError("agents", "board", "a protocol's complete board, named with --protocol", "Add --protocol NAME.")
    cells = protocol.cells(board_presets(protocol))
    held = held_cells(board, protocol.id)
    if held:
        console.print(f"{sum((a, n) in held for a, n, _ in cells)} of {len(cells)} cells of {protocol.id} are on "
                      f"{board} already: not run")
    return [(agent, noise, k) for agent, noise, k in cells if (agent, noise) not in held]


def _dry_run(agents: list[str], noises: list[str], seeds: list[int], overrides: dict, args: argparse.Namespace,
             cells: list[tuple[str, str, int]]) -> int:
    """The price of the runs the sweep has left (``harness/price.py``; a run whose ``eval.json`` is in
    ``--out`` is skipped on resume, so it costs nothing): a row per (agent, judge), its total, and the
    wall time at ``--jobs`` runs at once."""
    from collections import Counter

    from rich.table import Table

    from ..agents.presets import resolve_config
    from ..harness.price import measured_runs, price
    from ..harness.sweep import plan

    specs = plan(agents, noises, seeds, Path(args.out), overrides, cells)  # every agent, judge and override validated
    left = [spec for spec in specs if not spec.finished]
    runs = Counter((spec.agent, spec.noise) for spec in left)
    cells = [(agent, noise, k, resolve_config(agent, {**overrides, "noise": noise, "seed": 0}).to_dict())
             for (agent, noise), k in runs.items()]
    roots = args.timings or [p for p in ("leaderboard",) if Path(p).is_dir()]
    measured = measured_runs(roots)
    rows = price(cells, measured)
    table = Table(title=f"sweep --dry-run: priced from {len(measured)} recorded runs in {', '.join(roots) or '(none)'}")
    for column in ("agent", "judge", "runs", "CPU-min per run", "CPU-hours", "estimated from"):
        table.add_column(column, justify="left" if column in ("agent", "judge", "estimated from") else "right")
    for r in rows:
        table.add_row(r["agent"], r["noise"], str(r["runs"]), f"{r['cpu_seconds_per_run'] / 60:.1f}", f"{r['cpu_hours']:.2f}",
                      r["source"])
    total = sum(r["cpu_hours"] for r in rows)
    console.print(table)
    finished = f" ({len(specs) - len(left)} of {len(specs)} finished in {args.out})" if len(left) < len(specs) else ""
    console.print(f"{len(left)} runs left{finished}, {total:.1f} CPU-hours: about {total / args.jobs:.1f} hours "
                  f"at --jobs {args.jobs} (one thread each)")
    return 0
