"""``build-policy`` and ``build-judge``: rebuild the embedded policy or the learned judge from fixed seeds
(bit for bit on one machine and torch build; docs/training.md) and ship the build inside the package."""

from __future__ import annotations

import argparse

from ..errors import UnknownNameError
from .common import console


def add_policy_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("build-policy", help="rebuild the embedded tiny policy (deterministic) and ship it")
    parser.add_argument("--out", help="folder to write (default: the build shipped inside the package)")
    parser.set_defaults(func=_build_policy)


def add_judge_parser(commands: argparse._SubParsersAction) -> None:
    judge = commands.add_parser("build-judge", help="rebuild a learned judge (deterministic) and ship it")
    judge.add_argument("--profile", default="learned", help="the learned judge profile whose build to make (graders/*.yaml)")
    judge.add_argument("--out", help="folder to write (default: the profile's build shipped inside the package)")
    judge.set_defaults(func=_build_judge)


def _build_policy(args: argparse.Namespace) -> int:
    from ..policy.embedded import SHIPPED, TinyConfig, build_key
    from ..policy.tiny import build_tiny

    out = build_tiny(TinyConfig(), force=True, out=args.out or SHIPPED)
    console.print(f"built the embedded policy in {out} (key {build_key()[:16]})")
    return 0


def _build_judge(args: argparse.Namespace) -> int:
    from ..graders.kinds import model_profiles
    from ..judges.learned import build_judge
    from ..judges.learned_paths import JudgeBuildConfig, build_key, shipped_folder

    if args.profile not in model_profiles():
        raise UnknownNameError("learned judge profile", args.profile, model_profiles())
    config = JudgeBuildConfig.from_profile(model_profiles()[args.profile])
    out = build_judge(config, force=True, out=args.out or shipped_folder(args.profile, config))
    console.print(f"built the learned judge {args.profile!r} in {out} (key {build_key(config)[:16]})")
    return 0
