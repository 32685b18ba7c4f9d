"""The GRPO objective (DESIGN §7), shared by every agent: only the coefficients differ.

Per token t of response i, with ratio ρ = exp(log π_θ − log π_old) and coefficient a_i:
    ℓ_it = −min(ρ·a_i, clip(ρ, 1 − ε_low, 1 + ε_high)·a_i) + β·k3_it,
    k3_it = exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1        (Schulman's k3 KL estimate)
aggregated over the *accepted* responses (``normalise_over="accepted"``) or every response of the
batch, rejected ones contributing zeros (``"batch"``) — one ``LossSpec`` says which:
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

from ..agents.config import LOSS_TYPES, NORMALISERS, ObjectiveSettings
from ..errors import UnknownNameError


@dataclass(frozen=True)
class LossSpec:
    """What defines the objective besides the data: the aggregation (``loss_type``), the clipped
    surrogate (ε_low, ε_high, or none), the KL coefficient β, the generation cap ``dr_grpo`` divides by,
    and what the loss is normalised over (``normalise_over``: ``accepted`` or ``batch``)."""

    loss_type: str = "grpo"
    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    clip: bool = True
    beta: float = 0.0
    max_new_tokens: int | None = None
    normalise_over: str = "accepted"

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise UnknownNameError("loss type", self.loss_type, LOSS_TYPES)
        if self.normalise_over not in NORMALISERS:
            raise UnknownNameError("loss normaliser", self.normalise_over, NORMALISERS)
        if self.loss_type == "dr_grpo" and not self.max_new_tokens:
            raise ValueError("dr_grpo needs max_new_tokens")

    @classmethod
    def of(cls, objective: ObjectiveSettings, max_new_tokens: int) -> LossSpec:
        """The spec a run's objective settings give."""
        o = objective
        return cls(o.loss_type, o.epsilon_low, o.epsilon_high, o.clip, o.beta, max_new_tokens, o.normalise_over)

    def totals(self, mask: torch.Tensor, accepted: torch.Tensor) -> tuple[float, float]:
        """(responses, tokens) the loss divides by: of the accepted responses, or of every response of
        the batch (rejected ones then contribute zeros)."""
        rows = accepted if self.normalise_over == "accepted" else mask.sum(1) > 0
        return float(rows.float().sum()), float((mask.float() * rows.float()[:, None]).sum())


@dataclass(frozen=True)
class LossStats:
    """``clip_fraction``: share of accepted tokens whose clipped branch is active (zero gradient)."""

    clip_fraction: float
    ratio_mean: float
    kl: float


def grpo_loss(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, coefficients: torch.Tensor, mask: torch.Tensor,
    accepted: torch.Tensor, spec: LossSpec = LossSpec(), *, ref_logprobs: torch.Tensor | None = None,
    is_weights: torch.Tensor | None = None, totals: tuple[float, float] | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """The loss of one batch (or of one micro-batch of it).

    Args:
        logprobs: (N, R) token log-probabilities under the policy being trained.
        old_logprobs: (N, R) the same under the policy that sampled (π_old).
        coefficients: (N,) training coefficients a_i.
        mask: (N, R) 1 on response tokens.
        accepted: (N,) bool, responses that contribute.
        spec: the objective (``LossSpec``).
        ref_logprobs: (N, R) the same under the reference policy of the KL term (needed when β > 0).
        is_weights: (N, R) truncated importance weights π_old/π_sampler of each token when the rollouts
            came from another engine (vLLM) than the trainer; they multiply the surrogate (not the KL).
        totals: ``spec.totals`` of the whole batch when these rows are one micro-batch of it (the
            micro-batches' losses then sum to the batch's loss); default: of these rows.
    Returns:
        (scalar loss, stats). With no accepted response the loss is a zero that still has a graph.
    """
    ratio = torch.exp(logprobs - old_logprobs)
    per_token, active_clip = _surrogate(ratio, coefficients[:, None], spec)
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    kl = _k3(logprobs, ref_logprobs) if spec.beta else torch.zeros_like(per_token)
    per_token = per_token + spec.beta * kl
    m = mask.float() * accepted.float()[:, None]
    if not accepted.any():
        return (per_token * 0).sum(), LossStats(0.0, 1.0, 0.0)
    n_seq, tokens = (max(float(t), 1.0) for t in (totals if totals is not None else spec.totals(mask, accepted)))
    if spec.loss_type == "grpo":
        loss = ((per_token * m).sum(1) / m.sum(1).clamp(min=1)).sum() / n_seq
    elif spec.loss_type == "dr_grpo":
        loss = (per_token * m).sum() / (n_seq * spec.max_new_tokens)
    else:
        loss = (per_token * m).sum() / tokens
    with torch.no_grad():
        counted = m.sum().clamp(min=1)
        stats = LossStats(clip_fraction=float((active_clip.float() * m).sum() / counted),
                          ratio_mean=float((ratio * m).sum() / counted), kl=float((kl * m).sum() / counted))
    return loss, stats


def _surrogate(ratio: torch.Tensor, a: torch.Tensor, spec: LossSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """−min(ρa, clip(ρ)a) per token (−ρa without clipping), and where the clipped branch is active."""
    if not spec.clip:
        return -ratio * a, torch.zeros_like(ratio, dtype=torch.bool)
    clipped = torch.clamp(ratio, 1 - spec.epsilon_low, 1 + spec.epsilon_high)
    active = ((ratio > 1 + spec.epsilon_high) & (a > 0)) | ((ratio < 1 - spec.epsilon_low) & (a < 0))
    return -torch.minimum(ratio * a, clipped * a), active


def _k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor | None) -> torch.Tensor:
    """Schulman's k3 estimate of KL(π_θ ‖ π_ref) per token."""
    if ref_logprobs is None:
        raise ValueError("beta > 0 needs ref_logprobs")
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1


def sequence_weights(mask: torch.Tensor, loss_type: str, max_new_tokens: int) -> torch.Tensor:
    """w_i of each response's term w_i Σ_t log π(o_it) in the loss, shape (N,)."""
    lengths = mask.sum(1).float()
    if loss_type == "grpo":
        return 1.0 / lengths.clamp(min=1)
    if loss_type == "dr_grpo":
        return torch.full_like(lengths, 1.0 / max_new_tokens)
    return torch.full_like(lengths, 1.0 / float(lengths.sum().clamp(min=1)))
