"""The suite as a TRL reward: one real ``GRPOTrainer`` step on CPU, graded by our noisy judge."""

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import scored_batch

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


def _setgrpo_trainer(small_policy, tmp_path, **settings):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from setgrpo_bench.integrations.trl import RubricReward, trl_dataset
    from setgrpo_bench.integrations.trl_setgrpo import SetGRPOConfig, SetGRPOTrainer
    from setgrpo_bench.policy.model import RESPONSE_MARKER

    model = AutoModelForCausalLM.from_pretrained(small_policy)
    tokenizer = AutoTokenizer.from_pretrained(small_policy, padding_side="left")
    data = trl_dataset(["MedicationGuide"], format_prompt=lambda p: p + RESPONSE_MARKER).select(range(16))
    args = SetGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=16, num_generations=4,
                         max_completion_length=10, use_cpu=True, report_to=[], logging_steps=1, seed=0,
                         disable_tqdm=True, bf16=False, loss_type="grpo", beta=0.0, **{
                             "window": 8, "warmup_groups": 4, "audit_fraction": 0.5, "alpha": 0.3, **settings})
    return SetGRPOTrainer(model=model, reward_funcs=RubricReward(["MedicationGuide"], seed=3, noise="realistic"),
                          reference_reward=RubricReward(["MedicationGuide"], seed=4, noise="expert"), args=args,
                          train_dataset=data, processing_class=tokenizer)


