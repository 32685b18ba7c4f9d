"""``run``: train an agent on the mixture of train splits and evaluate on every eval split (DESIGN §9)."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from transformers import AutoModelForCausalLM
from transformers import __version__ as transformers_version

from .. import __version__
from ..agents.config import TrainConfig
from ..agents.trainer import NonFiniteLossError, Trainer
from ..catalog import builtin_root
from ..envs import benchmark_paths, load_env_benchmark
from ..envs.rubric_env import RubricEnv
from ..errors import SetgrpoBenchError
from ..graders.llm_judge import LLMJudgeGrader, load_judge_profile
from ..policy.model import load_policy
from ..tasks.benchmark import stable_hash
from .allocator import keep_freed_memory
from .evaluate import evaluate
from .report import plot_curves, plot_setgrpo, summarise_diagnostics, summary_table
from .rundir import RunDir, read_json, write_json

EVAL_SEED_OFFSET = 10_000


class TrainingStopped(SetgrpoBenchError):
    """Training stopped before its last step (e.g. a non-finite loss); the last good checkpoint is kept."""


def env_names(spec: str) -> list[str]:
    """Benchmark names from ``builtin`` or a comma-separated list of env ids / names."""
    if spec == "builtin":
        envs_dir = builtin_root() / "envs"
        return sorted(n for n, p in benchmark_paths().items() if p.is_relative_to(envs_dir))
    names = []
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        name = item.removeprefix("setgrpo/").rsplit("-v", 1)[0] if item.startswith("setgrpo/") else item
        load_env_benchmark(name)  # raises with a suggestion when unknown
        names.append(name)
    return names


def suite_fingerprint(config: TrainConfig, envs: list[RubricEnv]) -> str:
    """Hash of everything that defines what a score means: every benchmark's instances and rubrics,
    the judge profile, the score rules and the evaluation size."""
    return stable_hash({
        "benchmarks": {e.benchmark.name: e.benchmark.content_hash() for e in envs},
        "score_rules": {e.benchmark.name: e.benchmark.score_rule for e in envs},
        "noise": envs[0].grader.fingerprint() if envs else None,
        "eval_instances": config.eval_instances,
    })


def make_judge(config: TrainConfig) -> Any:
    """The LLM judge backend of ``config`` (local model or endpoint), or None for a noise profile."""
    if config.judge:
        from ..graders.llm_judge import TransformersJudge

        return TransformersJudge(config.judge, config.device)
    if config.judge_url:
        from ..graders.endpoint import EndpointJudge

        profile = load_judge_profile(config.judge_profile)
        return EndpointJudge(config.judge_url, config.judge_model, api_key_env=config.judge_api_key_env or None,
                             concurrency=profile.concurrency, timeout_s=profile.timeout_s, backoff_s=profile.backoff_s)
    return None


def make_envs(config: TrainConfig) -> list[RubricEnv]:
    backend = make_judge(config)
    profile = load_judge_profile(config.judge_profile) if backend is not None else None
    envs = []
    for name in env_names(config.envs):
        grader = None
        if backend is not None:
            grader = LLMJudgeGrader(backend, profile, load_env_benchmark(name).score_rule)
        envs.append(RubricEnv(name, split="train", noise=config.noise, grader=grader))
    for k, env in enumerate(envs):
        env.reset(seed=config.seed * 1_000 + k)
    return envs


def _state(trainer: Trainer, step: int) -> dict[str, Any]:
    return {
        "step": step,
        "optimizer": trainer.optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "numpy_rng": trainer.rng.bit_generator.state,
        "env_rngs": [env.np_random.bit_generator.state for env in trainer.envs],
        "trainer": trainer.state_dict(),
    }


def save_checkpoint(rundir: RunDir, trainer: Trainer, step: int) -> None:
    staging = rundir.new_checkpoint_folder(step)
    trainer.policy.model.save_pretrained(staging)
    trainer.policy.tokenizer.save_pretrained(staging)
    torch.save(_state(trainer, step), staging / "trainer_state.pt")
    rundir.commit_checkpoint(staging, step)


def load_checkpoint(folder: Path, trainer: Trainer) -> int:
    """Restore weights, optimiser and every random state; returns the checkpoint's step."""
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager")
    trainer.policy.model.load_state_dict(model.state_dict())
    state = torch.load(folder / "trainer_state.pt", weights_only=False)
    trainer.optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    trainer.rng.bit_generator.state = state["numpy_rng"]
    for env, env_state in zip(trainer.envs, state["env_rngs"]):
        env.np_random.bit_generator.state = env_state
    trainer.load_state_dict(state["trainer"])
    return int(state["step"])


