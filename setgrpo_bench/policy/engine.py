"""Generation engines: prompts in, sampled responses with their token log-probabilities out.

Agents only see ``Rollout``; a vLLM engine can replace ``TransformersEngine`` without touching them.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.cache_utils import Cache, DynamicLayer

from ..errors import ConfigError, SetgrpoBenchError
from .model import Policy


class EngineError(SetgrpoBenchError):
    """The requested generation engine cannot run here (or cannot run this model)."""


@dataclass(frozen=True)
class GenerationConfig:
    """Sampling settings."""

    max_new_tokens: int = 72  # response length cap in tokens
    temperature: float = 1.0  # sampling temperature (> 0)
    top_p: float = 1.0  # nucleus sampling mass
    batch_size: int = 256  # sequences per generate call

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ConfigError("max_new_tokens", self.max_new_tokens, "an integer >= 1")
        if not self.temperature > 0:
            raise ConfigError("temperature", self.temperature, "a number > 0")
        if not 0 < self.top_p <= 1:
            raise ConfigError("top_p", self.top_p, "a number in (0, 1]")


@dataclass
class Rollout:
    """N sampled responses. Shapes: prompt_* (N, P) left-padded; response_* (N, R) right-padded.

    ``logprobs`` are log π(token | prefix) of the sampled tokens under the sampling distribution
    (logits / temperature), zero where ``response_mask`` is 0 (after the end-of-sequence token).
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    logprobs: torch.Tensor
    texts: list[str]

    def __len__(self) -> int:
        return len(self.texts)

    def select(self, rows: torch.Tensor | Sequence[int]) -> Rollout:
        """Rows ``rows`` without the padding columns none of them uses (prompts are left-padded,
        responses right-padded), so that a forward pass over them spends nothing on padding."""
        rows = torch.as_tensor(rows, dtype=torch.long)
        prompt_mask, response_mask = self.prompt_mask[rows], self.response_mask[rows]
        keep_prompt = max(int(prompt_mask.sum(1).max()), 1) if len(rows) else 1
        keep_response = max(int(response_mask.sum(1).max()), 1) if len(rows) else 1
        return Rollout(self.prompt_ids[rows][:, -keep_prompt:], prompt_mask[:, -keep_prompt:],
                       self.response_ids[rows][:, :keep_response], response_mask[:, :keep_response],
                       self.logprobs[rows][:, :keep_response], [self.texts[int(i)] for i in rows])


def _pad_right(t: torch.Tensor, width: int, value: float) -> torch.Tensor:
    return F.pad(t, (0, width - t.shape[1]), value=value)


def _pad_left(t: torch.Tensor, width: int, value: float) -> torch.Tensor:
    return F.pad(t, (width - t.shape[1], 0), value=value)


def prompt_groups(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, inverse): the first row of each distinct (left-padded) prompt, and each row's prompt index,
    so that ``x[first][inverse]`` gives every row the value computed once for its prompt (a GRPO group
    repeats its prompt G times)."""
    unique, inverse = torch.unique(torch.cat([prompt_ids, prompt_mask], dim=1), dim=0, return_inverse=True)
    rows = torch.arange(len(prompt_ids), device=prompt_ids.device)
    first = torch.zeros(len(unique), dtype=torch.long, device=prompt_ids.device).scatter_(0, inverse, rows)
    return first, inverse


def response_mask(response_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """1 for every generated token up to and including the first EOS, 0 after it."""
    is_eos = (response_ids == eos_id).int()
    after_eos = (torch.cumsum(is_eos, dim=1) - is_eos) > 0
    return (~after_eos).long()


def cat_rollouts(parts: Sequence[Rollout], pad_id: int) -> Rollout:
    """Concatenate rollouts, padding prompts on the left and responses on the right."""
    p = max(r.prompt_ids.shape[1] for r in parts)
    w = max(r.response_ids.shape[1] for r in parts)
    return Rollout(
        prompt_ids=torch.cat([_pad_left(r.prompt_ids, p, pad_id) for r in parts]),
        prompt_mask=torch.cat([_pad_left(r.prompt_mask, p, 0) for r in parts]),
        response_ids=torch.cat([_pad_right(r.response_ids, w, pad_id) for r in parts]),
        response_mask=torch.cat([_pad_right(r.response_mask, w, 0) for r in parts]),
        logprobs=torch.cat([_pad_right(r.logprobs, w, 0.0) for r in parts]),
        texts=[t for r in parts for t in r.texts],
    )


class RolloutEngine(ABC):
    """Samples responses for the trainer. An engine that samples with its own copy of the weights
    (vLLM) sets ``needs_correction`` (its log-probabilities differ slightly from the trainer's, so the
    trainer recomputes π_old and weights tokens by truncated importance ratios) and receives the
    trainer's weights through ``sync_weights`` after every update."""

    needs_correction: bool = False

    @abstractmethod
    def generate(self, prompts: Sequence[str]) -> Rollout:
        """Sample one response per prompt (repeat a prompt G times for a group)."""

    def sync_weights(self) -> None:
        """Take the trainer's current parameters (nothing to do when the engine samples from them)."""


