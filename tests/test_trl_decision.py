"""SetGRPOTrainer's decision path (integrations/trl_setgrpo.py) without TRL's training loop: the batch as
groups, the reference's audits, the work shared between processes, and the advantages of a process's
slice. test_trl.py runs the same path inside TRL; these run in a second and pin each step alone."""

import copy
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import scored_batch

pytest.importorskip("trl")

from setgrpo_bench.agents.config import SetGRPOSettings  # noqa: E402
from setgrpo_bench.agents.setgrpo import SetGRPOAgent  # noqa: E402
from setgrpo_bench.envs import load_env_benchmark  # noqa: E402
from setgrpo_bench.errors import ConfigError  # noqa: E402
from setgrpo_bench.integrations import trl_setgrpo  # noqa: E402
from setgrpo_bench.integrations.trl_setgrpo import SetGRPOTrainer  # noqa: E402

G = 4


class Judge:
    """A reward function as TRL calls it, reporting its spreads; it fails (None) on a completion that
    starts with "bad"."""

    def __init__(self, offset: float = 0.0) -> None:
        self.calls, self.offset = [], offset

    def __call__(self, *, prompts, completions, completion_ids=None, **columns):
        self.calls.append({"prompts": prompts, "completions": completions, "completion_ids": completion_ids, **columns})
        self.last_spreads = [0.1 if i % 5 else float("nan") for i in range(len(prompts))]
        return [None if c.startswith("bad") else (len(c) % 10) / 10 + self.offset for c in completions]


def _trainer(model=None, processes: int = 1, rank: int = 0, loss_type: str = "grpo", **settings) -> SetGRPOTrainer:
    """A SetGRPOTrainer with the state its decision path reads, built without TRL's trainer."""
    trainer = SetGRPOTrainer.__new__(SetGRPOTrainer)
    trainer.num_generations = G
    trainer.accelerator = SimpleNamespace(num_processes=processes, process_index=rank, unwrap_model=lambda m: m)
    trainer.args = SimpleNamespace(temperature=1.0, loss_type=loss_type, max_completion_length=10)
    trainer.model, trainer.geometry, trainer.last_decision = model, None, None
    trainer.agent = SetGRPOAgent(SetGRPOSettings(**{"window": 8, "warmup_groups": 4, "audit_fraction": 0.5,
                                                    "alpha": 0.3, **settings}), std_floor=0.05)
    trainer.reward_funcs, trainer.reference_reward = [Judge()], Judge(offset=0.05)
    trainer.audit_rng = np.random.default_rng(0)
    trainer._metrics = {"train": defaultdict(list)}
    return trainer


def _tensors(batch: int, width: int = 5) -> dict[str, torch.Tensor]:
    ids = torch.arange(batch * width).reshape(batch, width)
    return {"prompt_ids": ids, "prompt_mask": torch.ones_like(ids), "completion_ids": ids + 1,
            "completion_mask": torch.ones_like(ids)}


