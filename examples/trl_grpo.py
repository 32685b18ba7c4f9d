"""Train TRL's GRPOTrainer on the built-in suite against the `realistic` noisy judge, starting from the
embedded policy, then evaluate the result with setgrpo_bench's held-out evaluation.

    pip install -e ".[trl]"
    python examples/trl_grpo.py --steps 20 --out runs/trl-grpo
    python -m setgrpo_bench evaluate --policy runs/trl-grpo/policy      # (the script does this too)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from setgrpo_bench.integrations.trl import RubricReward, trl_dataset
from setgrpo_bench.policy import policy_path
from setgrpo_bench.policy.model import RESPONSE_MARKER


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="GRPOTrainer optimiser steps")
    parser.add_argument("--noise", default="realistic", help="judge profile of the reward")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/trl-grpo")
    args = parser.parse_args()
    start = policy_path("tiny")
    model = AutoModelForCausalLM.from_pretrained(start)
    tokenizer = AutoTokenizer.from_pretrained(start, padding_side="left")
    dataset = trl_dataset("builtin", format_prompt=lambda prompt: prompt + RESPONSE_MARKER).shuffle(seed=args.seed)
    config = GRPOConfig(
        output_dir=args.out, per_device_train_batch_size=128, num_generations=8, max_completion_length=72,
        temperature=1.0, top_k=0, learning_rate=5e-4, beta=0.0, max_steps=args.steps, logging_steps=1,
        report_to=[], save_strategy="no", use_cpu=True, bf16=False, seed=args.seed, lr_scheduler_type="constant",
    )
    reward = RubricReward("builtin", seed=args.seed, noise=args.noise)
    GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=dataset, processing_class=tokenizer).train()
    trained = Path(args.out) / "policy"
    model.save_pretrained(trained)
    tokenizer.save_pretrained(trained)
    sys.exit(subprocess.call([sys.executable, "-m", "setgrpo_bench", "evaluate", "--policy", str(trained),
                              "--noise", args.noise, "--seed", str(args.seed), "--out", str(Path(args.out) / "eval")]))


if __name__ == "__main__":
    main()
