"""GRPO coefficients and loss recomputed by hand on tiny batches."""

import math

import numpy as np
import pytest
import torch

from setgrpo_bench.agents import group_coefficients, grpo_coefficients
from setgrpo_bench.errors import UnknownNameError
from setgrpo_bench.harness.objective import LossSpec, grpo_loss


def test_grpo_coefficients_by_hand():
    r = np.array([0.2, 0.4, 0.9, 0.5])
    mean, std = 0.5, math.sqrt(((0.3**2) + (0.1**2) + (0.4**2) + 0) / 3)
    expected = (r - mean) / (std + 1e-4)
    assert np.allclose(grpo_coefficients(r), expected)
    assert np.isclose(grpo_coefficients(r).sum(), 0)


def test_std_floor_limits_near_constant_groups():
    r = np.array([0.70, 0.71, 0.70, 0.70])
    a = grpo_coefficients(r, std_floor=0.05, eps=0.0)
    assert np.allclose(a, (r - r.mean()) / 0.05)
    assert np.abs(a).max() < 0.2


@pytest.mark.parametrize("rewards", [[0.5, 0.5, 0.5], [1.0]])
def test_zero_variance_and_single_response_give_zeros(rewards):
    assert (grpo_coefficients(np.array(rewards)) == 0).all()


def test_invalid_grades_are_left_out_of_the_group():
    r = np.array([1.0, np.nan, 0.0, np.nan])
    a = group_coefficients("grpo", r, std_floor=0.0)
    assert a[1] == a[3] == 0
    assert np.allclose(a[[0, 2]], grpo_coefficients(np.array([1.0, 0.0]), std_floor=0.0))
    assert (group_coefficients("grpo", np.array([1.0, np.nan, np.nan])) == 0).all()
    with pytest.raises(UnknownNameError, match="Did you mean 'grpo'"):
        group_coefficients("grp", r)