def test_the_batch_becomes_groups_of_num_generations_with_spreads_and_no_nan():
    trainer = _trainer()
    spreads = [0.1, float("nan"), 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    groups = trainer.groups(_tensors(8), np.arange(8.0), [f"c{i}" for i in range(8)], spreads)
    assert groups.rewards.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    np.testing.assert_array_equal(groups.spreads, [[0.1, 0.0, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]])
    assert groups.rollout.texts == [f"c{i}" for i in range(8)] and torch.equal(groups.rollout.response_ids,
                                                                                 _tensors(8)["completion_ids"])
    with pytest.raises(ConfigError, match="generation batch.*6.*whole groups of num_generations = 4"):
        trainer.groups(_tensors(6), np.arange(6.0), ["c"] * 6, [0.0] * 6)


def test_an_audit_asks_the_reference_for_the_audited_groups_rows_as_trl_calls_a_reward():
    trainer = _trainer()
    inputs = [{"prompt": f"p{i // G}", "task_id": f"t{i // G}", "completion": "x", "completion_ids": [0]}
              for i in range(12)]
    prompts, ids = [f"p{i // G}" for i in range(12)], [[i] for i in range(12)]
    completions = ["bad" if i == 9 else f"c{i:03d}" * (i + 1) for i in range(12)]
    assert trainer.audit([], inputs, prompts, completions, ids) == {} and trainer.reference_reward.calls == []
    audits = trainer.audit([2, 0], inputs, prompts, completions, ids)
    [call] = trainer.reference_reward.calls
    rows = [8, 9, 10, 11, 0, 1, 2, 3]
    assert call == {"prompts": [prompts[i] for i in rows], "completions": [completions[i] for i in rows],
                    "completion_ids": [ids[i] for i in rows], "task_id": [inputs[i]["task_id"] for i in rows]}
    expected = np.array([(len(c) % 10) / 10 + 0.05 for c in call["completions"]])
    expected[1] = np.nan  # a failed grade stays a NaN, never a 0
    assert list(audits) == [2, 0]
    np.testing.assert_array_equal(audits[2], expected[:4])
    np.testing.assert_array_equal(audits[0], expected[4:])


def test_work_is_shared_by_group_owner_and_gathered_in_the_order_asked(monkeypatch):
    asked = []

    def compute(mine):
        asked.append(mine)
        return {b: 10 * b for b in mine}

    assert _trainer().shared([3, 1, 2], compute) == {3: 30, 1: 10, 2: 20} and asked == [[3, 1, 2]]
    asked.clear()
    # two processes: this one (rank 1) computes the odd groups, the other the even ones
    monkeypatch.setattr(trl_setgrpo, "gather_object", lambda parts: [{0: "zero", 4: "four"}, *parts])
    merged = _trainer(processes=2, rank=1).shared([4, 3, 0, 5, 1], compute)
    assert asked == [[3, 5, 1]] and list(merged.items()) == [(4, "four"), (3, 30), (0, "zero"), (5, 50), (1, 10)]


def test_a_batch_gathered_from_two_processes_pads_prompts_left_and_completions_right(monkeypatch):
    trainer = _trainer(processes=2)
    padded = []

    def pad(t, dim, pad_first):
        padded.append((dim, pad_first))
        return t

    trainer.accelerator.pad_across_processes, trainer.accelerator.gather = pad, lambda t: torch.cat([t, t + 100])
    monkeypatch.setattr(trl_setgrpo, "gather_object", lambda rows: rows + rows)
    inputs = [{"prompt": "p"}] * 4
    trainer._scored = (inputs, ["p"] * 4, ["c0", "c1", "c2", "c3"], [[0], [1], [2], [3]], torch.zeros(4, 1))
    tensors, *rows, spreads = trainer.generation_batch(_tensors(4))
    assert padded == [(1, True), (1, True), (1, False), (1, False)]  # prompt_ids, prompt_mask, completion_*
    assert torch.equal(tensors["completion_ids"], torch.cat([_tensors(4)["completion_ids"]] * 2) + torch.tensor(
        [0] * 4 + [100] * 4)[:, None])
    assert rows == [inputs * 2, ["p"] * 8, ["c0", "c1", "c2", "c3"] * 2, [[0], [1], [2], [3]] * 2]
    assert spreads == [0.0] * 8  # no spreads reported: zeros
    trainer.reward_funcs[0].last_spreads = [0.1, 0.2, 0.3, 0.4]
    assert trainer.generation_batch(_tensors(4))[-1] == [0.1, 0.2, 0.3, 0.4] * 2


@pytest.mark.parametrize("warmup_groups, calibrates_first", [(0, False), (1, True), (4, True)])
def test_the_first_batch_only_calibrates_when_there_is_a_warm_up(small_policy, warmup_groups, calibrates_first):
    from setgrpo_bench.policy import load_policy

    policy = load_policy(small_policy)
    trainer = _trainer(policy.model, warmup_groups=warmup_groups, calibrate=False, fixed_q=0.2, gate=False)
    tasks = [load_env_benchmark("MedicationGuide").instance("train", i) for i in range(4)]
    trainer.setgrpo_advantages(scored_batch(trainer, policy, tasks, seed=0)[2])
    assert (trainer.last_decision is None) == calibrates_first
    if calibrates_first:  # every non-constant group of the warm-up batch is audited into the window
        groups = trainer.groups(scored_batch(trainer, policy, tasks, seed=0)[2], trainer._scored[4][:, 0].numpy(),
                                trainer._scored[2], trainer.reward_funcs[0].last_spreads)
        assert len(trainer.agent.window) == len(trainer.agent.observed(groups)) > 1


def test_the_advantages_are_the_agents_coefficients_after_a_calibration_only_first_batch(small_policy):
    from setgrpo_bench.policy import load_policy

    from setgrpo_bench.harness.geometry import GradientGeometry

    policy = load_policy(small_policy)
    trainer = _trainer(policy.model, loss_type="dr_grpo", geometry="last:1", calibrate=False, fixed_q=0.2, gate=False)
    tasks = [load_env_benchmark("MedicationGuide").instance("train", i) for i in range(4)]
    first = trainer.setgrpo_advantages(scored_batch(trainer, policy, tasks, seed=0)[2])
    assert torch.equal(first, torch.zeros(16)) and trainer.last_decision is None
    assert len(trainer.agent.window) > 0 and trainer._metrics["train"]["setgrpo/warmup_groups"] == [
        float(len(trainer.agent.window))]
    mine = copy.deepcopy(trainer.agent)
    rng = copy.deepcopy(trainer.audit_rng)
    decide = trainer.agent.decide

    def reject_group_1(*args):  # the gate accepts all or none of a batch this small: one group made rejected
        decision = decide(*args)
        decision.accepted[1] = False
        return decision

    trainer.agent.decide = reject_group_1
    output = scored_batch(trainer, policy, tasks, seed=1)[2]
    advantages = trainer.setgrpo_advantages(output)
    groups, grams, audits, decision = trainer.last_decision
    spreads = np.nan_to_num(np.array(trainer.reward_funcs[0].last_spreads), nan=0.0).reshape(-1, G)
    assert np.array_equal(groups.spreads, spreads) and spreads.any()  # the judge's own spreads, NaN as 0
    assert list(mine.needs(groups, rng, warmup=False).audits) == list(audits)
    ours_k = GradientGeometry(policy.model, "last:1", temperature=1.0, loss_type="dr_grpo", max_new_tokens=10).grams(
        groups.rollout, {b: groups.rows(b) for b in grams}).grams
    assert grams.keys() == ours_k.keys() and all(np.array_equal(grams[b], ours_k[b]) for b in grams)
    ours = mine.decide(groups, grams, audits)
    ours.accepted[1] = False
    executed = np.where(ours.accepted, ours.coefficients, 0.0).reshape(-1)
    assert ours.accepted.any() and ours.coefficients[1].any()  # the rejected group's advantages are zeros
    assert advantages.dtype == torch.float32 and torch.equal(advantages, torch.tensor(executed, dtype=torch.float32))
    logged = trainer._metrics["train"]
    assert logged["setgrpo/q"] == [0.2] and logged["setgrpo/acceptance_nonconstant"] == [decision.stats[
        "acceptance_nonconstant"]]
    assert all(k.startswith("setgrpo/") and np.isfinite(v).all() for k, v in logged.items())
    mine.update(groups, grams, audits)  # the audited groups join the window after the decision
    assert [fold for fold, _ in trainer.agent.window] == [fold for fold, _ in mine.window]
    assert all(np.array_equal(g.gram, h.gram) for (_, g), (_, h) in zip(trainer.agent.window, mine.window))


def test_a_process_keeps_the_advantages_of_its_own_slice(small_policy, monkeypatch):
    """Rank 1 of 2 holds rows 8–15 of a 16-row batch and keeps their coefficients of the decision on the
    whole batch. The gathering is replaced by the whole batch here (test_trl.py runs two real processes)."""
    from setgrpo_bench.policy import load_policy

    policy = load_policy(small_policy)
    tasks = [load_env_benchmark("MedicationGuide").instance("train", i) for i in range(4)]
    whole, half = (_trainer(policy.model, processes=n, rank=n - 1, calibrate=False, fixed_q=0.2, gate=False)
                   for n in (1, 2))
    monkeypatch.setattr(half, "shared", lambda keys, compute: compute(list(keys)))
    for seed in (0, 1):
        outputs = [scored_batch(t, policy, tasks, seed)[2] for t in (whole, half)]
        gathered = (outputs[1], *half._scored[:4], half.reward_funcs[0].last_spreads)
        monkeypatch.setattr(half, "generation_batch", lambda output, gathered=gathered: gathered)
        half._scored = (*(rows[8:] for rows in half._scored[:4]), half._scored[4])  # this rank's slice
        mine, theirs = (t.setgrpo_advantages(o) for t, o in zip((whole, half), outputs))
    assert len(theirs) == 8 and torch.equal(theirs, mine[8:]) and mine[8:].any() and mine[:8].any()
