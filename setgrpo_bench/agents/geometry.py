"""The local update geometry of the live policy (DESIGN §8b): per-response gradients Φ and K = ΦᵀΦ.

φ_i is the gradient of response i's term of the GRPO loss at the current parameters, with tokens
aggregated exactly as the loss aggregates them (at ratio 1 the surrogate's gradient is
a_i · w_i Σ_t ∇log π(o_it), w_i = 1/|o_i| for ``grpo``, 1/max_new_tokens for ``dr_grpo``, 1/Σ|o|
for ``dapo``). The update of coefficients c is then Δθ ∝ Σ_i c_i φ_i, and cᵀKa is the first-order
alignment of the updates of c and a. Per-response gradients are batched with ``torch.func``
(``functional_call`` + ``vmap`` + ``grad``).

Kinds: ``full`` (every parameter), ``last:N`` (the last N transformer blocks and what follows them,
for large models), ``sketch:D`` (a fixed-seed CountSketch of the full gradient to D dimensions,
E⟨Sx, Sy⟩ = ⟨x, y⟩; Clarkson & Woodruff 2013), ``identity`` (K = I, an ablation).
"""

from __future__ import annotations

import re

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from ..errors import ConfigError
from ..policy.engine import Rollout
from .config import parse_geometry

_LAYER_INDEX = re.compile(r"\.(\d+)\.")


def sequence_weights(mask: torch.Tensor, loss_type: str, max_new_tokens: int) -> torch.Tensor:
    """w_i of each response's term w_i Σ_t log π(o_it) in the loss, shape (N,)."""
    lengths = mask.sum(1).float()
    if loss_type == "grpo":
        return 1.0 / lengths.clamp(min=1)
    if loss_type == "dr_grpo":
        return torch.full_like(lengths, 1.0 / max_new_tokens)
    return torch.full_like(lengths, 1.0 / float(lengths.sum().clamp(min=1)))


def selected_parameters(model: torch.nn.Module, kind: str, size: int) -> list[str]:
    """Names of the parameters whose gradients enter Φ."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    if kind != "last":
        return names
    layers = sorted({int(m.group(1)) for n in names if (m := _LAYER_INDEX.search(n))})
    if not layers:
        raise ConfigError("geometry", f"last:{size}", "a model with numbered transformer blocks", "Use 'full' or 'sketch:D'.")
    keep = set(layers[-size:])
    first = next(i for i, n in enumerate(names) if (m := _LAYER_INDEX.search(n)) and int(m.group(1)) in keep)
    return [n for i, n in enumerate(names) if i >= first and (not (m := _LAYER_INDEX.search(n)) or int(m.group(1)) in keep)]


class GradientGeometry:
    """Computes the Gram matrix K of the responses of one group from the live model.

    >>> # geometry = GradientGeometry(policy.model, "full", temperature=1.0, loss_type="grpo",
    >>> #                             max_new_tokens=72); K = geometry.gram(rollout, rows)
    """

    def __init__(
        self, model: torch.nn.Module, spec: str = "full", *, temperature: float, loss_type: str, max_new_tokens: int,
        chunk: int = 16, sketch_seed: int = 0,
    ) -> None:
        self.model, self.temperature = model, temperature
        self.loss_type, self.max_new_tokens, self.chunk = loss_type, max_new_tokens, chunk
        self.kind, self.size = parse_geometry(spec)
        self.sketch_seed = sketch_seed
        self.names = selected_parameters(model, self.kind, self.size) if self.kind != "identity" else []

    def gram(self, rollout: Rollout, rows: torch.Tensor | np.ndarray | list[int]) -> np.ndarray:
        """K (G×G, float64) of the responses ``rows`` of ``rollout`` (one group)."""
        rows = torch.as_tensor(np.asarray(rows), dtype=torch.long)
        if self.kind == "identity":
            return np.eye(len(rows))
        phi = torch.cat([self._features(rollout, rows[i : i + self.chunk]) for i in range(0, len(rows), self.chunk)])
        phi = phi.double()
        return (phi @ phi.T).cpu().numpy()

    def _features(self, rollout: Rollout, rows: torch.Tensor) -> torch.Tensor:
        grads = self.per_response_gradients(rollout, rows)
        if self.kind == "sketch":
            return self._sketch(grads)
        return torch.cat([grads[n].reshape(len(rows), -1) for n in self.names], dim=1)

    def per_response_gradients(self, rollout: Rollout, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        """{parameter name: (len(rows), *shape)} gradients of each response's loss term."""
        model = self.model
        device = next(model.parameters()).device
        params = dict(model.named_parameters())
        chosen = {n: params[n].detach() for n in self.names}
        frozen = {n: p.detach() for n, p in params.items() if n not in chosen}
        frozen.update(dict(model.named_buffers()))
        prompt_width = rollout.prompt_ids.shape[1]
        ids = torch.cat([rollout.prompt_ids[rows], rollout.response_ids[rows]], dim=1).to(device)
        attention = torch.cat([rollout.prompt_mask[rows], rollout.response_mask[rows]], dim=1).to(device)
        positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
        targets = rollout.response_ids[rows].to(device)
        mask = rollout.response_mask[rows].to(device).float()
        weights = sequence_weights(rollout.response_mask, self.loss_type, self.max_new_tokens)[rows].to(device)

        def term(theta, ids, attention, positions, targets, mask, weight):
            out = functional_call(model, {**frozen, **theta}, args=(), kwargs={
                "input_ids": ids[None], "attention_mask": attention[None], "position_ids": positions[None],
            })
            logits = out.logits[0, prompt_width - 1 : -1].float() / self.temperature
            logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets[:, None]).squeeze(-1)
            return weight * (logprobs * mask).sum()

        return vmap(grad(term), in_dims=(None, 0, 0, 0, 0, 0, 0))(chosen, ids, attention, positions, targets, mask, weights)

    def _sketch(self, grads: dict[str, torch.Tensor]) -> torch.Tensor:
        """CountSketch: coordinate j of each parameter goes to bucket h(j) with sign s(j), fixed by seed."""
        n = next(iter(grads.values())).shape[0]
        device = next(iter(grads.values())).device
        out = torch.zeros((n, self.size), device=device, dtype=torch.float32)
        for k, name in enumerate(self.names):
            flat = grads[name].reshape(n, -1).float()
            stream = np.random.SeedSequence(self.sketch_seed, spawn_key=(k,))  # one projection per parameter
            generator = torch.Generator().manual_seed(int(stream.generate_state(1, np.uint64)[0] >> np.uint64(1)))
            buckets = torch.randint(self.size, (flat.shape[1],), generator=generator).to(device)
            signs = (torch.randint(2, (flat.shape[1],), generator=generator) * 2 - 1).to(device, torch.float32)
            out.index_add_(1, buckets, flat * signs)
        return out