def test_setgrpo_trainer_decides_as_our_agent_does(small_policy, tmp_path):
    """On the same completions, grades, audits and window, SetGRPOTrainer's advantages are exactly the
    coefficients (zero where rejected) that our SetGRPOAgent decides with K from our geometry; the first
    batch only calibrates."""
    import copy

    from setgrpo_bench.agents.setgrpo import SetGRPOAgent
    from setgrpo_bench.harness.geometry import GradientGeometry
    from setgrpo_bench.policy import load_policy

    trainer = _setgrpo_trainer(small_policy, tmp_path, calibrate=False, fixed_q=0.2, gate=False)  # a few groups: a fixed set
    policy = load_policy(small_policy)
    policy.model = trainer.model
    bench = load_env_benchmark("MedicationGuide")
    tasks = [bench.instance("train", i) for i in range(4)]
    prompts = [t.prompt_text for t in tasks]
    _, _, output = scored_batch(trainer, policy, tasks, seed=0)
    assert not trainer.setgrpo_advantages(output).any() and len(trainer.agent.window) > 0  # warm-up: calibration only
    rollout, rewards, output = scored_batch(trainer, policy, tasks, seed=1)
    mine = SetGRPOAgent(trainer.agent.params, std_floor=0.05)
    mine.load_state_dict(copy.deepcopy(trainer.agent.state_dict()))
    rng = copy.deepcopy(trainer.audit_rng)
    reference = copy.deepcopy(trainer.reference_reward)  # its grading stream as the trainer will use it
    advantages = trainer.setgrpo_advantages(output).numpy()

    groups = trainer.groups(output, rewards[:, 0].numpy(), rollout.texts, trainer.reward_funcs[0].last_spreads)
    assert np.array_equal(groups.rewards.reshape(-1), rewards[:, 0].numpy(), equal_nan=True)
    needs = mine.needs(groups, rng)
    assert needs.audits
    geometry = GradientGeometry(policy.model, "full", temperature=1.0, loss_type="grpo", max_new_tokens=10)
    grams = geometry.grams(rollout, {b: groups.rows(b)[v] for b, v in needs.grams.items()}).grams
    task_ids = [bench.instance("train", b).id for b in range(4)]
    rows = [i for b in needs.audits for i in groups.rows(b)]
    scores = reference(prompts=[prompts[i // 4] for i in rows], completions=[rollout.texts[i] for i in rows],
                       task_id=[task_ids[i // 4] for i in rows])
    scores = np.array([np.nan if s is None else s for s in scores])
    audits = {b: scores[k * 4 : (k + 1) * 4] for k, b in enumerate(needs.audits)}
    ours = mine.decide(groups, grams, audits)
    _, trainer_grams, trainer_audits, decision = trainer.last_decision
    assert all(np.array_equal(grams[b], trainer_grams[b]) for b in grams) and grams.keys() == trainer_grams.keys()
    assert all(np.array_equal(audits[b], trainer_audits[b], equal_nan=True) for b in audits)
    assert np.array_equal(ours.accepted, decision.accepted) and ours.accepted.any()
    assert np.array_equal(np.where(ours.accepted, ours.coefficients, 0.0).reshape(-1).astype(np.float32), advantages)


def test_a_setgrpo_trainer_step_has_our_trainers_gradient(small_policy, tmp_path):
    """TRL's loss on SetGRPO's advantages has the gradient of our update of the same decision (GRPO loss,
    mean over every row of the batch: ``--normalise-over batch``). One prompt for every row: TRL's forward
    has no position ids, so left padding would differ."""
    import torch

    from setgrpo_bench.agents import resolve_config
    from setgrpo_bench.harness.update import PolicyUpdate
    from setgrpo_bench.policy import GenerationConfig, TransformersEngine, load_policy

    trainer = _setgrpo_trainer(small_policy, tmp_path, calibrate=False, fixed_q=0.2, gate=False)
    policy = load_policy(small_policy)
    policy.model = trainer.model
    task = load_env_benchmark("MedicationGuide").instance("train", 0)
    trainer.setgrpo_advantages(scored_batch(trainer, policy, [task] * 4, seed=0)[2])  # warm-up
    rollout, _, output = scored_batch(trainer, policy, [task] * 4, seed=1)
    output["advantages"] = trainer.setgrpo_advantages(output)
    decision = trainer.last_decision[3]
    assert decision.accepted.any()
    policy.model.zero_grad(set_to_none=True)
    trainer._compute_loss(policy.model, output).backward()
    trl_grad = {n: p.grad.clone() for n, p in policy.model.named_parameters()}
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    config = resolve_config("setgrpo", {"policy": small_policy, "max_new_tokens": 10, "max_grad_norm": 1e9,
                                        "normalise_over": "batch"})
    update = PolicyUpdate(config, policy, TransformersEngine(policy, GenerationConfig(max_new_tokens=10)), None)
    update.optimizer = torch.optim.SGD(policy.model.parameters(), lr=1.0)  # the step is minus the gradient
    update(rollout, decision)
    for name, param in policy.model.named_parameters():
        assert torch.allclose(before[name] - param.detach(), trl_grad[name], rtol=1e-4, atol=1e-7), name


def test_setgrpo_config_keeps_trls_fields_and_adds_ours_with_their_help():
    import dataclasses

    from trl import GRPOConfig

    from setgrpo_bench.agents.config import SetGRPOSettings
    from setgrpo_bench.integrations.trl_setgrpo import SetGRPOConfig

    ours = {f.name: f for f in dataclasses.fields(SetGRPOConfig)}
    assert {f.name for f in dataclasses.fields(GRPOConfig)} < set(ours)
    assert ours["risk_delta"].default == SetGRPOSettings.__pydantic_fields__["delta"].default
    assert ours["delta"].default is None  # TRL's own two-sided clipping bound, untouched
    assert ours["alpha_a_grid"].metadata["help"] == SetGRPOSettings.__pydantic_fields__["alpha_a_grid"].description


def test_setgrpo_trainer_saves_and_restores_its_window_with_trls_checkpoints(small_policy, tmp_path):
    """3 steps, a checkpoint at step 3 holding the window; a trainer resumed from it continues that window
    (the saved groups, then the audits of the steps it runs: transformers runs one more step here)."""
    trainer = _setgrpo_trainer(small_policy, tmp_path, max_steps=3, save_strategy="steps", save_steps=3)
    trainer.train()
    saved = trainer.agent.state_dict()
    assert (tmp_path / "checkpoint-3" / "setgrpo_window.pt").is_file() and saved["audits"] > 0
    assert any(k.startswith("setgrpo/") for entry in trainer.state.log_history for k in entry)
    resumed = _setgrpo_trainer(small_policy, tmp_path, max_steps=3, save_strategy="no")
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    state = resumed.agent.state_dict()
    new = state["audits"] - saved["audits"]
    assert 0 <= new < saved["audits"]  # counted on from the checkpoint's window, not from an empty one
    kept = saved["window"][new:] if new else saved["window"]
    for (fold, group), (fold2, group2) in zip(kept, state["window"]):
        assert fold == fold2 and np.array_equal(group["gram"], group2["gram"])
        assert np.array_equal(group["a_ref"], group2["a_ref"])


def test_setgrpo_trainer_decides_once_for_all_data_parallel_processes(small_policy, tmp_path):
    """Two processes (torchrun, gloo), a group straddling them: both hold the same K, audits, decision and
    window; K of the groups each process owns equals K computed in one process over the gathered batch;
    the gathered rows keep TRL's order (each group one task); and each process trains on its own slice of
    the coefficients."""
    import socket
    import subprocess
    import sys

    import torch

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = Path(__file__).parent / "distributed" / "setgrpo_two_processes.py"
    logs = tmp_path / "logs"  # each process's own output: the launcher's shows only that one failed
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr",
                           "127.0.0.1", "--master_port", str(port), "--log-dir", str(logs), "--redirects", "3",
                           str(script), small_policy, str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, "\n".join(f"{f.relative_to(logs)}: {f.read_text()[-2000:]}"
                                           for f in sorted(logs.rglob("std*.log"))) + done.stderr[-1500:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    assert [r["processes"] for r in ranks] == [2, 2]
    (first,), (second,) = (r["records"] for r in ranks)
    for key in ("accepted", "coefficients", "rewards"):
        assert np.array_equal(first[key], second[key]), key
    assert first["texts"] == second["texts"] and first["task_ids"] == second["task_ids"]
    assert all(len(set(first["task_ids"][b * 4 : (b + 1) * 4])) == 1 for b in range(3))  # groups intact
    assert first["grams"].keys() == second["grams"].keys() and {0, 1} <= set(first["grams"])  # both processes own one
    for b, gram in first["grams"].items():
        assert np.array_equal(gram, second["grams"][b])
        np.testing.assert_allclose(gram, first["single_grams"][b], rtol=1e-5, atol=1e-6 * np.abs(gram).max())
    assert first["audits"].keys() == second["audits"].keys() and first["audits"]
    assert all(np.array_equal(first["audits"][b], second["audits"][b], equal_nan=True) for b in first["audits"])
    executed = np.where(first["accepted"], first["coefficients"], 0.0).reshape(-1).astype(np.float32)
    assert first["accepted"].any() and np.array_equal(np.concatenate([first["advantages"], second["advantages"]]), executed)
    windows = [r["window"]["window"] for r in ranks]
    assert len(windows[0]) == len(windows[1]) > 0
    assert all(np.array_equal(g["gram"], h["gram"]) and np.array_equal(g["a_ref"], h["a_ref"], equal_nan=True)
               for (_, g), (_, h) in zip(*windows))
