"""Command line: ``python -m setgrpo_bench <command>``."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .catalog import add_catalog
from .envs import load_env_benchmark, register_catalog, registered_env_ids
from .errors import SetgrpoBenchError
from .harness.rundir import RunLockedError
from .tasks.benchmark import SPLITS
from .tasks.loading import benchmark_warnings, validate_benchmark

console = Console(soft_wrap=True)  # messages stay whole lines when piped or in a narrow terminal


def _envs_list(args: argparse.Namespace) -> int:
    import gymnasium as gym

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


def _config(args: argparse.Namespace):
    from .agents.config import FIELDS
    from .agents.presets import resolve_config

    overrides = {name: getattr(args, name) for name in FIELDS if name != "agent" and getattr(args, name, None) is not None}
    if getattr(args, "suite", None):
        overrides["envs"] = args.suite
    return resolve_config(args.agent, overrides)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM during a run: the run stops where it is, its last checkpoint intact."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _interrupt(signum: int, _frame: object) -> None:
    raise Interrupted(signum)


def _run(args: argparse.Namespace) -> int:
    from .harness import run
    from .harness.rundir import RunDir

    config = _config(args)
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


def _evaluate(args: argparse.Namespace) -> int:
    from .harness.runner import evaluate_policy

    config = _config(args)
    out = args.out or f"runs/evaluate-{Path(str(config.rollout.policy)).name}-seed{config.run.seed}"
    evaluate_policy(config, out, console=console)
    console.print(f"evaluation: {out}/eval.json")
    return 0


def _add_evaluate_parser(commands: argparse._SubParsersAction) -> None:
    from .agents.config import FIELDS

    parser = commands.add_parser("evaluate", help="held-out evaluation of a policy (e.g. trained with TRL)",
                                 parents=[_catalog_flag()])
    parser.add_argument("--agent", default="grpo", help=argparse.SUPPRESS)
    parser.add_argument("--suite", choices=["builtin"], help="evaluate on the whole built-in suite")
    parser.add_argument("--out", help="output folder (default runs/evaluate-<policy>-seed<seed>)")
    for name in ("policy", "envs", "eval_instances", "noise", "judge", "judge_url", "judge_model", "judge_api_key_env",
                 "judge_profile", "seed", "device", "engine", "temperature", "top_p", "max_new_tokens", "threads"):
        f = FIELDS[name]
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar=type(f.default).__name__.upper(),
                            help=f"{f.description} (default {f.default!r})".replace("%", "%%"))
    parser.set_defaults(func=_evaluate)


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _diagnose(args: argparse.Namespace) -> int:
    from .harness.diagnose import diagnose

    config = _config(args)
    out = args.out or f"runs/diagnose-{config.run.agent}-seed{config.run.seed}"
    from .agents import resolve_config

    compare = {name: resolve_config(name, {"noise": config.grading.noise}).setgrpo
               for name in (args.compare or "").split(",") if name.strip()}
    diagnose(config, n_groups=args.groups, alphas_a=args.alphas_a, alphas=args.alphas, repeats=args.repeats,
             out=out, console=console, compare=compare)
    console.print(f"diagnostics: {out}/diagnose.json, {out}/diagnose.png")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from .agents.config import FIELDS
    from .agents.protocol import load_protocol
    from .harness.sweep import RayBackend, parse_seeds, sweep

    overrides = {name: getattr(args, name) for name in FIELDS if name not in ("agent", "seed", "noise", "threads")
                 and getattr(args, name, None) is not None}
    protocol = load_protocol(args.protocol) if args.protocol else None
    noises = [n.strip() for n in args.noise.split(",") if n.strip()] if args.noise else (
        list(protocol.noise) if protocol else ["realistic"])
    seeds = parse_seeds(args.seeds or (str(protocol.seeds) if protocol else "5"))
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    backend = RayBackend(args.address, args.cpus_per_run, args.gpus_per_run) if args.backend == "ray" else None
    result = sweep(agents, seeds, args.out, noises=noises, overrides=overrides, jobs=args.jobs, backend=backend,
                   threads=args.threads, console=console)
    failed = sum(r["status"] not in ("done", "skipped (finished before)") for r in result)
    console.print(f"{len(result) - failed} of {len(result)} runs finished; status in {args.out}/sweep.json")
    return 1 if failed else 0


def _leaderboard(args: argparse.Namespace) -> int:
    from .leaderboard import board_frame, build_board, load_board, noise_order, summary_frame

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
    from .leaderboard import build_board
    from .leaderboard.audit import NOT_REPRODUCED, AuditError, audit_entry, describe, entries, failure, keep_audit

    failed = 0
    for entry in entries(args.board, args.entry or ()):
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
    from .leaderboard import publish

    command = "python -m setgrpo_bench publish " + " ".join(args.runs)
    from .agents.protocol import load_protocol

    protocol = load_protocol(args.protocol).id if args.protocol else None
    for path in publish(args.runs, args.board, name=args.name, command=args.command or command, replace=args.replace,
                        protocol=protocol):
        console.print(f"published {path}")
    return 0


def _judges_measure(args: argparse.Namespace) -> int:
    from .harness.judges import measure_judges
    from .harness.rundir import write_json

    config = _config(args)
    result = measure_judges(config, profiles=[p for p in (args.profiles or "").split(",") if p] or None,
                            prompts=args.prompts, group_size=args.group_size)
    table = Table(title=f"judges on {result['prompts']} × {result['group_size']} responses of {result['policy']} "
                        f"(seed {result['seed']})")
    columns = {"error_rms": "error RMS", "verdict_error": "verdict errors", "confidence_auroc": "confidence AUROC",
               "spread_spearman": "Spearman(σ, |err|)", "length_effect": "judge−true / 2× length",
               "gross_calls": "gross calls", "cost": "cost"}
    table.add_column("profile")
    for label in columns.values():
        table.add_column(label, justify="right")
    for name, row in result["profiles"].items():
        table.add_row(name, *(f"{row[k]:+.3f}" if k == "length_effect" else f"{row[k]:.3f}" for k in columns))
    Console(soft_wrap=False).print(table)
    if args.out:
        write_json(Path(args.out), result)
        console.print(f"measurements: {args.out}")
    return 0


def _judges_overoptimisation(args: argparse.Namespace) -> int:
    from .harness.overoptimisation import curves, overoptimisation, plot_overoptimisation
    from .harness.rundir import write_json
    from .leaderboard.submission import run_folders

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


def _add_judges_parser(commands: argparse._SubParsersAction) -> None:
    judges = commands.add_parser("judges", help="measure how each judge profile errs").add_subparsers(dest="action", required=True)
    parser = judges.add_parser("measure", help="grade the same policy samples with every profile and measure each judge",
                               parents=[_catalog_flag()])
    parser.add_argument("--profiles", help="comma-separated noise profiles (default: every one in the catalog)")
    parser.add_argument("--prompts", type=int, default=64, help="train-split prompts sampled from the suite")
    parser.add_argument("--group-size", dest="group_size", type=int, default=8, help="responses per prompt")
    parser.add_argument("--policy", default="tiny", help="the policy whose responses are graded")
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompts, samples and judge noise")
    parser.add_argument("--out", help="also write the measurements as JSON here")
    parser.set_defaults(func=_judges_measure, agent="grpo")
    over = judges.add_parser("overoptimisation", help="the judge's and the true score of training runs per step: "
                             "does the true score peak and fall while the judge's rises?")
    over.add_argument("runs", nargs="+", help="run folders (seeds of one agent under one judge) or a folder holding them")
    over.add_argument("--block", type=int, default=20, help="steps per block mean")
    over.add_argument("--title", help="the plot's title")
    over.add_argument("--out", help="folder for overoptimisation.json and overoptimisation.png")
    over.set_defaults(func=_judges_overoptimisation)


def _serve_judge(args: argparse.Namespace) -> int:
    from .judges.serve import make_server

    server = make_server(args.path, host=args.host, port=args.port, model_name=args.model_name)
    host, port = server.server_address[:2]
    console.print(f"serving {args.path} as {server.RequestHandlerClass.model_name!r} at http://{host}:{port}/v1 (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.server_close()
    return 0


def _add_overrides(parser: argparse.ArgumentParser, agent: str, *, skip: tuple[str, ...] = ()) -> None:
    """One flag per config field, grouped by component; the defaults shown are those of ``agent``. (Built by
    hand: transformers' ``HfArgumentParser`` would do it from the dataclasses, but importing it takes
    0.49 s, as long as the whole ``--help`` without it.)"""
    from .agents.config import GROUPS
    from .agents.presets import load_preset

    try:
        preset = load_preset(agent)
    except SetgrpoBenchError:
        preset = {}  # an unknown agent is reported when the command runs
    for group_name, group in GROUPS.items():
        overrides = parser.add_argument_group(f"overrides of the preset: {group_name} ({group.__doc__.rstrip('.')})")
        for name, f in group.__pydantic_fields__.items():
            if name != "agent" and name not in skip:
                shown = preset.get(name, f.default)
                overrides.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar=type(f.default).__name__.upper(),
                                       help=f"{f.description} (default for {agent}: {shown!r})".replace("%", "%%"))


def _agents_help(default: str) -> str:
    from .agents.presets import preset_paths

    return f"agent preset, one of: {', '.join(sorted(preset_paths()))} (default {default})"


def _add_run_parser(commands: argparse._SubParsersAction, agent: str) -> None:
    parser = commands.add_parser("run", help="train an agent and evaluate it on held-out instances", parents=[_catalog_flag()])
    parser.add_argument("--agent", default="grpo", help=_agents_help("grpo"))
    parser.add_argument("--suite", choices=["builtin"], help="train and evaluate on the whole built-in suite")
    parser.add_argument("--out", help="run directory (default runs/<agent>-seed<seed>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    parser.add_argument("--overwrite", action="store_true", help="replace the run in --out")
    _add_overrides(parser, agent or "grpo")
    parser.set_defaults(func=_run)


def _add_diagnose_parser(commands: argparse._SubParsersAction, agent: str) -> None:
    parser = commands.add_parser("diagnose", help="measure SetGRPO's coverage and risk on sampled groups, no training",
                                 parents=[_catalog_flag()])
    parser.add_argument("--agent", default="setgrpo", help="a SetGRPO preset: " + _agents_help("setgrpo"))
    parser.add_argument("--groups", type=int, default=192, help="non-constant groups to sample and audit")
    parser.add_argument("--alphas-a", type=_floats, default=[0.05, 0.1, 0.2, 0.3, 0.4, 0.5],
                        help="miscoverage levels α_a of the coverage curve")
    parser.add_argument("--alphas", type=_floats, default=[0.05, 0.1, 0.15, 0.2, 0.3],
                        help="risk levels α of the risk curve")
    parser.add_argument("--repeats", type=int, default=200, help="random splits per level")
    parser.add_argument("--compare", help="comma-separated SetGRPO presets whose gates are compared on the same groups "
                                          "(stalled steps, acceptance, chosen α_a, reversal rates, retained alignment)")
    parser.add_argument("--out", help="output folder (default runs/diagnose-<agent>-seed<seed>)")
    _add_overrides(parser, agent or "setgrpo")
    parser.set_defaults(func=_diagnose)


def _add_sweep_parser(commands: argparse._SubParsersAction) -> None:
    from .agents.presets import preset_paths

    parser = commands.add_parser("sweep", help="run every (agent, judge profile, seed), resumable, in parallel processes",
                                 parents=[_catalog_flag()], allow_abbrev=False)  # --seed is not --seeds
    parser.add_argument("--agents", required=True, help="comma-separated agent presets, of: " + ", ".join(sorted(preset_paths())))
    parser.add_argument("--seeds", help="a count (5 → seeds 0..4) or comma-separated seeds (default: the protocol's, else 5)")
    parser.add_argument("--jobs", type=int, default=1, help="local backend: runs at once (each gets cores / jobs threads)")
    parser.add_argument("--backend", choices=["local", "ray"], default="local",
                        help="local processes, or Ray tasks (the [ray] extra)")
    parser.add_argument("--address", help="ray: the cluster to join (default: a local Ray started for the sweep)")
    parser.add_argument("--cpus-per-run", type=int, default=1, help="ray: CPUs (and torch threads) of each run")
    parser.add_argument("--gpus-per-run", type=float, default=0.0, help="ray: GPUs of each run")
    parser.add_argument("--out", default="runs/sweep", help="sweep folder: <out>/<noise>/<agent>/seed<k>/")
    _add_overrides(parser, "grpo", skip=("seed",))  # seeds come from --seeds; --noise takes a comma-separated list
    parser.set_defaults(func=_sweep)


def _add_board_parsers(commands: argparse._SubParsersAction) -> None:
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
    audit.set_defaults(func=_audit)
    publish = commands.add_parser("publish", help="validate runs (or a sweep) and add them to the board")
    publish.add_argument("runs", nargs="+", help="run folders or a sweep folder")
    publish.add_argument("--name", help="submission name (default <agent>-<noise>-<suite hash>)")
    publish.add_argument("--board", default="leaderboard", help="board folder (holds results/)")
    publish.add_argument("--command", help="the command that produced the runs, recorded on the board")
    publish.add_argument("--replace", action="store_true", help="replace the submission of the same name (e.g. more seeds)")
    publish.add_argument("--protocol", default="board-v2",
                         help="the board's protocol: runs made under another one are refused ('' accepts any)")
    publish.set_defaults(func=_publish)


def _build_policy(args: argparse.Namespace) -> int:
    from .policy.embedded import SHIPPED, TinyConfig, build_key
    from .policy.tiny import build_tiny

    out = build_tiny(TinyConfig(), force=True, out=args.out or SHIPPED)
    console.print(f"built the embedded policy in {out} (key {build_key()[:16]})")
    return 0


def _build_judge(args: argparse.Namespace) -> int:
    from .judges.learned import build_judge
    from .judges.learned_paths import SHIPPED, JudgeBuildConfig, build_key

    out = build_judge(JudgeBuildConfig(), force=True, out=args.out or SHIPPED)
    console.print(f"built the learned judge in {out} (key {build_key()[:16]})")
    return 0


def _add_build_policy_parser(commands: argparse._SubParsersAction) -> None:
    judge = commands.add_parser("build-judge", help="rebuild the learned judge (deterministic) and ship it")
    judge.add_argument("--out", help="folder to write (default: the build shipped inside the package)")
    judge.set_defaults(func=_build_judge)
    parser = commands.add_parser("build-policy", help="rebuild the embedded tiny policy (deterministic) and ship it")
    parser.add_argument("--out", help="folder to write (default: the build shipped inside the package)")
    parser.set_defaults(func=_build_policy)


def _add_serve_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("serve-judge", help="serve a local transformers model over the OpenAI protocol")
    parser.add_argument("path", help="'tiny' or a transformers causal-LM folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model-name", help="name clients must send (default: the folder name)")
    parser.set_defaults(func=_serve_judge)


CATALOG_HELP = "extra catalog folder with envs/, agents/, graders/, protocols/ (repeatable; before or after the command)"


def _catalog_flag() -> argparse.ArgumentParser:
    """``--catalog`` accepted after the command too (its values are read before parsing, see ``main``)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--catalog", action="append", default=argparse.SUPPRESS, metavar="DIR", help=CATALOG_HELP)
    return parent


