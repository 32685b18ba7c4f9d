"""Held-out evaluation with the true rubric score (DESIGN §9): per env, per domain, macro."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..envs.rubric_env import RubricEnv
from ..policy.engine import RolloutEngine
from ..tasks.benchmark import eval_indices
from ..tasks.scoring import rubric_score
from .averages import aggregate
from .seeds import generator, name_key, torch_seed


def _se(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else 0.0


@torch.no_grad()
def evaluate(
    engine: RolloutEngine,
    envs: Sequence[RubricEnv],
    *,
    instances: int,
    seed: int,
    split: str = "dev",
    stream: str = "eval",
    judged: bool = True,
    batch: int = 256,
    on_progress: Callable[[int, int], None] | None = None,
    feature: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """One sampled response per instance of each env's ``split`` of the eval split (``dev`` or ``test``,
    its first ``instances``; 0: all), graded by the env's judge; the true score is the noise-free rubric
    score. Prompts of all envs are sampled together in batches of ``batch`` (``on_progress(done,
    total)`` after each); runs on the ``stream`` random streams of run ``seed`` (``eval``; ``curve`` for
    the held-out curve), leaving the caller's torch and numpy random states untouched. ``judged`` False
    scores only the true rubric score where every criterion has a check (no judge call: the held-out
    curve's price), and returns the macro true score alone. ``feature`` (a judged evaluation): the share
    of each env's responses that show it, and its macro average (an injected bias's feature).
    """
    tasks = {env.benchmark.name: [env.benchmark.instance("eval", i) for i in eval_indices(env.benchmark, split, instances)]
             for env in envs}
    prompts = [t.prompt_text for env_tasks in tasks.values() for t in env_tasks]
    texts: list[str] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(torch_seed(seed, f"{stream}_sampling"))
        for start in range(0, len(prompts), batch):
            texts += engine.generate(prompts[start : start + batch]).texts
            if on_progress is not None:
                on_progress(len(texts), len(prompts))
    if not judged and all(t.gradable for env_tasks in tasks.values() for t in env_tasks):
        return {"macro_true_score": _macro_true(envs, tasks, texts)}
    per_env: dict[str, dict[str, Any]] = {}
    for env in envs:
        bench = env.benchmark
        env_tasks, env_texts = tasks[bench.name], texts[: len(tasks[bench.name])]
        texts = texts[len(env_tasks):]
        rng = generator(seed, f"{stream}_grading", name_key(bench.name))
        grades = [env.grader.grade(t, r, rng) for t, r in zip(env_tasks, env_texts)]
        true = np.array([g.true_score for g in grades])
        judge = np.array([g.score for g in grades])
        per_env[bench.name] = {
            "domain": bench.domain, "n": len(env_tasks),
            "true_score": float(true.mean()), "true_score_se": _se(true),
            "judge_score": float(np.nanmean(judge)), "judge_score_se": _se(judge),
            "invalid_rate": float(np.isnan(judge).mean()),
            "true_score_is_estimate": any(g.true_score_is_estimate for g in grades),
            "example": {"task_id": env_tasks[0].id, "response": env_texts[0]},
            **({"feature_rate": float(np.mean([feature(r) for r in env_texts]))} if feature else {}),
        }
    features = {"macro_feature_rate": float(np.mean([r["feature_rate"] for r in per_env.values()]))} if feature else {}
    return {"per_env": per_env, **aggregate(per_env), **features}


def _macro_true(envs: Sequence[RubricEnv], tasks: dict[str, list[Any]], texts: list[str]) -> float:
    """The unweighted mean over benchmarks of the mean true score, from the rubric's checks alone."""
    means = []
    for env in envs:
        env_tasks = tasks[env.benchmark.name]
        env_texts, texts = texts[: len(env_tasks)], texts[len(env_tasks):]
        scores = [rubric_score(t.points, t.true_verdicts(r), env.grader.score_rule)[0] for t, r in zip(env_tasks, env_texts)]
        means.append(float(np.mean(scores)))
    return float(np.mean(means))
