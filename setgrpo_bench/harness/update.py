"""The optimiser step of a decision (DESIGN §7): the GRPO objective with the agent's coefficients.

Two paths compute the same update:
  passes          μ passes of the objective over the accepted responses, in length-sorted
                  micro-batches (any μ, KL term and engine);
  from_gradients  one step with ∇L = Σ_i κ_i φ_i from the per-response gradients the geometry already
                  formed (μ = 1, no KL term, the trainer's own samples, and an agent whose accepted
                  responses all had their Gram matrix computed): no second backward pass.
Both refuse a non-finite loss or gradient *before* the optimiser steps, so no NaN ever reaches the
weights, the optimiser state or a checkpoint.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import numpy as np
import torch

from ..agents.base import Agent, Decision
from ..agents.config import TrainConfig
from ..policy.engine import (
    Rollout,
    RolloutEngine,
    prompt_groups,
    shared_prompt_logprobs,
    token_logprobs,
)
from ..policy.model import Policy
from .geometry import Geometry, GradientGeometry
from .objective import LossSpec, grpo_loss, sequence_weights

NO_UPDATE = {"loss": 0.0, "clip_fraction": 0.0, "ratio_mean": 1.0, "kl": 0.0, "grad_norm": 0.0, "param_step": 0.0,
             "stepped": 0.0}


class NonFiniteLossError(RuntimeError):
    """The loss or its gradient became NaN or infinite; the run stops and keeps its last good checkpoint."""


def gradient_outside(per_token: torch.Tensor, rows: torch.Tensor) -> bool:
    """Whether any response outside ``rows`` has a non-zero loss gradient. Exact: comparing a sum over
    every row with a sum over ``rows`` flags a difference of rounding (1 step in 7 on random
    gradients), which stopped runs whose groups had invalid grades."""
    outside = torch.ones(len(per_token), dtype=torch.bool, device=per_token.device)
    outside[rows] = False
    return bool(per_token[outside].any())


def updates_from_gradients(config: TrainConfig, agent: Agent, geometry: GradientGeometry, engine: RolloutEngine) -> bool:
    """Whether the step can be formed from the geometry's per-response gradients: one pass at ratio 1,
    no KL term, the trainer's own samples, every parameter in Φ, and an agent that declares that
    every response it accepts had its Gram matrix computed (``Agent.grams_cover_accepted``)."""
    o = config.objective
    return (agent.grams_cover_accepted and geometry.can_keep_gradients and o.mu == 1 and o.beta == 0
            and not engine.needs_correction)


def micro_batches(rollout: Rollout, accepted: torch.Tensor, size: int) -> list[torch.Tensor]:
    """The accepted rows in micro-batches of about ``size`` responses made of whole prompt groups (rows
    with the same prompt), groups ordered by length so that each micro-batch pads little."""
    rows = accepted.nonzero()[:, 0]
    if not len(rows):
        return []
    _, group = prompt_groups(rollout.prompt_ids[rows], rollout.prompt_mask[rows])
    lengths = (rollout.prompt_mask.sum(1) + rollout.response_mask.sum(1))[rows]
    members = [rows[group == g] for g in range(int(group.max()) + 1)]
    members.sort(key=lambda m: (float(lengths[torch.isin(rows, m)].float().mean()), int(m[0])))
    out, current = [], []
    for m in members:
        current.append(m)
        if sum(len(c) for c in current) >= size:
            out.append(torch.cat(current))
            current = []
    return out + ([torch.cat(current)] if current else [])


def step_measured(optimizer: torch.optim.Optimizer) -> float:
    """``optimizer.step()`` taken one parameter at a time, returning ‖Δθ‖ of the step. Only one
    parameter's copy is held at a time, not the model's (on a 7B model a full copy costs as much
    memory as the weights). AdamW updates each parameter from its own gradient and state alone, so the
    weights and the optimiser's state are those of one ``step()`` over all parameters, bit for bit."""
    groups = optimizer.param_groups
    held = [group["params"] for group in groups]
    squared = 0.0
    try:
        for group in groups:
            group["params"] = []
        for group, params in zip(groups, held):
            for param in params:
                if param.grad is None:
                    continue
                before = param.detach().clone()
                group["params"] = [param]
                optimizer.step()
                squared += float(((param.detach() - before) ** 2).sum())
            group["params"] = []
    finally:
        for group, params in zip(groups, held):
            group["params"] = params
    return math.sqrt(squared)