def _early(argv: Sequence[str]) -> argparse.Namespace:
    """The flags that shape the parser itself, wherever they are: catalogs and the agent."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--catalog", action="append", default=[])
    early.add_argument("--agent")
    return early.parse_known_args(list(argv))[0]


def build_parser(agent: str | None = None) -> argparse.ArgumentParser:
    """The CLI; ``agent`` (the ``--agent`` of the command line) sets the defaults its help shows."""
    parser = argparse.ArgumentParser(prog="python -m setgrpo_bench", description=__doc__)
    parser.add_argument("--catalog", action="append", default=[], metavar="DIR", help=CATALOG_HELP)
    commands = parser.add_subparsers(dest="command", required=True)

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
    _add_run_parser(commands, agent)
    _add_diagnose_parser(commands, agent)
    _add_sweep_parser(commands)
    _add_board_parsers(commands)
    _add_serve_parser(commands)
    _add_build_policy_parser(commands)
    _add_evaluate_parser(commands)
    _add_judges_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # read by transformers and huggingface_hub when a command first imports them (not before: ``--help``
    # and the light commands never import transformers)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    argv = sys.argv[1:] if argv is None else list(argv)
    early = _early(argv)
    try:
        for folder in early.catalog:
            add_catalog(folder)
        if early.catalog:
            register_catalog()
        args = build_parser(early.agent).parse_args(argv)
        args.argv = argv
        return int(args.func(args))
    except SetgrpoBenchError as exc:
        console.print(f"[red]error:[/] {exc}", markup=True, highlight=False, soft_wrap=True)
        return RunLockedError.exit_status if isinstance(exc, RunLockedError) else 2


if __name__ == "__main__":
    sys.exit(main())
