"""The suite as a TRL reward (the ``[trl]`` extra): train TRL's ``GRPOTrainer`` against our noisy
rubric judges without adopting our trainer.

    dataset = trl_dataset("builtin", format_prompt=policy.format_prompt)
    reward = RubricReward("builtin", seed=0)
    GRPOTrainer(model=..., reward_funcs=reward, train_dataset=dataset, ...).train()

The dataset holds train-split prompts with their task ids; the reward grades each completion with
its env's judge (noise profile or LLM judge), a group of completions of one task at once, from a
seeded stream per benchmark. An invalid grade (the judge failed) is ``None``, which TRL leaves out.
The true rubric score is logged as the ``true_score`` metric for the harness only; it never enters
the reward.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..envs import env_id, load_env_benchmark
from ..envs.rubric_env import RubricEnv
from ..harness.seeds import generator, name_key
from ..harness.suite import env_names


def _names(envs: str | Sequence[str]) -> list[str]:
    return env_names(envs) if isinstance(envs, str) else env_names(",".join(envs))


def trl_dataset(envs: str | Sequence[str] = "builtin", *, split: str = "train",
                format_prompt: Callable[[str], str] | None = None) -> Any:
    """A ``datasets.Dataset`` of the prompts of every env's ``split`` (columns ``prompt``, ``task_id``,
    ``env_id``), in a fixed order; ``format_prompt`` turns a prompt into the text the policy continues
    (e.g. ``Policy.format_prompt``), else prompts are kept as they are."""
    from datasets import Dataset

    rows = []
    for name in _names(envs):
        benchmark = load_env_benchmark(name)
        for index in range(benchmark.size(split)):
            task = benchmark.instance(split, index)
            rows.append({"prompt": format_prompt(task.prompt_text) if format_prompt else task.prompt_text,
                         "task_id": task.id, "env_id": env_id(name)})
    return Dataset.from_list(rows)


class RubricReward:
    """A TRL reward function: (prompts, completions, task_id, ...) → the judge's scores (None when invalid).

    ``envs`` names the benchmarks (or give ``RubricEnv`` objects, e.g. with an LLM judge); grading
    noise comes from one stream per benchmark of run ``seed``, so the same completions and seed give
    the same scores as our own grading does (process 0 of a distributed run; process r > 0 grades on
    streams of its own).
    """

    __name__ = "rubric_judge"  # the name TRL logs the reward under

    def __init__(self, envs: str | Sequence[str] | Sequence[RubricEnv] = "builtin", *, seed: int = 0,
                 noise: str | None = None) -> None:
        if isinstance(envs, (list, tuple)) and envs and isinstance(envs[0], RubricEnv):
            self.envs = {e.benchmark.name: e for e in envs}
        else:
            self.envs = {n: RubricEnv(n, noise=noise) for n in _names(envs)}
        rank = int(os.environ.get("RANK", "0"))  # under torchrun/accelerate each process grades its own stream
        self.rngs = {n: generator(seed, "grading", name_key(n), *([rank] if rank else [])) for n in self.envs}
        self.true_scores: list[float] = []  # for the harness: what the rewards were worth
        self.last_spreads: list[float] = []  # the judge's own sd of each score of the last call (SetGRPO's σ)

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], task_id: Sequence[str],
                 log_metric: Callable[[str, float], None] | None = None, **_: Any) -> list[float | None]:
        texts = [_text(c) for c in completions]
        rewards: list[float | None] = [None] * len(texts)
        true, spreads = np.full(len(texts), np.nan), np.full(len(texts), np.nan)
        for task in dict.fromkeys(task_id):  # one task's completions are graded together, in order
            rows = [i for i, t in enumerate(task_id) if t == task]
            name = task.split("/")[0]
            grades = self.envs[name].grade_group([texts[i] for i in rows], task=task, rng=self.rngs[name])
            for i, grade in zip(rows, grades):
                rewards[i] = float(grade.score) if grade.valid else None
                true[i], spreads[i] = grade.true_score, grade.spread
        self.true_scores.extend(true.tolist())
        self.last_spreads = spreads.tolist()
        if log_metric is not None:
            log_metric("true_score", float(np.nanmean(true)))
        return rewards


def _text(completion: Any) -> str:
    """A completion's text: plain, or the content of a conversational completion's messages."""
    if isinstance(completion, str):
        return completion.strip()
    return "".join(m.get("content", "") for m in completion).strip()
