"""``run``: train an agent on the mixture of train splits and evaluate on every eval split (DESIGN §9)."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from transformers import __version__ as transformers_version

from .. import __version__
from ..agents.config import TrainConfig
from ..agents.plugins import plugins_used
from ..agents.presets import catalog_presets
from ..errors import SetgrpoBenchError
from ..hashing import code_fingerprint, stable_hash
from ..policy import load_policy
from ..policy.embedded import cache_root
from ..policy.engine import RolloutEngine
from .allocator import keep_freed_memory
from .checkpoints import resume_from, save_checkpoint
from .curve import curve_due, curve_point, held_out_curve
from .engines import make_engine
from .evaluation import evaluate
from .hacking import hacking_anatomy
from .pooled import drift_diagnostics, summarise_diagnostics, summarise_updates
from .report import evaluation_table, plot_curves, plot_setgrpo, summary_table
from .reporting import Reporters
from .rundir import (
    CONFIG,
    EVAL,
    EVAL_INITIAL,
    METRICS,
    TIMINGS,
    FileError,
    RunDir,
    RunDirError,
    finite_json,
    holds_run,
    is_measured,
    metrics_problems,
    read_json,
    read_record,
    step_timings,
    write_json,
)
from .suite import make_envs, suite_fingerprint, suite_parts
from .threads import set_threads
from .trainer import Trainer, charge_warmup
from .update import NonFiniteLossError


class TrainingStopped(SetgrpoBenchError):
    """Training stopped before its last step (e.g. a non-finite loss); the last good checkpoint is kept."""


def run(
    config: TrainConfig,
    out: str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    console: Console | None = None,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
    reuse_initial: bool = True,
) -> dict[str, Any]:
    """Train and evaluate; returns the content of ``eval.json``. ``on_step(step, metrics)`` is called
    after each step's metrics and checkpoint are on disk. ``reuse_initial`` False computes the initial
    evaluation even when the cache holds it (an audit re-executes everything)."""
    console = console or Console()
    keep_freed_memory()
    rundir = RunDir(out)
    with rundir.lock():
        return _run(config, rundir, resume=resume, overwrite=overwrite, console=console, on_step=on_step,
                    reuse_initial=reuse_initial)


def _run(config: TrainConfig, rundir: RunDir, *, resume: bool, overwrite: bool, console: Console,
         on_step: Callable[[int, dict[str, Any]], None] | None, reuse_initial: bool) -> dict[str, Any]:
    resumed = rundir.prepare(config, resume=resume, overwrite=overwrite)
    set_threads(config.rollout.threads)
    envs = make_envs(config)
    policy = load_policy(config.rollout.policy, config.rollout.device)
    trainer = Trainer(config, policy, envs)
    start = 0
    if resumed:
        _update_steps(rundir, config, console)
        start = resume_from(rundir, trainer, console)
    else:
        write_json(rundir.root / CONFIG, _run_record(config, policy, envs))
    dropped = rundir.keep_metrics(start)
    if dropped:
        console.print(f"[yellow]note:[/] the metrics of steps {dropped[0]}–{dropped[-1]} came after the checkpoint of "
                      f"step {start}; those steps are redone and their lines replaced", highlight=False, soft_wrap=True)
    initial_path = rundir.root / EVAL_INITIAL
    if initial_path.is_file():
        initial = read_record(initial_path)
    else:
        initial = _initial_evaluation(config, trainer.engine, envs, policy.fingerprint(), console, reuse=reuse_initial)
        write_json(initial_path, initial)
    t0 = time.perf_counter()
    _train(config, rundir, trainer, start, console, on_step)
    t1 = time.perf_counter()
    final = _evaluation(config, trainer.engine, envs, "evaluating the trained policy", console)
    metrics = rundir.read_metrics()
    problems = metrics_problems(metrics, config.run.steps)
    if problems:  # the steps were written by this process: only outside damage gets here
        raise RunDirError(f"{rundir.root / METRICS} does not record its steps: " + "; ".join(problems))
    result = _result(config, initial, final, metrics.records)
    write_json(rundir.root / EVAL, result)
    write_json(rundir.root / TIMINGS, {  # measured, not computed: kept out of eval.json
        "train_seconds": sum(r["time_step"] for r in step_timings(rundir.root)), "train_seconds_this_process": t1 - t0,
        "final_eval_seconds": time.perf_counter() - t1, "threads": torch.get_num_threads(),
    })
    rundir.write_manifest()
    _report(config, rundir, envs, metrics.records, result, console)
    return result


def _run_record(config: TrainConfig, policy: Any, envs: list) -> dict[str, Any]:
    """``config.json``: the resolved config and everything its results depend on besides it."""
    return {
        "config": config.to_dict(), "package_version": __version__, "policy": policy.name,
        "policy_hash": policy.fingerprint(), "suite_hash": suite_fingerprint(config), "suite_parts": suite_parts(config),
        "envs": [e.benchmark.name for e in envs], "domains": {e.benchmark.name: e.domain for e in envs},
        "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers_version,
        "machine": machine(),
        "oracle": config.grading.oracle,
        **({"plugins": used} if (used := plugins_of(config)) else {}),
    }


def _result(config: TrainConfig, initial: dict[str, Any], final: dict[str, Any],
            records: list[dict[str, Any]]) -> dict[str, Any]:
    """``eval.json``: both evaluations, the judge's calls and cost, SetGRPO's and the optimiser's statistics,
    the held-out curve and what it says of reward hacking."""
    drift = drift_diagnostics(records)
    curve = held_out_curve(initial, records) if config.run.eval_every else []
    hacking = hacking_anatomy(curve, records)
    return {
        "agent": config.run.agent, "oracle": config.grading.oracle, "seed": config.run.seed, "steps": config.run.steps,
        "initial": initial, "final": final,
        "improvement_macro_true_score": final["macro_true_score"] - initial["macro_true_score"],
        "grader_calls": sum(r["grader_calls"] for r in records),
        "audit_calls": sum(r["audit_calls"] for r in records),
        "grader_cost": sum(r.get("grader_cost", r["grader_calls"]) for r in records),
        "diagnostics": summarise_diagnostics(records),
        "updates": summarise_updates(records),
        **({"drift": drift} if drift else {}),
        **({"stopped_at_step": next((r["step"] for r in records if r.get("stopped")), None)}
           if config.stopping.stop != "none" else {}),
        **({"curve": curve} if config.run.eval_every else {}),
        **({"hacking": hacking} if hacking else {}),
    }


def _report(config: TrainConfig, rundir: RunDir, envs: list, records: list[dict[str, Any]], result: dict[str, Any],
            console: Console) -> None:
    """The run's figures and the summary it prints."""
    title = (f"{config.run.agent}, seed {config.run.seed}, {config.grading.noise} judge: "
             f"{_suite_title(config, [e.benchmark.name for e in envs])}")
    plot_curves(records, result, rundir.root / "curve.png", title=title)
    if result["diagnostics"]:
        plot_setgrpo(records, rundir.root / "setgrpo.png", title=title, alpha_a=config.setgrpo.alpha_a,
                     alpha=config.setgrpo.alpha)
    console.print(summary_table(result))


