"""``run``: train an agent and evaluate it on held-out instances; Ctrl-C or SIGTERM ends it with the
command that continues it."""

from __future__ import annotations

import argparse
import shlex
import signal
import threading

from .common import add_overrides, agents_help, catalog_flag, config_from, console


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM during a run: the run stops where it is, its last checkpoint intact."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _interrupt(signum: int, _frame: object) -> None:
    raise Interrupted(signum)


def add_parser(commands: argparse._SubParsersAction, agent: str) -> None:
    parser = commands.add_parser("run", help="train an agent and evaluate it on held-out instances", parents=[catalog_flag()])
    parser.add_argument("--agent", default="grpo", help=agents_help("grpo"))
    parser.add_argument("--suite", choices=["builtin"], help="train and evaluate on the whole built-in suite")
    parser.add_argument("--out", help="run directory (default runs/<agent>-seed<seed>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    parser.add_argument("--overwrite", action="store_true", help="replace the run in --out")
    add_overrides(parser, agent or "grpo")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..harness import run
    from ..harness.rundir import RunDir

    config = config_from(args)
    out = args.out or f"runs/{config.run.agent}-seed{config.run.seed}"
    main_thread = threading.current_thread() is threading.main_thread()  # only it may set signal handlers
    handlers = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)} if main_thread else {}
    try:
        run(config, out, resume=args.resume, overwrite=args.overwrite, console=console)
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        newest = RunDir(out).checkpoint_candidates()[:1]
        kept = f"keeps its checkpoint of step {int(newest[0].name.removeprefix('step_'))}" if newest else "has no checkpoint yet"
        again = shlex.join(["python", "-m", "setgrpo_bench", *args.argv, *([] if args.resume else ["--resume"])])
        console.print(f"interrupted ({signal.Signals(signum).name}): {out} {kept}; continue with: {again}",
                      markup=False, highlight=False, soft_wrap=True)
        return 128 + int(signum)
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    console.print(f"run directory: {out}")
    return 0
