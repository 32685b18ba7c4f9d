"""Our GRPO training step against TRL's ``GRPOTrainer``, side by side in one process.

Same embedded tiny model, same reward (the built-in suite's judge, ``realistic`` profile), same batch
shape (16 prompts × 8 completions, 72 new tokens), same sampling and optimiser settings. Prints the
mean step time of each (first step of each excluded as warm-up) and their ratio.

Run: ``pip install -e ".[bench]" && python benchmarks/trl_compare.py [--steps 4]``
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time

import numpy as np
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.envs import RubricEnv
from setgrpo_bench.harness.allocator import keep_freed_memory
from setgrpo_bench.harness.suite import make_envs
from setgrpo_bench.harness.trainer import Trainer
from setgrpo_bench.policy import build_tiny, load_policy
from setgrpo_bench.policy.model import RESPONSE_MARKER


class StepTimer(TrainerCallback):
    """Wall time of every optimiser step of a transformers Trainer."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self._start)


def ours(config, steps: int) -> list[float]:
    torch.manual_seed(0)
    trainer = Trainer(config, load_policy("tiny"), make_envs(config))
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        trainer.step()
        times.append(time.perf_counter() - start)
    return times[1:]


def trl(config, steps: int) -> list[float]:
    envs = {env.benchmark.name: env for env in make_envs(config)}
    rng = np.random.default_rng(0)
    rows = [
        {"prompt": task.prompt_text + RESPONSE_MARKER, "benchmark": name, "index": i}
        for name, env in envs.items() for i in range(64) if (task := env.benchmark.instance("train", i))
    ]
    dataset = Dataset.from_list([rows[i] for i in rng.permutation(len(rows))])

    def judge(prompts, completions, benchmark, index, **_):
        out = []
        for text, name, i in zip(completions, benchmark, index):
            env: RubricEnv = envs[name]
            grade = env.grader.grade(env.benchmark.instance("train", int(i)), text.strip(), rng)
            out.append(None if math.isnan(grade.score) else grade.score)
        return out

    path = build_tiny()
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    timer = StepTimer()
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out, per_device_train_batch_size=config.run.groups_per_step * config.run.group_size,
            num_generations=config.run.group_size, max_completion_length=config.rollout.max_new_tokens,
            temperature=config.rollout.temperature, top_p=config.rollout.top_p, top_k=0,
            learning_rate=config.objective.lr, beta=config.objective.beta, epsilon=config.objective.epsilon_low,
            loss_type="grpo", num_iterations=config.objective.mu, max_grad_norm=config.objective.max_grad_norm, max_steps=steps + 1, logging_steps=1, report_to=[],
            save_strategy="no", use_cpu=True, bf16=False, seed=0, disable_tqdm=True, lr_scheduler_type="constant",
            warmup_steps=0,
        )
        GRPOTrainer(model=model, reward_funcs=judge, args=args, train_dataset=dataset, processing_class=tokenizer,
                    callbacks=[timer]).train()
    return timer.times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="timed steps of each (after one warm-up step)")
    steps = parser.parse_args().steps
    keep_freed_memory()
    config = resolve_config("grpo", {"noise": "realistic"})
    ours_times, trl_times = ours(config, steps), trl(config, steps)
    print(f"setgrpo_bench GRPO step: {np.mean(ours_times):.2f} s  (steps: {np.round(ours_times, 2).tolist()})")
    print(f"TRL GRPOTrainer step:    {np.mean(trl_times):.2f} s  (steps: {np.round(trl_times, 2).tolist()})")
    print(f"ratio ours / TRL: {np.mean(ours_times) / np.mean(trl_times):.2f}")


if __name__ == "__main__":
    main()