class PolicyUpdate:
    """The optimiser (AdamW), the frozen KL model (β > 0) and both update paths."""

    def __init__(self, config: TrainConfig, policy: Policy, engine: RolloutEngine, geometry: GradientGeometry) -> None:
        self.config, self.policy, self.engine, self.geometry = config, policy, engine, geometry
        o = config.objective
        self.optimizer = torch.optim.AdamW(policy.model.parameters(), lr=o.lr, weight_decay=o.weight_decay)
        self.kl_model = copy.deepcopy(policy.model).eval().requires_grad_(False) if o.beta > 0 else None

    def __call__(self, rollout: Rollout, decision: Decision, geometry: Geometry | None = None) -> dict[str, float]:
        """One update with the decision's coefficients (from the geometry's gradients when it kept them)."""
        device = self.policy.device
        rollout = _to(rollout, device)
        coef = torch.tensor(decision.coefficients.reshape(-1), dtype=torch.float32, device=device)
        acc = torch.tensor(decision.accepted.reshape(-1), dtype=torch.bool, device=device)
        if not acc.any():
            return dict(NO_UPDATE)
        if geometry is not None and geometry.gradients is not None:
            stats = self.from_gradients(rollout, coef, acc, geometry)
        else:
            stats = self.passes(rollout, coef, acc)
        self.engine.sync_weights()
        return {**stats, "stepped": 1.0}

    def passes(self, rollout: Rollout, coef: torch.Tensor, acc: torch.Tensor) -> dict[str, float]:
        """μ passes of the GRPO objective over the accepted responses."""
        o, r, model = self.config.objective, self.config.rollout, self.policy.model
        spec = LossSpec.of(o, r.max_new_tokens)
        totals = spec.totals(rollout.response_mask, acc)  # the whole batch's denominators
        # only accepted responses enter the forward passes (the others add zeros), in micro-batches of
        # whole groups of similar length with their padding trimmed (a group's prompt is run once);
        # their losses sum to the batch's loss
        rows = micro_batches(rollout, acc, r.update_batch)
        micro = [rollout.select(part) for part in rows]
        fixed = [self._fixed_logprobs(part) for part in micro]  # π_old (and π_ref, IS weights) per part
        # The model stays in eval mode: dropout would make log π_θ differ from the sampling policy's
        # log-probabilities even before any update, biasing the ratio (TRL disables it likewise).
        path = 0.0
        for _ in range(o.mu):
            self.optimizer.zero_grad(set_to_none=True)
            loss, stats, tokens = 0.0, np.zeros(3), 0.0
            for part, index, (old, ref, is_weights) in zip(micro, rows, fixed):
                logprobs = shared_prompt_logprobs(model, part, r.temperature)
                part_loss, part_stats = grpo_loss(logprobs, old, coef[index], part.response_mask, acc[index], spec,
                                                  ref_logprobs=ref, is_weights=is_weights, totals=totals)
                self._check_finite("loss", part_loss.item())
                part_loss.backward()
                weight = float(part.response_mask.sum())
                loss, tokens = loss + part_loss.item(), tokens + weight
                stats += weight * np.array([part_stats.clip_fraction, part_stats.ratio_mean, part_stats.kl])
            grad_norm, moved = self._clip_and_step()
            path += moved
        clip_fraction, ratio_mean, kl = stats / max(tokens, 1.0)
        return {"loss": loss, "clip_fraction": clip_fraction, "ratio_mean": ratio_mean, "kl": kl, "grad_norm": grad_norm,
                "param_step": path}

    def from_gradients(self, rollout: Rollout, coef: torch.Tensor, acc: torch.Tensor, geometry: Geometry) -> dict[str, float]:
        """One optimiser step with ∇L = Σ_i κ_i φ_i. κ_i w_i = ∂L/∂log π(o_it), read off the GRPO loss
        itself at ratio 1 (it is constant over a response's tokens), and φ_i = w_i Σ_t ∇log π(o_it)
        are the geometry's per-response gradients at the same parameters."""
        o, r = self.config.objective, self.config.rollout
        mask = rollout.response_mask
        logprobs = rollout.logprobs.clone().requires_grad_(True)
        spec = replace(LossSpec.of(o, r.max_new_tokens), beta=0.0)  # μ = 1 at ratio 1: the KL term is 0
        loss, stats = grpo_loss(logprobs, rollout.logprobs, coef, mask, acc, spec)
        self._check_finite("loss", loss.item())
        loss.backward()
        per_token = logprobs.grad * mask
        rows = geometry.gradients.rows.to(per_token.device)
        if gradient_outside(per_token, rows):
            raise RuntimeError("an accepted response has no per-response gradient (no Gram matrix was asked for it)")
        weights = sequence_weights(mask, o.loss_type, r.max_new_tokens)[rows]
        kappa = per_token[rows].sum(dim=1) / mask[rows].sum(dim=1).clamp(min=1) / weights
        for k, param in enumerate(self.geometry.params.values()):
            param.grad = geometry.gradients.combine(k, kappa).view_as(param)
        grad_norm, moved = self._clip_and_step()
        return {"loss": loss.item(), "clip_fraction": stats.clip_fraction, "ratio_mean": stats.ratio_mean,
                "kl": stats.kl, "grad_norm": grad_norm, "param_step": moved}

    def _clip_and_step(self) -> tuple[float, float]:
        """Clip the gradient, refuse a non-finite one (before the optimiser sees it), step: the gradient's
        norm and ‖Δθ‖, what the optimiser did with it (AdamW rescales it)."""
        model = self.policy.model
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), self.config.objective.max_grad_norm))
        self._check_finite("gradient norm", grad_norm)
        moved = step_measured(self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm, moved

    def _check_finite(self, what: str, value: float) -> None:
        if not np.isfinite(value):
            raise NonFiniteLossError(f"the {what} is {value} (lr={self.config.objective.lr}); lower the learning rate")

    def _fixed_logprobs(self, part: Rollout) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """(π_old, π_ref or None, truncated importance weights or None) of a part of the batch: the
        sampling log-probabilities, or the trainer's own when another engine sampled (vLLM)."""
        r, mask = self.config.rollout, part.response_mask
        old, is_weights, ref = part.logprobs, None, None
        with torch.no_grad():
            if self.engine.needs_correction:
                old = token_logprobs(self.policy.model, part, r.temperature) * mask
                is_weights = torch.exp(old - part.logprobs).clamp(max=r.is_cap) * mask
            if self.kl_model is not None:
                ref = token_logprobs(self.kl_model, part, r.temperature)
        return old, ref, is_weights


def _to(rollout: Rollout, device: torch.device) -> Rollout:
    return Rollout(*(t.to(device) for t in (
        rollout.prompt_ids, rollout.prompt_mask, rollout.response_ids, rollout.response_mask, rollout.logprobs,
    )), texts=rollout.texts)
