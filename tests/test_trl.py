"""The suite as a TRL reward: one real ``GRPOTrainer`` step on CPU, graded by our noisy judge."""

import numpy as np
import pytest

from setgrpo_bench.envs import RubricEnv, load_env_benchmark
from setgrpo_bench.harness.seeds import generator, name_key

trl = pytest.importorskip("trl", reason="the TRL integration needs the [trl] extra")


def test_dataset_holds_train_prompts_with_task_ids():
    from setgrpo_bench.integrations.trl import trl_dataset

    data = trl_dataset(["MedicationGuide", "UnitConversion"], format_prompt=lambda p: p + "|")
    bench = load_env_benchmark("UnitConversion")
    assert len(data) == load_env_benchmark("MedicationGuide").size("train") + bench.size("train")
    row = data[len(data) - 1]
    task = bench.instance("train", bench.size("train") - 1)
    assert row == {"prompt": task.prompt_text + "|", "task_id": task.id, "env_id": "setgrpo/UnitConversion-v0"}


def test_a_grpo_trainer_step_is_rewarded_by_our_judge(small_policy, tmp_path):
    """The scores TRL trains on are our grader's scores of the same completions from the same seeded
    stream; invalid grades reach TRL as None; the true score is logged, not rewarded."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from setgrpo_bench.integrations.trl import RubricReward, trl_dataset
    from setgrpo_bench.policy.model import RESPONSE_MARKER

    reward = RubricReward(["MedicationGuide"], seed=3, noise="realistic")
    seen = []

    def recorded(prompts, completions, task_id, **kwargs):
        scores = reward(prompts, completions, task_id, **kwargs)
        seen.append((list(completions), list(task_id), scores))
        return scores

    recorded.__name__ = "rubric_judge"
    model = AutoModelForCausalLM.from_pretrained(small_policy)
    tokenizer = AutoTokenizer.from_pretrained(small_policy, padding_side="left")
    data = trl_dataset(["MedicationGuide"], format_prompt=lambda p: p + RESPONSE_MARKER).select(range(8))
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=8, max_steps=1, use_cpu=True, report_to=[], save_strategy="no",
                      logging_steps=1, seed=0, disable_tqdm=True, bf16=False)
    GRPOTrainer(model=model, reward_funcs=recorded, args=args, train_dataset=data, processing_class=tokenizer).train()
    assert seen
    env = RubricEnv("MedicationGuide", noise="realistic")
    rng = generator(3, "grading", name_key("MedicationGuide"))
    for completions, task_ids, scores in seen:
        for task in dict.fromkeys(task_ids):
            rows = [i for i, t in enumerate(task_ids) if t == task]
            grades = env.grade_group([completions[i].strip() for i in rows], task=task, rng=rng)
            assert [scores[i] for i in rows] == [g.score if g.valid else None for g in grades]
    assert len(reward.true_scores) == sum(len(c) for c, _, _ in seen)
    assert not np.isnan(reward.true_scores).any()