def _update_steps(rundir: RunDir, config: TrainConfig, console: Console) -> None:
    """``--resume --steps N``: the run now trains to N; its config says so (and so do we)."""
    saved = read_record(rundir.root / CONFIG)
    before = saved["config"]["steps"]
    logged = max(rundir.read_metrics().steps(), default=0)
    if config.run.steps < logged:
        raise RunDirError(f"--steps {config.run.steps}: {rundir.root} has already trained {logged} steps; a run is not "
                          "shortened (start a new one with --out, or pass --steps >= its steps)")
    if before != config.run.steps:
        kept = rundir.set_aside(before)  # the shorter run's result stays, whatever happens next
        saved["config"]["steps"] = config.run.steps
        write_json(rundir.root / CONFIG, saved)
        console.print(f"[yellow]note:[/] {rundir.root} now trains for {config.run.steps} steps (it was configured for "
                      f"{before}); {CONFIG} updated" + (f", the {before}-step result kept in {kept}" if kept else ""),
                      highlight=False, soft_wrap=True)


def machine() -> dict[str, str]:
    """What a run's floating-point results depend on besides its config and code: the CPU model and the
    kernels torch picks for it (AVX2 and AVX-512 kernels sum in different orders), and the accelerator.
    Runs re-execute bit for bit on the same kind of machine only; an audit compares this first."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {"cpu": cpu, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "gpu": gpu}


def _suite_title(config: TrainConfig, names: list[str]) -> str:
    if config.run.envs == "builtin":
        return f"the built-in suite ({len(names)} benchmarks)"
    return ", ".join(names) if len(names) <= 4 else f"{len(names)} benchmarks"


def _evaluation(config: TrainConfig, engine: RolloutEngine, envs: list, title: str, console: Console) -> dict[str, Any]:
    columns = (TextColumn(f"[bold]{title}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("eval", total=None)
        return evaluate(engine, envs, instances=config.run.eval_instances, seed=config.run.seed, split=config.run.eval_split,
                        on_progress=lambda done, total: progress.update(bar, completed=done, total=total))


def plugins_of(config: TrainConfig) -> list[dict[str, str]]:
    """The installed plugins and catalog preset files the run uses (name, version, source hash)."""
    c = config.coefficients
    return plugins_used(c.rule, c.selector, catalog_presets(config.run.agent))


def _initial_evaluation(config: TrainConfig, engine: RolloutEngine, envs: list, policy_hash: str,
                        console: Console, *, reuse: bool = True) -> dict[str, Any]:
    """The initial policy's evaluation depends only on the policy, the suite, the sampling settings,
    the seed, the thread count and the code, not on the agent: it is computed once and kept in the cache
    for every agent, under a key of all of these. A cached file is used only when its content still has
    the hash written with it; ``reuse`` False (an audit) always computes it."""
    r = config.rollout
    run = config.run
    key = stable_hash({"policy": policy_hash, "suite": suite_fingerprint(config), "seed": run.seed,
                       "sampling": [r.engine, r.temperature, r.top_p, r.max_new_tokens], "version": __version__,
                       "code": code_fingerprint(), "threads": torch.get_num_threads(),
                       "eval": [run.eval_split, run.eval_instances, run.curve_instances if run.eval_every else 0]})
    path = cache_root() / "evaluations" / f"{key[:24]}.json"
    if reuse and path.is_file():
        try:
            cached = read_json(path)
        except FileError:
            cached = None
        if isinstance(cached, dict) and cached.get("key") == key and cached.get("sha256") == stable_hash(cached.get("evaluation")):
            console.print(f"initial evaluation: reused from {path}", highlight=False, soft_wrap=True)
            return cached["evaluation"]
        console.print(f"[yellow]note:[/] {path} is not the evaluation its key names (edited or damaged); computing it "
                      "again", highlight=False, soft_wrap=True)
    initial = _evaluation(config, engine, envs, "evaluating the initial policy", console)
    if run.eval_every:
        initial["curve"] = curve_point(config, engine, envs)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"key": key, "sha256": stable_hash(finite_json(initial)), "evaluation": initial})
    return initial


def _train(config, rundir: RunDir, trainer: Trainer, start: int, console: Console, on_step) -> None:
    columns = (TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[live]}"))
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("train", total=config.run.steps, completed=start, live="")
        warmup = trainer.warm_up() if not trainer.warmed_up and start < config.run.steps else None
        reporters = Reporters(config.run.report_to, rundir.root, name=rundir.root.name, config=config.to_dict())
        for step in range(start + 1, config.run.steps + 1):
            if trainer.agent.stopped:  # a resumed run whose stopping rule had fired
                break
            t0 = time.perf_counter()
            try:
                metrics = trainer.step()
            except NonFiniteLossError as exc:
                raise TrainingStopped(
                    f"step {step}: {exc}. The last good checkpoint (step {step - 1}) is kept in {rundir.checkpoints}."
                ) from None
            metrics = {"step": step, **metrics, "time_step": time.perf_counter() - t0}
            if warmup is not None:
                metrics, warmup = charge_warmup(metrics, warmup), None
            if curve_due(config, step, metrics["stopped"]):
                t0 = time.perf_counter()
                metrics.update(curve_point(config, trainer.engine, trainer.envs), time_curve=time.perf_counter() - t0)
            rundir.append_metrics({k: v for k, v in metrics.items() if not is_measured(k)})
            rundir.append_timings({k: v for k, v in metrics.items() if k == "step" or is_measured(k)})
            reporters.log(step, metrics)
            if step % config.run.checkpoint_every == 0 or step == config.run.steps or metrics["stopped"]:
                save_checkpoint(rundir, trainer, step)
            live = f"reward {metrics['reward']:.3f}  true {metrics['true_score']:.3f}"
            progress.update(bar, completed=step, live=live)
            if on_step is not None:
                on_step(step, metrics)
            if metrics["stopped"]:
                progress.console.print(f"stopped at step {step} by its stopping rule ({config.stopping.stop}); the "
                                       "policy of this step is the one evaluated", highlight=False, soft_wrap=True)
                break
        reporters.close()


def evaluate_policy(config: TrainConfig, out: str | Path, *, console: Console | None = None) -> dict[str, Any]:
    """Held-out evaluation of any policy (e.g. one trained elsewhere, with TRL) exactly as ``run``
    evaluates its own: writes and returns ``<out>/eval.json``. A run's folder is refused: its
    ``eval.json`` is that run's result."""
    console = console or Console()
    if holds_run(Path(out)):
        raise RunDirError(f"{out} holds a run, whose eval.json is its result; choose another --out for this evaluation")
    set_threads(config.rollout.threads)
    envs = make_envs(config)
    policy = load_policy(config.rollout.policy, config.rollout.device)
    result = {"policy": str(config.rollout.policy), "policy_hash": policy.fingerprint(), "seed": config.run.seed,
              "suite_hash": suite_fingerprint(config),
              **_evaluation(config, make_engine(config, policy), envs, f"evaluating {policy.name}", console)}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "eval.json", result)
    console.print(evaluation_table(result, title=f"{policy.name}: held-out true score (eval split)"))
    return result
