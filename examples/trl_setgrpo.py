"""Train the embedded policy with SetGRPO inside TRL (``SetGRPOTrainer``) on the built-in suite against the
`realistic` judge, with the `expert` profile as the reference, then evaluate the result with
setgrpo_bench's held-out evaluation.

    pip install -e ".[trl]"
    python examples/trl_setgrpo.py --steps 20 --out runs/trl-setgrpo
    python -m setgrpo_bench evaluate --policy runs/trl-setgrpo/policy    # (the script does this too)

On GPUs the same script runs under accelerate, data parallel (each process generates its share of the
batch; SetGRPO's decision is taken on the whole batch, identically on every process), e.g.
``accelerate launch --num_processes 4 examples/trl_setgrpo.py --model PATH --gpu``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from setgrpo_bench.integrations.trl import RubricReward, trl_dataset
from setgrpo_bench.integrations.trl_setgrpo import SetGRPOConfig, SetGRPOTrainer
from setgrpo_bench.policy import policy_path
from setgrpo_bench.policy.model import RESPONSE_MARKER


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="SetGRPOTrainer optimiser steps")
    parser.add_argument("--noise", default="realistic", help="judge profile of the reward")
    parser.add_argument("--reference", default="expert", help="judge profile of the reference reward (audits)")
    parser.add_argument("--model", default=None, help="a causal-LM folder (default: the embedded policy)")
    parser.add_argument("--gpu", action="store_true", help="train on the GPU (default: CPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/trl-setgrpo")
    args = parser.parse_args()
    start = args.model or policy_path("tiny")
    model = AutoModelForCausalLM.from_pretrained(start)
    tokenizer = AutoTokenizer.from_pretrained(start, padding_side="left")
    dataset = trl_dataset("builtin", format_prompt=lambda prompt: prompt + RESPONSE_MARKER).shuffle(seed=args.seed)
    config = SetGRPOConfig(
        output_dir=args.out, per_device_train_batch_size=128, num_generations=8, max_completion_length=72,
        temperature=1.0, top_k=0, learning_rate=5e-4, beta=0.0, loss_type="grpo", max_steps=args.steps,
        logging_steps=1, report_to=[], save_strategy="no", use_cpu=not args.gpu, bf16=False, seed=args.seed,
        lr_scheduler_type="constant", alpha_a_grid="0.5,0.8,0.9", gate_start=0.5, window=256, execute="original",
    )
    trainer = SetGRPOTrainer(
        model=model, reward_funcs=RubricReward("builtin", seed=args.seed, noise=args.noise),
        reference_reward=RubricReward("builtin", seed=args.seed + 1, noise=args.reference), args=config,
        train_dataset=dataset, processing_class=tokenizer,
    )
    trainer.train()
    if not trainer.accelerator.is_main_process:
        return  # one process saves and evaluates
    trained = Path(args.out) / "policy"
    trainer.accelerator.unwrap_model(trainer.model).save_pretrained(trained)
    tokenizer.save_pretrained(trained)
    sys.exit(subprocess.call([sys.executable, "-m", "setgrpo_bench", "evaluate", "--policy", str(trained),
                              "--noise", args.noise, "--seed", str(args.seed), "--out", str(Path(args.out) / "eval")]))


if __name__ == "__main__":
    main()
