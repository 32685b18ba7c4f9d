"""The local update geometry of the live policy (DESIGN §8b): per-response gradients Φ and K = ΦᵀΦ.

φ_i is the gradient of response i's term of the GRPO loss at the current parameters, with tokens
aggregated exactly as the loss aggregates them (at ratio 1 the surrogate's gradient is
a_i · w_i Σ_t ∇log π(o_it), w_i = 1/|o_i| for ``grpo``, 1/max_new_tokens for ``dr_grpo``, 1/Σ|o|
for ``dapo``). The update of coefficients c is then Δθ ∝ Σ_i c_i φ_i, and cᵀKa is the first-order
alignment of the updates of c and a.

How K is computed: one ordinary forward and backward pass over the requested responses with the
per-response loss terms, hooks recording each layer's input activations a_t and output gradients
b_t (no parameter gradient is formed). A linear layer's per-response gradient is Σ_t b_t a_tᵀ, so
  ⟨∇W_i, ∇W_j⟩ = Σ_{t∈i, s∈j} (a_t · a_s)(b_t · b_s)              ("ghost" inner products)
needs no per-response gradient at all; it costs (G·T)²(d_in + d_out) per group against
G·T·d_in·d_out for forming the G per-response gradients, and the cheaper of the two is used per
layer (for a small model with T ≈ d the explicit form wins). Biases (Σ_t b_t), LayerNorm
(Σ_t b_t ⊙ â_t, with â the normalised input) and embeddings (b_t scattered to the row of token t;
a weight tied to the LM head sums both uses) have closed forms. A model with another parameterised
module type falls back to ``torch.func`` per-response gradients (``vmap`` of ``grad``).

Kinds: ``full`` (every parameter), ``last:N`` (the last N transformer blocks and what follows them,
for large models), ``sketch:D`` (a fixed-seed CountSketch of the full gradient to D dimensions,
E⟨Sx, Sy⟩ = ⟨x, y⟩; Clarkson & Woodruff 2013), ``identity`` (K = I, an ablation).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap
from transformers.pytorch_utils import Conv1D

from ..agents.fields import parse_geometry
from ..errors import ConfigError
from ..policy.engine import Rollout
from .objective import sequence_weights

_LAYER_INDEX = re.compile(r"\.(\d+)\.")
_SUPPORTED = (torch.nn.Linear, Conv1D, torch.nn.Embedding, torch.nn.LayerNorm)


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


class Gradients:
    """Per-response gradients Φ of rollout ``rows``, one (n, numel) block per parameter, kept in
    bfloat16 (8 bits of mantissa: each entry within 2⁻⁹ of itself) — half the memory of float32, for
    forming Σ_i κ_i φ_i once; the Gram matrices are computed from the float32 gradients."""

    def __init__(self, rows: torch.Tensor, n_params: int) -> None:
        self.rows, self.blocks = rows, [None] * n_params

    def store(self, k: int, start: int, flat: torch.Tensor) -> None:
        """Rows ``start …`` of block k (float32, (rows, numel))."""
        if self.blocks[k] is None:
            self.blocks[k] = torch.empty((len(self.rows), flat.shape[1]), dtype=torch.bfloat16, device=flat.device)
        self.blocks[k][start : start + len(flat)] = flat

    def combine(self, k: int, weights: torch.Tensor, step: int = 16) -> torch.Tensor:
        """Σ_i weights_i φ_i for block k, (numel,) in float32 (a few responses at a time)."""
        block = self.blocks[k]
        out = torch.zeros(block.shape[1], device=weights.device)
        for i in range(0, len(block), step):
            out += weights[i : i + step] @ block[i : i + step].to(weights.device, torch.float32)
        return out


@dataclass
class Geometry:
    """Gram matrices of groups and, when kept, the per-response gradients behind them."""

    grams: dict[int, np.ndarray]
    gradients: Gradients | None = None


def _uses(model: torch.nn.Module, chosen: set[int]) -> dict[int, list[tuple[torch.nn.Module, str]]] | None:
    """id(parameter) → the (module, role) pairs that use it, for every chosen parameter; None when a
    chosen parameter belongs to a module type without a closed form (then ``torch.func`` is used)."""
    uses: dict[int, list[tuple[torch.nn.Module, str]]] = {}
    for module in model.modules():
        for role, param in module.named_parameters(recurse=False):
            if id(param) not in chosen:
                continue
            if not isinstance(module, _SUPPORTED) or role not in ("weight", "bias"):
                return None
            uses.setdefault(id(param), []).append((module, role))
    return uses


class GradientGeometry:
    """Computes the Gram matrices K of groups of responses from the live model.

    >>> # geometry = GradientGeometry(policy.model, "full", temperature=1.0, loss_type="grpo",
    >>> #                             max_new_tokens=72); grams = geometry.grams(rollout, {0: rows})
    """

    def __init__(
        self, model: torch.nn.Module, spec: str = "full", *, temperature: float, loss_type: str, max_new_tokens: int,
        chunk: int = 16, sketch_seed: int = 0, ghost: bool | None = None,
    ) -> None:
        self.model, self.temperature = model, temperature
        self.loss_type, self.max_new_tokens, self.chunk = loss_type, max_new_tokens, chunk
        self.kind, self.size = parse_geometry(spec)
        self.sketch_seed = sketch_seed
        self.ghost = ghost  # linear layers by ghost inner products: True, False, or None (whichever costs less)
        self.names = selected_parameters(model, self.kind, self.size) if self.kind != "identity" else []
        params = dict(model.named_parameters())
        self.params = {n: params[n] for n in self.names}
        self.uses = _uses(model, {id(p) for p in self.params.values()}) if self.names else None
        self.n_parameters = sum(p.numel() for p in self.params.values())
        self.keeps_logits = "logits_to_keep" in inspect.signature(model.forward).parameters

    # ---------------------------------------------------------------- public
    def gram(self, rollout: Rollout, rows: torch.Tensor | np.ndarray | Sequence[int]) -> np.ndarray:
        """K (G×G, float64) of the responses ``rows`` of ``rollout`` (one group)."""
        return self.grams(rollout, {0: rows}).grams[0]

    def grams(self, rollout: Rollout, groups: Mapping[int, torch.Tensor | np.ndarray | Sequence[int]], *,
              keep_gradients: bool = False) -> Geometry:
        """K of every group (group key → its rows of ``rollout``), with one forward and one backward
        pass per chunk of about ``chunk`` responses. ``keep_gradients`` (``full`` geometry only) also
        returns Φ, the flat per-response gradients of every parameter, so that an update Σ_i c_i φ_i
        can be formed without another backward pass."""
        rows = {b: torch.as_tensor(np.asarray(r), dtype=torch.long) for b, r in groups.items()}
        if self.kind == "identity":
            return Geometry({b: np.eye(len(r)) for b, r in rows.items()})
        keep = keep_gradients and self.can_keep_gradients
        everything = torch.cat(list(rows.values())) if rows else torch.zeros(0, dtype=torch.long)
        kept = Gradients(everything, len(self.params)) if keep else None
        out: dict[int, np.ndarray] = {}
        start = 0
        for chunk in self._chunks(rows):
            n = sum(len(rows[b]) for b in chunk)
            out.update(self._chunk_grams(rollout, {b: rows[b] for b in chunk}, kept, start))
            start += n
        return Geometry(out, kept)

    @property
    def can_keep_gradients(self) -> bool:
        """Φ covers the whole update only when every trainable parameter is in it (``full``)."""
        return self.kind == "full" and self.uses is not None

    # ---------------------------------------------------------------- one chunk of groups
    def _chunks(self, rows: dict[int, torch.Tensor]) -> Iterator[list[int]]:
        chunk: list[int] = []
        for b in rows:
            if chunk and sum(len(rows[c]) for c in chunk) + len(rows[b]) > self.chunk:
                yield chunk
                chunk = []
            chunk.append(b)
        if chunk:
            yield chunk

    def _chunk_grams(self, rollout: Rollout, groups: dict[int, torch.Tensor], kept: Gradients | None,
                     offset: int) -> dict[int, np.ndarray]:
        everything = torch.cat(list(groups.values()))
        spans, start = {}, 0
        for b, r in groups.items():
            spans[b] = slice(start, start + len(r))
            start += len(r)
        if self.uses is None:
            features = self._features(self._vmap_gradients(rollout, everything))
            return {b: _gram(features[s]) for b, s in spans.items()}
        with self._recording() as tape:
            self._backward(rollout, everything)
        if self.kind == "sketch":
            features = self._features({n: self._per_response(tape, p) for n, p in self.params.items()})
            return {b: _gram(features[s]) for b, s in spans.items()}
        if kept is not None:  # every per-response gradient, kept (compactly) for the update
            products = torch.zeros((len(everything), len(everything)), dtype=torch.float64)
            for k, param in enumerate(self.params.values()):
                flat = self._per_response(tape, param).reshape(len(everything), -1)
                products += (flat @ flat.T).double()  # the chunk's inner products at once
                kept.store(k, offset, flat)
            return {b: products[s, s].numpy() for b, s in spans.items()}
        grams = {b: torch.zeros((len(r), len(r)), dtype=torch.float64) for b, r in groups.items()}
        for param in self.params.values():
            for b, s in spans.items():
                grams[b] += self._param_gram(tape, param, s)
        return {b: k.numpy() for b, k in grams.items()}

    def _backward(self, rollout: Rollout, rows: torch.Tensor) -> None:
        """Forward and backward of Σ_i w_i Σ_t log π(o_it) over ``rows``; parameters are frozen, so
        only activations and output gradients are formed (the hooks keep them)."""
        ids, attention, positions, targets, mask, weights = self._inputs(rollout, rows)
        width = targets.shape[1]
        kept = {"logits_to_keep": width + 1} if self.keeps_logits else {}
        logits = self.model(input_ids=ids, attention_mask=attention, position_ids=positions, **kept).logits
        logits = logits[:, -width - 1 : -1].float() / self.temperature
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).squeeze(-1)
        (weights * (logprobs * mask).sum(dim=1)).sum().backward()

    def _inputs(self, rollout: Rollout, rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(ids, attention, positions, targets, response mask, sequence weights) of ``rows``, without
        the padding columns none of them uses (the weights are the whole rollout's: dapo's divide by
        all its tokens)."""
        device = next(self.model.parameters()).device
        weights = sequence_weights(rollout.response_mask, self.loss_type, self.max_new_tokens)[rows].to(device)
        sub = rollout.select(rows)
        ids = torch.cat([sub.prompt_ids, sub.response_ids], dim=1).to(device)
        attention = torch.cat([sub.prompt_mask, sub.response_mask], dim=1).to(device)
        positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
        return ids, attention, positions, sub.response_ids.to(device), sub.response_mask.to(device).float(), weights

    @contextmanager
    def _recording(self) -> Iterator[dict[torch.nn.Module, dict[str, torch.Tensor]]]:
        """Hooks on every module that uses a chosen parameter: its input (or token ids) on the
        forward pass and the gradient of its output on the backward pass. Embedding outputs become
        leaves that require grad, so the graph exists while every parameter is frozen."""
        tape: dict[torch.nn.Module, dict[str, torch.Tensor]] = {}
        recorded = {m for uses in self.uses.values() for m, _ in uses}
        embeddings = {m for m in self.model.modules() if isinstance(m, torch.nn.Embedding)}

        def record(module, inputs, output):
            if module in embeddings:
                output = output.detach().requires_grad_(True)
            if module in recorded:
                entry = tape.setdefault(module, {})
                entry["input"] = inputs[0].detach()
                output.register_hook(lambda g: entry.__setitem__("grad", g.detach()))
            return output

        frozen = [p for p in self.model.parameters() if p.requires_grad]
        handles = [m.register_forward_hook(record) for m in recorded | embeddings]
        for p in frozen:
            p.requires_grad_(False)
        try:
            with torch.enable_grad():
                yield tape
        finally:
            for p in frozen:
                p.requires_grad_(True)
            for h in handles:
                h.remove()

    # ---------------------------------------------------------------- closed forms
    def _param_gram(self, tape: dict, param: torch.Tensor, span: slice) -> torch.Tensor:
        """Σ over one parameter of ⟨∇p_i, ∇p_j⟩ for the responses ``span`` of the chunk."""
        uses = self.uses[id(param)]
        module, role = uses[0]
        if len(uses) == 1 and role == "weight" and isinstance(module, (torch.nn.Linear, Conv1D)):
            a, g = tape[module]["input"][span], tape[module]["grad"][span]
            if self.ghost or (self.ghost is None and _ghost_is_cheaper(a, g)):
                return _ghost_gram(a, g)
        flat = self._per_response(tape, param, span).reshape(span.stop - span.start, -1)
        return (flat @ flat.T).double()

    def _per_response(self, tape: dict, param: torch.Tensor, span: slice = slice(None)) -> torch.Tensor:
        """(responses, *param.shape): the parameter's gradient of each response's loss term. A weight
        with several uses (an embedding tied to the LM head) sums them; an embedding's rows are
        scattered into the dense part in place, so no (responses × vocabulary) zeros are filled."""
        uses = sorted(self.uses[id(param)], key=lambda use: isinstance(use[0], torch.nn.Embedding))
        total = None
        for module, role in uses:
            a, g = tape[module]["input"][span], tape[module]["grad"][span].float()
            if isinstance(module, torch.nn.Embedding) and role == "weight":
                if total is None:
                    total = torch.zeros((g.shape[0], *param.shape), dtype=g.dtype, device=g.device)
                total.scatter_add_(1, a[..., None].expand(-1, -1, g.shape[-1]), g)
                continue
            if role == "bias":
                part = g.sum(dim=1)
            elif isinstance(module, torch.nn.LayerNorm):
                normalised = F.layer_norm(a.float(), module.normalized_shape, eps=module.eps)
                part = (g * normalised).sum(dim=1)
            elif isinstance(module, Conv1D):  # y = a W + b, W: (in, out)
                part = torch.einsum("rti,rto->rio", a.float(), g)
            else:  # nn.Linear: y = a Wᵀ + b, W: (out, in)
                part = torch.einsum("rto,rti->roi", g, a.float())
            total = part if total is None else total.add_(part)
        return total

    # ---------------------------------------------------------------- sketch and fallback
    def _features(self, grads: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-response feature rows whose inner products are K: the flat gradient, or its sketch."""
        n = next(iter(grads.values())).shape[0]
        if self.kind != "sketch":
            return torch.cat([grads[name].reshape(n, -1) for name in self.names], dim=1)
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

    def _vmap_gradients(self, rollout: Rollout, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        """{parameter name: (len(rows), *shape)} per-response gradients with ``torch.func`` (any
        model; needs ``attn_implementation="eager"`` and materialises every per-response gradient)."""
        model = self.model
        params = dict(model.named_parameters())
        chosen = {n: params[n].detach() for n in self.names}
        frozen = {n: p.detach() for n, p in params.items() if n not in chosen}
        frozen.update(dict(model.named_buffers()))
        ids, attention, positions, targets, mask, weights = self._inputs(rollout, rows)
        prompt_width = ids.shape[1] - targets.shape[1]

        def term(theta, ids, attention, positions, targets, mask, weight):
            out = functional_call(model, {**frozen, **theta}, args=(), kwargs={
                "input_ids": ids[None], "attention_mask": attention[None], "position_ids": positions[None],
            })
            logits = out.logits[0, prompt_width - 1 : -1].float() / self.temperature
            logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets[:, None]).squeeze(-1)
            return weight * (logprobs * mask).sum()

        step = 16  # per-response gradients of 16 responses at a time bound the memory
        parts = [vmap(grad(term), in_dims=(None, 0, 0, 0, 0, 0, 0))(
            chosen, ids[i : i + step], attention[i : i + step], positions[i : i + step], targets[i : i + step],
            mask[i : i + step], weights[i : i + step]) for i in range(0, len(rows), step)]
        return {n: torch.cat([p[n] for p in parts]) for n in self.names}


def _gram(features: torch.Tensor) -> np.ndarray:
    features = features.double()
    return (features @ features.T).cpu().numpy()


def _ghost_is_cheaper(a: torch.Tensor, g: torch.Tensor) -> bool:
    """(G·T)²(d_in + d_out) multiply-adds for the ghost form against G·T·d_in·d_out + G²·d_in·d_out
    for forming and multiplying the per-response gradients."""
    n, t, d_in = a.shape
    d_out = g.shape[-1]
    return (n * t) ** 2 * (d_in + d_out) < (n * t + n * n) * d_in * d_out


def _ghost_gram(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Σ_{t∈i, s∈j} (a_t · a_s)(b_t · b_s) for every pair of responses: (n, T, d) inputs → (n, n)."""
    n, t = a.shape[:2]
    flat_a, flat_g = a.reshape(n * t, -1).double(), g.reshape(n * t, -1).double()
    return ((flat_a @ flat_a.T) * (flat_g @ flat_g.T)).reshape(n, t, n, t).sum(dim=(1, 3))
