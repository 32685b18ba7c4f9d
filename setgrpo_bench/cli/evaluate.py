"""``evaluate``: the held-out evaluation of any policy (e.g. one trained with TRL), as ``run`` evaluates."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import RenamedFlag, catalog_flag, config_from, console, flags


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ..agents.config import FIELDS

    parser = commands.add_parser("evaluate", help="held-out evaluation of a policy (e.g. trained with TRL)",
                                 parents=[catalog_flag()])
    parser.add_argument("--agent", default="grpo", help=argparse.SUPPRESS)
    parser.add_argument("--suite", choices=["builtin"], help="evaluate on the whole built-in suite")
    parser.add_argument("--out", help="output folder (default runs/evaluate-<policy>-seed<seed>)")
    for name in ("policy", "envs", "eval_instances", "noise", "judge", "judge_url", "judge_model", "judge_api_key_env",
                 "judge_profile", "seed", "device", "engine", "temperature", "top_p", "max_new_tokens", "threads"):
        f = FIELDS[name]
        parser.add_argument(*flags(name), dest=name, metavar=type(f.default).__name__.upper(), action=RenamedFlag,
                            help=f"{f.description} (default {f.default!r})".replace("%", "%%"))
    parser.set_defaults(func=_evaluate)


def _evaluate(args: argparse.Namespace) -> int:
    from ..harness.runner import evaluate_policy

    config = config_from(args)
    out = args.out or f"runs/evaluate-{Path(str(config.rollout.policy)).name}-seed{config.run.seed}"
    evaluate_policy(config, out, console=console)
    console.print(f"evaluation: {out}/eval.json")
    return 0