def top_p_filter(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """Scores with every token outside the smallest set of probability mass ≥ ``top_p`` set to −∞
    (nucleus sampling; the same rule as transformers' ``TopPLogitsWarper``)."""
    if top_p >= 1.0:
        return scores
    ordered, order = torch.sort(scores, descending=False)
    cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
    drop = cumulative <= 1 - top_p
    drop[..., -1:] = False  # the most likely token always stays
    return scores.masked_fill(drop.scatter(-1, order, drop), -math.inf)


def sample_categorical(scores: torch.Tensor) -> torch.Tensor:
    """One draw per row from softmax(scores), (N, V) → (N, 1), by inverse CDF: the first token whose
    cumulative probability exceeds u·total, u ~ U[0, 1). A token of probability 0 is never drawn."""
    cumulative = (scores - scores.max(dim=-1, keepdim=True).values).exp().cumsum(dim=-1)
    u = torch.rand((scores.shape[0], 1), device=scores.device) * cumulative[:, -1:]
    return torch.searchsorted(cumulative, u, right=True).clamp(max=scores.shape[-1] - 1)


def cache_argument(model: torch.nn.Module) -> str:
    """The name under which the model's forward takes its KV cache (``cache`` in recent
    transformers, ``past_key_values`` before)."""
    params = inspect.signature(model.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in params:
            return name
    raise EngineError(f"{type(model).__name__}.forward takes no KV cache argument: the sampling loop cannot run "
                      "it; use --engine generate")


class _GrowingLayer(DynamicLayer):
    """A KV-cache layer that writes new keys and values into a buffer grown by doubling, where
    ``DynamicLayer`` concatenates the whole cache at every token (a third of the sampling loop's time
    for a small model). ``keys``/``values`` are views of the filled part, so attention reads the same
    numbers in the same layout."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.device, self.is_initialized, self.length = key_states.device, True, 0
            self.buffers = [torch.empty_like(key_states), torch.empty_like(value_states)]
        new = self.length + key_states.shape[-2]
        if new > self.buffers[0].shape[-2]:
            grown = max(new, 2 * self.buffers[0].shape[-2])
            self.buffers = [torch.cat([b[..., : self.length, :], b.new_empty((*b.shape[:-2], grown - self.length, b.shape[-1]))],
                                      dim=-2) for b in self.buffers]
        self.buffers[0][..., self.length : new, :] = key_states
        self.buffers[1][..., self.length : new, :] = value_states
        self.length = new
        self.keys, self.values = (b[..., :new, :] for b in self.buffers)
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self.buffers = [b[indices, ...] for b in self.buffers]
            self.keys, self.values = (b[..., : self.length, :] for b in self.buffers)


def _growing_cache(argument: str) -> dict[str, Cache]:
    """The cache argument of a prefill that builds ``_GrowingLayer`` caches (nothing on a transformers
    whose ``Cache`` cannot replicate a layer class: it then concatenates as before)."""
    try:
        return {argument: Cache(layer_class_to_replicate=_GrowingLayer)}
    except TypeError:
        return {}


class _BatchedEngine(RolloutEngine):
    """Engines that sample with the trainer's own transformers model, in batches of ``batch_size``."""

    def __init__(self, policy: Policy, config: GenerationConfig = GenerationConfig()) -> None:
        self.policy, self.config = policy, config

    @torch.no_grad()
    def generate(self, prompts: Sequence[str]) -> Rollout:
        """Sample one response per prompt (repeat a prompt G times for a group)."""
        tok = self.policy.tokenizer
        parts = []
        for start in range(0, len(prompts), self.config.batch_size):
            chunk = [self.policy.format_prompt(p) for p in prompts[start : start + self.config.batch_size]]
            enc = tok(chunk, return_tensors="pt", padding=True).to(self.policy.device)
            ids, logprobs = self._sample(enc["input_ids"], enc["attention_mask"])
            mask = response_mask(ids, tok.eos_token_id)
            texts = tok.batch_decode([row[: int(m.sum())] for row, m in zip(ids, mask)], skip_special_tokens=True)
            parts.append(Rollout(enc["input_ids"], enc["attention_mask"], ids, mask, logprobs * mask,
                                 [t.strip() for t in texts]))
        return cat_rollouts(parts, tok.pad_token_id)

    @abstractmethod
    def _sample(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(response ids (N, R), log-probabilities of the tempered distribution (N, R)) of a batch."""


class TransformersEngine(_BatchedEngine):
    """Batched sampling over the model's forward with its KV cache, on the policy's device.

    Per step: one forward of the last token of every unfinished row, logits / T, nucleus filter,
    one categorical draw by inverse CDF (one uniform per row; ``torch.multinomial`` costs ~20× more
    here); rows that emitted EOS leave the batch once a quarter of it has (their cache rows are
    dropped together), and the loop ends when every row has finished or the cap is reached. No
    per-token generation-utils machinery (logits processors, stopping criteria, output dicts): for a
    small model that overhead is most of ``generate``'s time. The sampled distribution is
    ``generate``'s with ``do_sample``, ``temperature``, ``top_p`` and ``top_k=0``; ``logprobs`` are
    those of the tempered, unfiltered distribution, as the trainer recomputes them.
    """

    def __init__(self, policy: Policy, config: GenerationConfig = GenerationConfig()) -> None:
        super().__init__(policy, config)
        self.cache_argument = cache_argument(policy.model)

    def _sample(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(response ids (N, R), log-probabilities (N, R)), R ≤ max_new_tokens; rows end at their EOS."""
        c, model = self.config, self.policy.model
        eos, pad = self.policy.tokenizer.eos_token_id, self.policy.tokenizer.pad_token_id
        n, device = prompt_ids.shape[0], prompt_ids.device
        ids = torch.full((n, c.max_new_tokens), pad, dtype=torch.long, device=device)
        logprobs = torch.zeros((n, c.max_new_tokens), device=device)
        rows = torch.arange(n, device=device)  # the rows still sampling
        positions = (prompt_mask.cumsum(dim=1) - 1).clamp(min=0)
        attention = prompt_mask
        # a group repeats its prompt G times: the prompt is read once and its cache shared by its rows
        first, inverse = prompt_groups(prompt_ids, prompt_mask)
        out = model(input_ids=prompt_ids[first], attention_mask=attention[first], position_ids=positions[first],
                    use_cache=True, logits_to_keep=1, **_growing_cache(self.cache_argument))
        cache, position = out[self.cache_argument], positions[:, -1:] + 1
        cache.batch_select_indices(inverse)
        out.logits = out.logits[inverse]
        finished = torch.zeros((n, 1), dtype=torch.bool, device=device)
        steps = 0
        for t in range(c.max_new_tokens):
            steps = t + 1
            scores = out.logits[:, -1].float() / c.temperature
            token = sample_categorical(top_p_filter(scores, c.top_p))
            token = torch.where(finished, pad, token)
            ids[rows, t] = token[:, 0]
            logprobs[rows, t] = torch.where(finished, 0.0, scores.log_softmax(dim=-1).gather(-1, token))[:, 0]
            finished = finished | (token == eos)
            if finished.all() or t + 1 == c.max_new_tokens:
                break
            if 4 * int(finished.sum()) >= len(rows):  # a quarter of the batch is done: drop those rows
                keep = (~finished[:, 0]).nonzero()[:, 0]
                rows, token, position, attention = rows[keep], token[keep], position[keep], attention[keep]
                finished = finished[keep]
                cache.batch_select_indices(keep)
            attention = torch.cat([attention, attention.new_ones((len(rows), 1))], dim=1)
            out = model(input_ids=token, attention_mask=attention, position_ids=position,
                        **{self.cache_argument: cache}, use_cache=True)
            position = position + 1
        return ids[:, :steps], logprobs[:, :steps]


class GenerateEngine(_BatchedEngine):
    """Batched sampling with transformers ``generate`` (KV cache): slower than ``TransformersEngine``
    for small models, but runs any model ``generate`` supports."""

    def _sample(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tok, c = self.policy.tokenizer, self.config
        out = self.policy.model.generate(
            input_ids=prompt_ids, attention_mask=prompt_mask, do_sample=True, temperature=c.temperature, top_p=c.top_p,
            max_new_tokens=c.max_new_tokens, output_logits=True, return_dict_in_generate=True,
            pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, top_k=0,
        )
        ids = out.sequences[:, prompt_ids.shape[1] :]
        logits = torch.stack(out.logits, dim=1).float() / c.temperature
        return ids, torch.log_softmax(logits, dim=-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def token_logprobs(
    model: torch.nn.Module,
    rollout: Rollout,
    temperature: float = 1.0,
    rows: slice | torch.Tensor | None = None,
) -> torch.Tensor:
    """log π(token | prefix) of each response token under ``model`` (logits / temperature), (N, R).

    Positions follow the attention mask, as in generation with left padding, so these match the
    engine's ``logprobs`` for the same parameters.
    """
    rows = slice(None) if rows is None else rows
    prompt_ids, prompt_mask = rollout.prompt_ids[rows], rollout.prompt_mask[rows]
    response_ids, mask = rollout.response_ids[rows], rollout.response_mask[rows]
    ids = torch.cat([prompt_ids, response_ids], dim=1)
    attention = torch.cat([prompt_mask, mask], dim=1)
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
    width = response_ids.shape[1]
    # the LM head only where a response token is predicted (the prompt's logits would be discarded)
    kept = {"logits_to_keep": width + 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, **kept).logits
    logits = logits[:, -width - 1 : -1].float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, response_ids.unsqueeze(-1)).squeeze(-1)


def shared_prompt_logprobs(model: torch.nn.Module, rollout: Rollout, temperature: float = 1.0) -> torch.Tensor:
    """``token_logprobs`` of ``rollout`` with each distinct prompt run through the model once: a group's
    G responses share their prompt's keys and values (selected per row from one cache, so the
    gradient of every response reaches the prompt through them). The same numbers as
    ``token_logprobs`` up to float summation order, for about half the work when prompts and responses
    are of similar length and G = 8."""
    prompt_ids, prompt_mask, response_ids, mask = rollout.prompt_ids, rollout.prompt_mask, rollout.response_ids, rollout.response_mask
    first, inverse = prompt_groups(prompt_ids, prompt_mask)
    positions = (torch.cat([prompt_mask, mask], dim=1).cumsum(dim=1) - 1).clamp(min=0)
    width = prompt_ids.shape[1]
    out = model(input_ids=prompt_ids[first], attention_mask=prompt_mask[first], position_ids=positions[first, :width],
                use_cache=True, logits_to_keep=1)
    cache = out[cache_argument(model)]
    cache.batch_select_indices(inverse)
    follow = model(input_ids=response_ids, attention_mask=torch.cat([prompt_mask, mask], dim=1),
                   position_ids=positions[:, width:], use_cache=True, **{cache_argument(model): cache}).logits
    logits = torch.cat([out.logits[inverse][:, -1:], follow[:, :-1]], dim=1).float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, response_ids.unsqueeze(-1)).squeeze(-1)
