"""The GRPO objective (DESIGN §7), shared by every agent: only the coefficients differ.

Per token t of response i, with ratio ρ = exp(log π_θ − log π_old) and coefficient a_i:
    ℓ_it = −min(ρ·a_i, clip(ρ, 1 − ε_low, 1 + ε_high)·a_i) + β·k3_it,
    k3_it = exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1        (Schulman's k3 KL estimate)
aggregated over the *accepted* responses (``normalise_over="accepted"``) or every response of the
batch, rejected ones contributing zeros (``"batch"``):
    grpo     mean_i [ mean_t ℓ_it ]                     (token mean per sequence; Shao et al. 2024)
    dr_grpo  Σ_it ℓ_it / (n_accepted · max_new_tokens)   (constant normaliser; Liu et al. 2025)
    dapo     Σ_it ℓ_it / Σ_i |o_i|                       (token-level mean; Yu et al. 2025)
With ``clip=False`` (RGRA, REINFORCE with group-relative advantages) the surrogate is ρ·a_i.
Rollouts sampled by another engine (vLLM) carry a truncated importance weight min(π_old/π_vllm, C)
per token on the surrogate (TIS, as TRL's ``vllm_importance_sampling_correction``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..agents.config import LOSS_TYPES, NORMALISERS
from ..errors import UnknownNameError


def loss_totals(mask: torch.Tensor, accepted: torch.Tensor, normalise_over: str = "accepted") -> tuple[float, float]:
    """(responses, tokens) the loss divides by: of the accepted responses, or of the whole batch."""
    rows = accepted if normalise_over == "accepted" else mask.sum(1) > 0
    return float(rows.float().sum()), float((mask.float() * rows.float()[:, None]).sum())


@dataclass(frozen=True)
class LossStats:
    """``clip_fraction``: share of accepted tokens whose clipped branch is active (zero gradient)."""

    clip_fraction: float
    ratio_mean: float
    kl: float


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    coefficients: torch.Tensor,
    mask: torch.Tensor,
    accepted: torch.Tensor,
    *,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    clip: bool = True,
    beta: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
    loss_type: str = "grpo",
    max_new_tokens: int | None = None,
    is_weights: torch.Tensor | None = None,
    normalise_over: str = "accepted",
    totals: tuple[float, float] | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """The loss of one batch.

    Args:
        logprobs, old_logprobs, ref_logprobs: (N, R) token log-probabilities.
        coefficients: (N,) training coefficients a_i.
        mask: (N, R) 1 on response tokens.
        accepted: (N,) bool, responses that contribute.
        loss_type: ``grpo``, ``dr_grpo`` or ``dapo``; ``max_new_tokens`` is needed for ``dr_grpo``.
        is_weights: (N, R) truncated importance weights π_old/π_sampler of each token when the rollouts
            came from another engine (vLLM) than the trainer; they multiply the surrogate (not the KL).
        normalise_over: ``accepted`` (the mean runs over accepted responses, as above) or ``batch``
            (over every response of the batch: rejected ones contribute zeros, so an update built
            from few accepted groups is proportionally smaller, as in TRL, which keeps every row).
        totals: the (responses, tokens) the loss divides by, when these rows are one micro-batch of a
            larger batch (``loss_totals`` of the whole batch); the micro-batches' losses then sum to
            the batch's loss.
    Returns:
        (scalar loss, stats). With no accepted response the loss is a zero that still has a graph.
    """
    if loss_type not in LOSS_TYPES:
        raise UnknownNameError("loss type", loss_type, LOSS_TYPES)
    if normalise_over not in NORMALISERS:
        raise UnknownNameError("loss normaliser", normalise_over, NORMALISERS)
    ratio = torch.exp(logprobs - old_logprobs)
    a = coefficients[:, None]
    if clip:
        clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
        per_token = -torch.minimum(ratio * a, clipped * a)
        active_clip = ((ratio > 1 + epsilon_high) & (a > 0)) | ((ratio < 1 - epsilon_low) & (a < 0))
    else:
        per_token = -ratio * a
        active_clip = torch.zeros_like(ratio, dtype=torch.bool)
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    kl = torch.zeros_like(per_token)
    if beta:
        if ref_logprobs is None:
            raise ValueError("beta > 0 needs ref_logprobs")
        delta = ref_logprobs - logprobs
        kl = torch.exp(delta) - delta - 1
        per_token = per_token + beta * kl
    m = mask.float() * accepted.float()[:, None]
    if not accepted.any():
        return (per_token * 0).sum(), LossStats(0.0, 1.0, 0.0)
    n_seq, tokens = totals if totals is not None else loss_totals(mask, accepted, normalise_over)
    n_seq, tokens = max(float(n_seq), 1.0), max(float(tokens), 1.0)
    if loss_type == "grpo":
        loss = ((per_token * m).sum(1) / m.sum(1).clamp(min=1)).sum() / n_seq
    elif loss_type == "dr_grpo":
        if not max_new_tokens:
            raise ValueError("dr_grpo needs max_new_tokens")
        loss = (per_token * m).sum() / (n_seq * max_new_tokens)
    else:
        loss = (per_token * m).sum() / tokens
    with torch.no_grad():
        tokens = m.sum().clamp(min=1)
        stats = LossStats(
            clip_fraction=float((active_clip.float() * m).sum() / tokens),
            ratio_mean=float((ratio * m).sum() / tokens),
            kl=float((kl * m).sum() / tokens),
        )
    return loss, stats


def sequence_weights(mask: torch.Tensor, loss_type: str, max_new_tokens: int) -> torch.Tensor:
    """w_i of each response's term w_i Σ_t log π(o_it) in the loss, shape (N,)."""
    lengths = mask.sum(1).float()
    if loss_type == "grpo":
        return 1.0 / lengths.clamp(min=1)
    if loss_type == "dr_grpo":
        return torch.full_like(lengths, 1.0 / max_new_tokens)
    return torch.full_like(lengths, 1.0 / float(lengths.sum().clamp(min=1)))
