"""``leaderboard build | show | audit`` and ``publish``: a board from its entries, and entries from runs."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from .common import console


def add_parser(commands: argparse._SubParsersAction) -> None:
    board = commands.add_parser("leaderboard", help="build or show the leaderboard").add_subparsers(dest="action", required=True)
    for action, text in (("build", "write <board>/README.md and index.html from <board>/results/*.json"),
                         ("show", "print the leaderboard table")):
        parser = board.add_parser(action, help=text)
        parser.add_argument("--board", default="leaderboard", help="board folder (holds results/)")
        parser.set_defaults(func=_leaderboard)
    audit = board.add_parser("audit", help="re-execute seeds of entries drawn now and compare them with their "
                                           "records (an entry whose runs do not reproduce is rejected)")
    audit.add_argument("--board", default="leaderboard", help="board folder (holds results/ and runs/)")
    audit.add_argument("--entry", action="append", metavar="NAME", help="an entry to audit (repeatable; default: every entry)")
    audit.add_argument("--seeds-per-entry", dest="seeds_per_entry", type=int, default=1,
                       help="seeds drawn at random per entry, now, from system entropy")
    audit.add_argument("--seed", type=int, action="append", help="audit this seed instead of drawing (repeatable)")
    audit.add_argument("--quick", type=int, metavar="N", help="compare only the initial evaluation and the first N "
                                                              "steps' metrics (seconds, not a whole run)")
    audit.add_argument("--work", help="keep the re-executed runs in this folder (default: a temporary one)")
    audit.add_argument("--unaudited", action="store_true",
                       help="only the entries whose current runs no full audit has re-executed yet (a board filling up)")
    audit.set_defaults(func=_audit)
    publish = commands.add_parser("publish", help="validate runs (or a sweep) and add them to the board")
    publish.add_argument("runs", nargs="+", help="run folders or a sweep folder")
    publish.add_argument("--name", help="submission name (default <agent>-<noise>-<suite hash>)")
    publish.add_argument("--board", default="leaderboard", help="board folder (holds results/)")
    publish.add_argument("--command", help="the command that produced the runs, recorded on the board")
    publish.add_argument("--replace", action="store_true", help="replace the submission of the same name (e.g. more seeds)")
    publish.add_argument("--protocol", default="board-v3",
                         help="the board's protocol: runs made under another one are refused ('' accepts any)")
    publish.add_argument("--ready", action="store_true",
                         help="RUNS is one `sweep --agents board` folder: publish each cell of --protocol's board whose "
                              "seeds have all finished and that the board lacks (one entry per cell)")
    publish.set_defaults(func=_publish)


def _leaderboard(args: argparse.Namespace) -> int:
    from ..leaderboard import (
        board_frame,
        build_board,
        load_board,
        noise_order,
        summary_frame,
    )

    apart = []
    if args.action == "build":
        frame, rejected = build_board(args.board)
        console.print(f"wrote {args.board}/README.md and {args.board}/index.html ({len(frame)} ranked submissions)")
    else:  # show reads the board and writes nothing
        submissions, rejected = load_board(args.board)
        frame = board_frame([s for s in submissions if s["verified"]])
        apart = [s["name"] for s in submissions if not s["verified"]]
    if args.action == "show" and not frame.empty:
        for profile in sorted(set(frame["noise"]), key=noise_order):
            shown = summary_frame(frame[frame["noise"] == profile])
            table = Table(title=f"{args.board}: {profile} judge ({len(shown)} submissions)",
                          caption="* oracle: trained on the true score, unranked; cover/risk: SetGRPO's coverage and "
                                  "reversal rate w.r.t. the reference / the true score; more in README.md")
            for column in shown.columns:  # agent names and scores are never cut; the other columns wrap
                table.add_column(column, justify="left" if column == "agent" else "right", no_wrap=True)
            for row in shown.astype(str).values.tolist():
                table.add_row(*row)
            Console(soft_wrap=False).print(table)
    if apart:
        console.print(f"not ranked (runs not on the board): {', '.join(apart)}", highlight=False)
    for file, reason in rejected:
        console.print(f"[yellow]rejected[/] {file}: {reason}", markup=True, highlight=False)
    return 0


def _audit(args: argparse.Namespace) -> int:
    from ..leaderboard import build_board
    from ..leaderboard.audit import (
        NOT_REPRODUCED,
        AuditError,
        audit_entry,
        describe,
        entries,
        failure,
        fully_audited,
        keep_audit,
    )

    failed = 0
    for entry in entries(args.board, args.entry or ()):
        if args.unaudited and fully_audited(entry, args.board):
            continue
        try:
            audit = audit_entry(entry, args.board, seeds=args.seed, count=args.seeds_per_entry, steps=args.quick,
                                work=args.work)
        except AuditError as exc:
            console.print(f"[yellow]not audited[/] {entry['name']}: {exc}", highlight=False)
            continue
        keep_audit(args.board, entry["name"], audit)
        failed += audit["result"] == NOT_REPRODUCED
        console.print(f"[red]{entry['name']}[/]: {failure(audit)}" if audit["result"] == NOT_REPRODUCED else
                      f"{entry['name']}: {describe(audit)} in {audit['seconds']:.0f} s", highlight=False)
    build_board(args.board)
    console.print(f"audits kept in {args.board}/audits/; the board rebuilt", highlight=False)
    return 1 if failed else 0


def _publish(args: argparse.Namespace) -> int:
    from ..agents.protocol import load_protocol
    from ..errors import ConfigError
    from ..leaderboard import publish
    from ..leaderboard.publishing import ready_cells

    command = "python -m setgrpo_bench publish " + " ".join(args.runs)
    protocol = load_protocol(args.protocol) if args.protocol else None
    batches = [args.runs]
    if args.ready:
        if protocol is None or len(args.runs) != 1 or args.name:
            raise ConfigError("ready", True, "one sweep folder, a --protocol and no --name",
                              "Give `publish SWEEP_FOLDER --ready --protocol NAME`.")
        batches = ready_cells(args.runs[0], args.board, protocol)
        command = f"python -m setgrpo_bench sweep --protocol {protocol.name} --agents board --jobs 2 --out {args.runs[0]}"
        console.print(f"{len(batches)} cells of {protocol.id} ready in {args.runs[0]}")
    for runs in batches:
        for path in publish(runs, args.board, name=args.name, command=args.command or command, replace=args.replace,
                            protocol=protocol.id if protocol else None):
            console.print(f"published {path}")
    return 0
