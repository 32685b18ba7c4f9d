"""Time of one GRPO training step on the embedded tiny policy, split into rollout, grading and update.

Run: ``pytest benchmarks/test_step_speed.py --benchmark-only``. Builds the tiny policy on first use.
The default batch shape (16 prompts × 8 responses, 72 new tokens) is measured; each phase is a
separate benchmark, so their ratios come from one run on one machine.
"""

import numpy as np
import pytest
import torch

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.agents.geometry import GradientGeometry
from setgrpo_bench.harness.allocator import keep_freed_memory
from setgrpo_bench.harness.suite import make_envs
from setgrpo_bench.harness.trainer import Trainer
from setgrpo_bench.policy import load_policy


@pytest.fixture(scope="module")
def trainer():
    keep_freed_memory()
    config = resolve_config("grpo", {"noise": "realistic"})
    torch.manual_seed(0)
    trainer = Trainer(config, load_policy("tiny"), make_envs(config))
    trainer.step()  # warm up: cold processes are several times slower
    return trainer


@pytest.fixture(scope="module")
def batch(trainer):
    return trainer.collect(16)


def test_rollout(benchmark, trainer, batch):
    prompts = [trainer.envs[0].benchmark.instance("train", i).prompt_text for i in range(16) for _ in range(8)]
    benchmark.pedantic(trainer.engine.generate, args=(prompts,), rounds=3, warmup_rounds=1)


def test_grading(benchmark, trainer, batch):
    def grade():
        env = trainer.envs[0]
        task = env.benchmark.instance("train", 0)
        for b in range(16):
            env.grade_group(batch.groups.rollout.texts[b * 8 : (b + 1) * 8], task=task)

    benchmark.pedantic(grade, rounds=5, warmup_rounds=1)


def test_update(benchmark, trainer, batch):
    decision = trainer.agent.decide(batch.groups, {}, {})
    benchmark.pedantic(trainer.optimise, args=(batch.groups.rollout, decision), rounds=3, warmup_rounds=1)


def test_setgrpo_geometry(benchmark, trainer, batch):
    """K of all 16 groups from per-response gradients (torch.func), SetGRPO's extra cost per step."""
    geometry = GradientGeometry(trainer.policy.model, "full", temperature=1.0, loss_type="grpo", max_new_tokens=72)
    groups = batch.groups
    benchmark.pedantic(lambda: [geometry.gram(groups.rollout, groups.rows(b)) for b in range(groups.n_groups)],
                       rounds=3, warmup_rounds=1)
