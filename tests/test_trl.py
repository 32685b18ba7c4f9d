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


def test_our_grpo_update_equals_trls_loss_on_batches_with_constant_and_invalid_groups(small_policy, tmp_path):
    """``grpo`` is the field's reference GRPO: on a batch holding a zero-variance group and invalid
    grades, its loss and gradient equal TRL's ``_compute_loss`` (loss_type="grpo": every row of the
    batch in the mean, zero-advantage rows included) given the same coefficients as advantages."""
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from setgrpo_bench.agents import Groups, RuleAgent, resolve_config
    from setgrpo_bench.harness.update import PolicyUpdate
    from setgrpo_bench.policy import GenerationConfig, TransformersEngine, load_policy
    from setgrpo_bench.policy.model import RESPONSE_MARKER

    config = resolve_config("grpo", {"policy": small_policy, "max_new_tokens": 10, "max_grad_norm": 1e9})
    assert config.objective.normalise_over == "batch"
    policy = load_policy(small_policy)
    task = load_env_benchmark("MedicationGuide").instance("train", 0)
    torch.manual_seed(0)  # one prompt for every row, so that no row is left-padded (TRL's forward has no position ids)
    rollout = TransformersEngine(policy, GenerationConfig(max_new_tokens=10)).generate([task.prompt_text] * 12)
    rewards = np.array([[0.2, 0.9, 0.5, 0.4], [0.5, 0.5, 0.5, 0.5], [0.7, np.nan, 0.1, np.nan]])
    groups = Groups(rollout, [task] * 3, [0] * 3, rewards, np.full_like(rewards, 0.05))
    decision = RuleAgent("grpo", std_floor=config.coefficients.std_floor).decide(groups, {}, {})
    assert not decision.accepted[1].any() and not decision.accepted[2, [1, 3]].any()

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_completion_length=10,
                      use_cpu=True, report_to=[], loss_type="grpo", beta=0.0, bf16=False)
    data = trl_dataset_of([task.prompt_text + RESPONSE_MARKER])
    trainer = GRPOTrainer(model=policy.model, reward_funcs=lambda completions, **_: [0.0] * len(completions), args=args,
                          train_dataset=data, processing_class=policy.tokenizer)
    inputs = {"prompt_ids": rollout.prompt_ids, "prompt_mask": rollout.prompt_mask, "completion_ids": rollout.response_ids,
              "completion_mask": rollout.response_mask, "advantages": torch.tensor(decision.coefficients.reshape(-1),
                                                                                     dtype=torch.float32)}
    policy.model.zero_grad(set_to_none=True)
    trl_loss = trainer._compute_loss(policy.model, inputs)
    trl_loss.backward()
    trl_grad = {n: p.grad.clone() for n, p in policy.model.named_parameters()}
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}

    update = PolicyUpdate(config, policy, TransformersEngine(policy, GenerationConfig(max_new_tokens=10)), None)
    update.optimizer = torch.optim.SGD(policy.model.parameters(), lr=1.0)  # the step is minus the gradient
    ours = update(rollout, decision)
    assert ours["loss"] == pytest.approx(trl_loss.item(), abs=1e-6)  # ≈ 0 at ratio 1: the gradient tells
    for name, param in policy.model.named_parameters():
        step = before[name] - param.detach()
        assert torch.allclose(step, trl_grad[name], rtol=1e-4, atol=1e-7), name


def trl_dataset_of(prompts):
    from datasets import Dataset

    return Dataset.from_dict({"prompt": list(prompts)})