def _batch():
    # two responses, three token slots; response 1 has two tokens
    logprobs = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, 0.0]], requires_grad=True)
    old = torch.tensor([[-1.5, -2.0, -0.2], [-0.5, -1.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    coef = torch.tensor([1.0, -2.0])
    return logprobs, old, mask, coef


def _per_token_by_hand(eps_low=0.2, eps_high=0.2):
    # ratios: row 0: e^0.5=1.6487 (clipped to 1.2 since a>0), 1, e^-0.3=0.7408 (a>0: min keeps 0.7408)
    # row 1: e^-0.5=0.6065 (a<0: min(ρa, clip(ρ)a) = min(-1.2131, -1.6) = -1.6 → clipped), 1
    r0 = [min(math.exp(0.5), 1 + eps_high) * 1.0, 1.0, math.exp(-0.3)]
    r1 = [max(math.exp(-0.5), 1 - eps_low) * -2.0, -2.0]
    return [-x for x in r0], [-x for x in r1]


def test_loss_normalisations_by_hand():
    logprobs, old, mask, coef = _batch()
    acc = torch.tensor([True, True])
    row0, row1 = _per_token_by_hand()
    grpo, _ = grpo_loss(logprobs, old, coef, mask, acc, LossSpec(loss_type="grpo"))
    assert grpo.item() == pytest.approx((sum(row0) / 3 + sum(row1) / 2) / 2, rel=1e-5)
    dapo, _ = grpo_loss(logprobs, old, coef, mask, acc, LossSpec(loss_type="dapo"))
    assert dapo.item() == pytest.approx((sum(row0) + sum(row1)) / 5, rel=1e-5)
    dr, _ = grpo_loss(logprobs, old, coef, mask, acc, LossSpec(loss_type="dr_grpo", max_new_tokens=4))
    assert dr.item() == pytest.approx((sum(row0) + sum(row1)) / (2 * 4), rel=1e-5)


def test_clipped_tokens_carry_no_gradient():
    logprobs, old, mask, coef = _batch()
    loss, stats = grpo_loss(logprobs, old, coef, mask, torch.tensor([True, True]))
    loss.backward()
    grad = logprobs.grad
    assert grad[0, 0] == 0 and grad[1, 0] == 0  # both clipped branches
    assert grad[0, 1] != 0 and grad[0, 2] != 0 and grad[1, 1] != 0
    assert grad[1, 2] == 0  # padding
    assert stats.clip_fraction == pytest.approx(2 / 5)


def test_asymmetric_clip_and_no_clip():
    logprobs, old, mask, coef = _batch()
    acc = torch.tensor([True, False])
    loss, _ = grpo_loss(logprobs, old, coef, mask, acc, LossSpec(epsilon_high=0.8))
    assert loss.item() == pytest.approx(-(math.exp(0.5) + 1 + math.exp(-0.3)) / 3, rel=1e-5)
    loss, _ = grpo_loss(logprobs, old, coef, mask, acc, LossSpec(clip=False))
    assert loss.item() == pytest.approx(-(math.exp(0.5) + 1 + math.exp(-0.3)) / 3, rel=1e-5)


def test_k3_kl_term():
    logprobs, old, mask, coef = _batch()
    ref = logprobs.detach() - 0.1
    zero = torch.zeros(2)
    loss, stats = grpo_loss(logprobs, old, zero, mask, torch.tensor([True, True]), LossSpec(beta=0.5), ref_logprobs=ref)
    k3 = math.exp(-0.1) + 0.1 - 1
    assert stats.kl == pytest.approx(k3, rel=1e-5) and loss.item() == pytest.approx(0.5 * k3, rel=1e-5)


def test_no_accepted_response_gives_a_zero_loss():
    logprobs, old, mask, coef = _batch()
    loss, _ = grpo_loss(logprobs, old, coef, mask, torch.tensor([False, False]))
    assert loss.item() == 0.0
    loss.backward()
    assert (logprobs.grad == 0).all()


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
def test_batch_normaliser_counts_rejected_responses_as_zeros(loss_type):
    """Normalised over the batch, the loss is the accepted-only loss scaled by (accepted / all) — in
    responses for grpo and dr_grpo, in tokens for dapo: rejecting groups shrinks the step."""
    torch.manual_seed(0)
    logprobs, old = torch.randn(6, 5) * 0.1, torch.randn(6, 5) * 0.1
    coef = torch.randn(6)
    mask = torch.ones(6, 5)
    mask[1, 3:] = 0
    accepted = torch.tensor([True, True, False, True, False, False])
    only, _ = grpo_loss(logprobs, old, coef, mask, accepted, LossSpec(loss_type=loss_type, max_new_tokens=5))
    batch, _ = grpo_loss(logprobs, old, coef, mask, accepted,
                         LossSpec(loss_type=loss_type, max_new_tokens=5, normalise_over="batch"))
    share = (mask[accepted].sum() / mask.sum()) if loss_type == "dapo" else accepted.float().mean()
    assert batch.item() == pytest.approx(only.item() * share.item(), rel=1e-6)


@pytest.mark.parametrize("overrides", [{}, {"loss_type": "dapo", "mu": 2}, {"beta": 0.05, "normalise_over": "batch"}])
def test_micro_batched_update_equals_the_whole_batch(small_policy, overrides):
    """The update runs over accepted responses only, in length-sorted micro-batches with their padding
    trimmed; with the batch's denominators the micro-batches' gradients sum to the whole batch's."""
    from setgrpo_bench.agents import Decision, resolve_config
    from setgrpo_bench.harness.suite import make_envs
    from setgrpo_bench.harness.trainer import Trainer
    from setgrpo_bench.policy import load_policy

    config = resolve_config("grpo", {"policy": small_policy, "envs": "MedicationGuide,UnitConversion",
                                     "groups_per_step": 4, "group_size": 4, "max_new_tokens": 12, **overrides})
    steps = []
    for update_batch in (3, 1000):
        trainer = Trainer(config.replace(update_batch=update_batch), load_policy(small_policy), make_envs(config))
        trainer.update.optimizer = torch.optim.SGD(trainer.policy.model.parameters(), lr=1.0)
        batch = trainer.collector.collect(4) if not steps else batch  # noqa: F821 (the first pass sets it)
        rng = np.random.default_rng(0)
        accepted = rng.random((4, 4)) < 0.7
        decision = Decision(rng.normal(size=(4, 4)), accepted)
        before = [p.detach().clone() for p in trainer.policy.model.parameters()]
        stats = trainer.update(batch.groups.rollout, decision)
        steps.append((torch.cat([(p.detach() - b).reshape(-1) for p, b in zip(trainer.policy.model.parameters(), before)]),
                      stats))
    (micro, micro_stats), (whole, whole_stats) = steps
    assert whole.abs().max() > 0
    assert (micro - whole).abs().max() <= 1e-5 * whole.abs().max()
    assert micro_stats["loss"] == pytest.approx(whole_stats["loss"], rel=1e-5, abs=1e-8)
    assert micro_stats["clip_fraction"] == pytest.approx(whole_stats["clip_fraction"], rel=1e-6)
