"""Speed of one board-protocol training step on the embedded policy (16 prompts × 8 responses, one
thread, as ``sweep --jobs 2`` runs it on 2 cores): rollout engines, GRPO and SetGRPO steps, the Gram
matrices and a full evaluation pass, each a benchmark of one pytest-benchmark run, so that their ratios
compare like with like.

Run on an idle machine: ``pytest benchmarks/test_step_speed.py --benchmark-only -s``; the ratios the
project tracks (fast loop vs ``generate`` ≥ 2.5×, SetGRPO step / GRPO step ≤ 1.15×, and each step
against ``BASELINE``) are printed at the end. Cold processes are several times slower than warm ones:
every benchmark warms up first.
"""

import numpy as np
import pytest
import torch

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.harness.allocator import keep_freed_memory
from setgrpo_bench.harness.suite import make_envs
from setgrpo_bench.harness.trainer import Trainer
from setgrpo_bench.policy import GenerateEngine, GenerationConfig, TransformersEngine, load_policy

TIMES: dict[str, float] = {}
BASELINE = {"grpo_step": 2.025, "setgrpo_step": 2.359, "loop": 0.859, "evaluation": 4.42}
"""Seconds of the code before prompt sharing and the growing KV cache (commit 8df36f6), measured on
2026-12-05 on an idle 2-core machine of this project's kind, one thread; to measure it again, check
that commit out (``git worktree add OLD 8df36f6``) and run this file with ``PYTHONPATH=OLD``."""


@pytest.fixture(scope="module", autouse=True)
def threads():
    keep_freed_memory()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
    for name, seconds in BASELINE.items():
        if name in TIMES:
            print(f"{name}: {TIMES[name]:.3f} s, {TIMES[name] / seconds:.2f}× the baseline's {seconds:.3f} s")
    if {"loop", "generate"} <= set(TIMES):
        print(f"\nrollout: generate / loop = {TIMES['generate'] / TIMES['loop']:.2f}× (target ≥ 2.5×)")
    for name in sorted(k for k in TIMES if k.startswith("setgrpo") and k.endswith("_step")):
        if "grpo_step" in TIMES:
            print(f"step: {name.removesuffix('_step')} / GRPO = {TIMES[name] / TIMES['grpo_step']:.2f}× (target ≤ 1.15×)")
    for judge in ("learned", "learned-prompt"):
        if {"grpo_step", f"grading_{judge}"} <= set(TIMES):
            print(f"grading a step with {judge}: {TIMES[f'grading_{judge}'] / TIMES['grpo_step']:.2f}× a GRPO step "
                  "(target ≤ 0.5×)")
    if {"grpo_step", "curve_point"} <= set(TIMES):  # board-v2: 120 steps, a point every 20 (6 after step 0)
        share = 6 * TIMES["curve_point"] / (120 * TIMES["grpo_step"] + 6 * TIMES["curve_point"])
        print(f"held-out curve: {share:.1%} of a board-v2 GRPO run (target ≤ 5%)")


def _trainer(agent: str, **overrides) -> Trainer:
    config = resolve_config(agent, {"noise": "realistic", "protocol": "board-v1", "threads": 1, **overrides})
    torch.manual_seed(0)
    trainer = Trainer(config, load_policy("tiny"), make_envs(config))
    trainer.warm_up()  # SetGRPO's calibration window
    trainer.step()  # warm caches
    return trainer


@pytest.fixture(scope="module")
def prompts():
    config = resolve_config("grpo")
    envs = make_envs(config)
    rng = np.random.default_rng(0)
    return [envs[int(rng.integers(len(envs)))].benchmark.instance("train", i).prompt_text for i in range(16) for _ in range(8)]


def _record(benchmark, name):
    TIMES[name] = benchmark.stats.stats.mean


@pytest.mark.parametrize("engine", ["loop", "generate"])
def test_rollout(benchmark, prompts, engine):
    """16 prompts × 8 responses, 72 new tokens at most, T = 1."""
    policy = load_policy("tiny")
    make = TransformersEngine if engine == "loop" else GenerateEngine
    sampler = make(policy, GenerationConfig(max_new_tokens=72))
    torch.manual_seed(0)
    benchmark.pedantic(sampler.generate, args=(prompts,), rounds=4, warmup_rounds=1)
    _record(benchmark, engine)


@pytest.mark.parametrize("agent", ["grpo", "setgrpo", "setgrpo:last:1", "setgrpo:identity"])
def test_training_step(benchmark, agent):
    """A whole step of the default batch: rollout, grading, (Gram matrices, audits,) decision, update;
    ``setgrpo:G`` is SetGRPO with geometry G."""
    name, _, geometry = agent.partition(":")
    trainer = _trainer(name, **({"geometry": geometry} if geometry else {}))
    benchmark.pedantic(trainer.step, rounds=4, warmup_rounds=1)
    _record(benchmark, f"{agent.replace(':', '_')}_step")


@pytest.mark.parametrize("judge", ["learned", "learned-prompt"])
def test_learned_judge_grading(benchmark, judge):
    """Grading one step's batch (16 groups × 8 responses of the embedded policy) with a learned judge."""
    from setgrpo_bench.graders import make_grader

    envs = make_envs(resolve_config("grpo"))
    rng = np.random.default_rng(0)
    tasks = [envs[int(rng.integers(len(envs)))].benchmark.instance("train", i) for i in range(16)]
    torch.manual_seed(0)
    texts = TransformersEngine(load_policy("tiny"), GenerationConfig(max_new_tokens=72)).generate(
        [t.prompt_text for t in tasks for _ in range(8)]).texts
    grader = make_grader(judge)

    def grade():
        stream = np.random.default_rng(0)
        for i, task in enumerate(tasks):
            grader.grade_group(task, texts[8 * i : 8 * i + 8], stream)

    benchmark.pedantic(grade, rounds=4, warmup_rounds=1)
    _record(benchmark, f"grading_{judge}")


def test_gram_matrices(benchmark):
    """K of all 16 groups from one backward pass (the part of SetGRPO's step GRPO does not have)."""
    trainer = _trainer("setgrpo")
    batch = trainer.collector.collect(16)
    needs = trainer.agent.needs(batch.groups, np.random.default_rng(0), warmup=True)
    benchmark.pedantic(trainer.geometry_of, args=(batch.groups, needs), kwargs={"keep_gradients": True},
                       rounds=4, warmup_rounds=1)


def test_evaluation(benchmark):
    """One held-out evaluation pass: 64 instances of each of the 10 benchmarks, sampled and graded."""
    from setgrpo_bench.harness.evaluation import evaluate

    trainer = _trainer("grpo")
    benchmark.pedantic(evaluate, args=(trainer.engine, trainer.envs), kwargs={"instances": 64, "seed": 0},
                       rounds=2, warmup_rounds=1)
    _record(benchmark, "evaluation")


def test_curve_point(benchmark):
    """One point of the held-out curve: 16 dev instances of each benchmark, sampled and scored by the
    rubric's checks and by the (simulated) training judge."""
    from setgrpo_bench.harness.curve import curve_point

    trainer = _trainer("grpo")
    benchmark.pedantic(curve_point, args=(trainer.config, trainer.engine, trainer.envs), rounds=4, warmup_rounds=1)
    _record(benchmark, "curve_point")
