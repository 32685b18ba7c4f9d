"""The labels a learned judge learns from (DESIGN §4): train-split tasks with responses of the warm-start
corpus, of the initial policy and, if its build asks, responses written to fool a judge — each labelled
by the rubric's own checks — and the held-out part its card is measured on."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..graders.hacks import hack_responses
from ..policy import GenerationConfig, TransformersEngine, load_policy
from ..policy.embedded import builtin_names
from ..tasks.catalog_benchmarks import load_env_benchmark
from ..tasks.model import TaskInstance
from .learned_paths import JudgeBuildConfig


def labelled_pairs(config: JudgeBuildConfig) -> tuple[list[tuple[TaskInstance, str]], list[tuple[TaskInstance, str]]]:
    """(train-split task, response) pairs: corpus examples of random quality and the initial policy's
    samples, enough for ``label_budget + held_out`` criterion labels, and apart, ``hack_share`` of that
    many responses written to fool a judge (none by default)."""
    rng = np.random.default_rng(config.seed)
    benches = [load_env_benchmark(name) for name in builtin_names()]
    wanted = pairs_wanted(config)
    n_policy = int(round(config.policy_share * wanted))

    def draw_task() -> TaskInstance:
        bench = benches[int(rng.integers(len(benches)))]
        return bench.instance("train", int(rng.integers(bench.size("train"))))

    corpus = []
    for _ in range(wanted - n_policy):
        task = draw_task()
        bench = load_env_benchmark(task.metadata["benchmark"])
        corpus += [(task, r) for r in bench.examples(task, rng, 1, min_quality=0.0, max_quality=1.0)]
    tasks = [draw_task() for _ in range(n_policy)]
    policy = load_policy("tiny")
    torch.manual_seed(config.seed)
    texts = TransformersEngine(policy, GenerationConfig(max_new_tokens=72)).generate([t.prompt_text for t in tasks]).texts
    return corpus + list(zip(tasks, texts)), hack_pairs(benches, round(config.hack_share * wanted), config.seed)


def pairs_wanted(config: JudgeBuildConfig) -> int:
    """Responses to label for ``label_budget + held_out`` criterion labels (10% to spare)."""
    per_response = np.mean([len(load_env_benchmark(name).instance("train", 0).rubric) for name in builtin_names()])
    return int(math.ceil((config.label_budget + config.held_out) / per_response * 1.1))


def hack_pairs(benches: list[Any], n: int, seed: int) -> list[tuple[TaskInstance, str]]:
    """``n`` (train-split task, hack) pairs — one of ``graders/hacks.py``'s responses written to fool a judge,
    with its programmatic labels like any other — from a stream of their own, so that a build without
    them draws what it drew before they existed."""
    rng = np.random.default_rng([seed, 1])
    out = []
    for _ in range(n):
        bench = benches[int(rng.integers(len(benches)))]
        task = bench.instance("train", int(rng.integers(bench.size("train"))))
        hacks = list(hack_responses(task, rng).values())
        out.append((task, hacks[int(rng.integers(len(hacks)))]))
    return out


def split_held_out(examples: list, pairs: list, config: JudgeBuildConfig, rng: np.random.Generator) -> tuple[list, list]:
    """(held-out, training) labels. By default the first ``held_out`` shuffled labels (they share
    responses with training labels); with ``split_by_task``, every label of tasks drawn in random order
    until ``held_out`` are held out, so that no training label saw the held-out tasks or their responses."""
    if not config.split_by_task:
        return examples[: config.held_out], examples[config.held_out : config.held_out + config.label_budget]
    by_task: dict[str, list[int]] = {}
    for i, example in enumerate(examples):
        by_task.setdefault(pairs[example[3]][0].id, []).append(i)
    held: set[int] = set()
    for task in rng.permutation(sorted(by_task)):
        if len(held) >= config.held_out:
            break
        held.update(by_task[str(task)])
    return ([e for i, e in enumerate(examples) if i in held],
            [e for i, e in enumerate(examples) if i not in held][: config.label_budget])