def run(
    config: TrainConfig,
    out: str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    console: Console | None = None,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Train and evaluate; returns the content of ``eval.json``. ``on_step(step, metrics)`` is called
    after each step's metrics and checkpoint are on disk."""
    console = console or Console()
    keep_freed_memory()
    rundir = RunDir(out)
    resumed = rundir.prepare(config.to_dict(), resume=resume, overwrite=overwrite)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    envs = make_envs(config)
    policy = load_policy(config.policy, config.device, seed=config.seed)
    trainer = Trainer(config, policy, envs, rng)
    start = 0
    if not resumed:
        write_json(rundir.root / "config.json", {
            "config": config.to_dict(), "package_version": __version__, "policy": policy.name,
            "policy_hash": policy.fingerprint(), "suite_hash": suite_fingerprint(config, envs),
            "envs": [e.benchmark.name for e in envs], "domains": {e.benchmark.name: e.domain for e in envs},
            "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers_version,
            "oracle": config.oracle,
        })
    checkpoint = rundir.latest_checkpoint() if resumed else None
    if checkpoint is not None:
        start = load_checkpoint(checkpoint, trainer)
        console.print(f"resuming {rundir.root} from step {start}")
    rundir.truncate_metrics(start)
    eval_seed = config.seed + EVAL_SEED_OFFSET
    initial_path = rundir.root / "eval_initial.json"
    if initial_path.is_file():
        initial = read_json(initial_path)
    else:
        with console.status("evaluating the initial policy"):
            initial = evaluate(trainer.engine, envs, instances=config.eval_instances, seed=eval_seed)
        write_json(initial_path, initial)
    _train(config, rundir, trainer, start, console, on_step)
    with console.status("evaluating the trained policy"):
        final = evaluate(trainer.engine, envs, instances=config.eval_instances, seed=eval_seed)
    metrics = rundir.metrics()
    result = {
        "agent": config.agent, "oracle": config.oracle, "seed": config.seed, "steps": config.steps,
        "initial": initial, "final": final,
        "improvement_macro_true_score": final["macro_true_score"] - initial["macro_true_score"],
        "grader_calls": sum(r["grader_calls"] for r in metrics),
        "audit_calls": sum(r["audit_calls"] for r in metrics),
        "train_seconds": sum(r["time_step"] for r in metrics),
        "diagnostics": summarise_diagnostics(metrics),
    }
    write_json(rundir.root / "eval.json", result)
    plot_curves(metrics, result, rundir.root / "curve.png", title=f"{config.agent} (seed {config.seed})")
    if result["diagnostics"]:
        plot_setgrpo(metrics, rundir.root / "setgrpo.png", title=f"{config.agent} (seed {config.seed})")
    console.print(summary_table(result))
    return result


def _train(config, rundir: RunDir, trainer: Trainer, start: int, console: Console, on_step) -> None:
    columns = (TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[live]}"))
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("train", total=config.steps, completed=start, live="")
        for step in range(start + 1, config.steps + 1):
            t0 = time.perf_counter()
            try:
                metrics = trainer.step()
            except NonFiniteLossError as exc:
                raise TrainingStopped(
                    f"step {step}: {exc}. The last good checkpoint (step {step - 1}) is kept in {rundir.checkpoints}."
                ) from None
            metrics = {"step": step, **metrics, "time_step": time.perf_counter() - t0}
            rundir.append_metrics(metrics)
            if step % config.checkpoint_every == 0 or step == config.steps:
                save_checkpoint(rundir, trainer, step)
            live = f"reward {metrics['reward']:.3f}  true {metrics['true_score']:.3f}"
            progress.update(bar, completed=step, live=live)
            if on_step is not None:
                on_step(step, metrics)
