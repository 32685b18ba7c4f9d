"""The optimiser step taken one parameter at a time (harness/update.py): the same weights and optimiser
state as one ``step()``, and ‖Δθ‖ of the step without a copy of the model."""

import math

import pytest
import torch

from setgrpo_bench.harness.update import step_measured


def _model_and_optimizer(seed: int, groups: bool) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    params = list(model.parameters())
    spec = [{"params": params[:3]}, {"params": params[3:], "lr": 3e-3}] if groups else params
    return model, torch.optim.AdamW(spec, lr=1e-2, weight_decay=0.1)


def _backward(model: torch.nn.Module, seed: int) -> None:
    torch.manual_seed(100 + seed)
    model(torch.randn(7, 5)).pow(2).sum().backward()
    model[3].bias.grad = None  # a parameter the loss did not reach: AdamW leaves it alone


@pytest.mark.parametrize("groups", [False, True])
def test_it_takes_the_step_of_one_optimizer_step_bit_for_bit(groups):
    (ours, our_opt), (theirs, their_opt) = (_model_and_optimizer(0, groups) for _ in range(2))
    for step in range(3):  # AdamW's state (moments, step count) carries over the steps
        for model in (ours, theirs):
            _backward(model, step)
        before = [p.detach().clone() for p in ours.parameters()]
        moved = step_measured(our_opt)
        their_opt.step()
        for a, b in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(a, b)
        expected = math.sqrt(sum(float(((p.detach() - b) ** 2).sum()) for p, b in zip(ours.parameters(), before)))
        assert moved == expected > 0
        assert torch.equal(ours[3].bias, before[-1])
        for model, opt in ((ours, our_opt), (theirs, their_opt)):
            opt.zero_grad(set_to_none=True)
    ours_state, theirs_state = our_opt.state_dict(), their_opt.state_dict()
    assert ours_state["param_groups"] == theirs_state["param_groups"]
    for k, state in theirs_state["state"].items():
        assert all(torch.equal(v, ours_state["state"][k][name]) for name, v in state.items())
    assert [len(g["params"]) for g in our_opt.param_groups] == ([3, 3] if groups else [6])


def test_the_optimizer_keeps_its_parameters_when_a_step_fails(monkeypatch):
    model, optimizer = _model_and_optimizer(0, groups=True)
    _backward(model, 0)
    calls = []

    def failing_step():
        calls.append(1)
        if len(calls) == 4:  # mid-way, in the second group
            raise RuntimeError("out of memory")

    monkeypatch.setattr(optimizer, "step", failing_step)
    with pytest.raises(RuntimeError, match="out of memory"):
        step_measured(optimizer)
    assert [g["params"] for g in optimizer.param_groups] == [list(model.parameters())[:3], list(model.parameters())[3:]]
