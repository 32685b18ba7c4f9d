"""SetGRPOTrainer in two data-parallel processes on CPU (gloo), launched with torchrun by
``tests/test_trl.py``: 3 groups of 4 completions per generation batch, 6 completions per process, so
group 1 straddles the two processes. Each process records what it decided, its own advantages and K
recomputed in this one process over the gathered batch, then its window.

    torchrun --nproc_per_node 2 tests/distributed/setgrpo_two_processes.py POLICY OUT
"""

import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from setgrpo_bench.harness.geometry import GradientGeometry
from setgrpo_bench.integrations.trl import RubricReward, trl_dataset
from setgrpo_bench.integrations.trl_setgrpo import SetGRPOConfig, SetGRPOTrainer
from setgrpo_bench.policy.model import RESPONSE_MARKER


class RecordingTrainer(SetGRPOTrainer):
    records: list[dict] = []

    def setgrpo_advantages(self, output):
        before = self.last_decision
        advantages = super().setgrpo_advantages(output)
        if self.last_decision is before:
            return advantages  # the warm-up batch only calibrates
        groups, grams, audits, decision = self.last_decision
        single = GradientGeometry(self.accelerator.unwrap_model(self.model), "full", temperature=1.0,
                                  loss_type="grpo", max_new_tokens=self.args.max_completion_length)
        full_rows = {b: groups.rows(b) for b in grams if grams[b].shape[0] == self.num_generations}
        inputs = self.generation_batch(output)[1]
        self.records.append({
            "advantages": advantages.numpy(), "accepted": decision.accepted, "coefficients": decision.coefficients,
            "grams": grams, "audits": audits, "rewards": groups.rewards, "texts": groups.rollout.texts,
            "task_ids": [row["task_id"] for row in inputs], "single_grams": single.grams(groups.rollout, full_rows).grams,
        })
        return advantages


def main(policy: str, out: str) -> None:
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(policy)
    tokenizer = AutoTokenizer.from_pretrained(policy, padding_side="left")
    data = trl_dataset(["MedicationGuide"], format_prompt=lambda p: p + RESPONSE_MARKER).select(range(16))
    args = SetGRPOConfig(output_dir=out, per_device_train_batch_size=6, num_generations=4, max_completion_length=10,
                         use_cpu=True, report_to=[], logging_steps=1, seed=0, disable_tqdm=True, bf16=False,
                         loss_type="grpo", beta=0.0, max_steps=2, save_strategy="no", window=8, warmup_groups=3,
                         audit_fraction=0.7, alpha=0.3, calibrate=False, fixed_q=0.2, gate=False)
    trainer = RecordingTrainer(model=model, reward_funcs=RubricReward(["MedicationGuide"], seed=3, noise="realistic"),
                               reference_reward=RubricReward(["MedicationGuide"], seed=4, noise="expert"), args=args,
                               train_dataset=data, processing_class=tokenizer)
    trainer.train()
    rank = trainer.accelerator.process_index
    torch.save({"records": trainer.records, "window": trainer.agent.state_dict(), "rank": rank,
                "processes": trainer.accelerator.num_processes}, f"{out}/rank{rank}.pt")


if __name__ == "__main__":
    main(*sys.argv[1:3])
