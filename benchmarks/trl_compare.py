"""Our GRPO training step against TRL's ``GRPOTrainer``, side by side in one process.

Same embedded tiny model, same reward (the built-in suite's judge, ``realistic`` profile), same batch
shape (16 prompts × 8 completions, 72 new tokens), same sampling and optimiser settings. Prints the
mean step time of each (first step of each excluded as warm-up) and their ratio.

Run: ``pip install -e ".[trl]" && python benchmarks/trl_compare.py [--steps 4]`` on an idle machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.harness.allocator import keep_freed_memory
from setgrpo_bench.harness.suite import make_envs
from setgrpo_bench.harness.trainer import Trainer
from setgrpo_bench.integrations.trl import RubricReward, trl_dataset
from setgrpo_bench.policy import load_policy, policy_path
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
    trainer.warm_up()
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        trainer.step()
        times.append(time.perf_counter() - start)
    return times[1:]


def trl(config, steps: int) -> list[float]:
    dataset = trl_dataset(config.run.envs, format_prompt=lambda prompt: prompt + RESPONSE_MARKER).shuffle(seed=0)
    reward = RubricReward(config.run.envs, seed=0, noise=config.grading.noise)
    path = policy_path("tiny")
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
        GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=tokenizer,
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
