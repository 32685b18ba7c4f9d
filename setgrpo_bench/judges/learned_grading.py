"""How the learned judge computes P(yes) for a block of (response, criterion) questions (DESIGN §4), in
one of two ways that give the same numbers to 1.2e-7:

  by shared heads  one forward over ``<eos> response`` per response, its KV cache copied to each of the J
                   criteria, then one forward over the G·J criterion suffixes (eager attention): how the
                   builds that read no prompt grade, as their recorded runs were graded
  packed           one forward over the shared start (``<eos>``, the prompt and its marker), then one row
                   per response packing ``response criterion₁ … criterion_J``, each criterion masked to see
                   the start, the response and itself only (a 4D mask, SDPA): every token is computed once —
                   a step's batch took 0.98 s against 1.77 s by shared heads for the prompt-reading judge

A question is ``<eos> [prompt RESPONSE_MARKER] response <|criterion|> criterion <|verdict|>``; its answer is
the next token, and P(yes) is read from the ``<|yes|>`` and ``<|no|>`` logits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..policy.engine import cache_argument
from ..policy.model import RESPONSE_MARKER

CRITERION, VERDICT, YES, NO = "<|criterion|>", "<|verdict|>", "<|yes|>", "<|no|>"
ATTENTION = {False: "eager", True: "sdpa"}
"""The attention a build is loaded with, by whether it reads the prompt: SDPA takes the packed rows' 4D mask
(a step's batch: 1.37 s against 1.85 s eager, measured side by side beside a run); eager is what the builds
without a prompt were graded with."""


def _head(tokenizer: Any, response: str, limit: int, prompt: str | None = None, prompt_limit: int = 0) -> list[int]:
    """The shared part of a question: ``<eos> [prompt RESPONSE_MARKER] response``, each cut to its limit
    (the prompt only for a judge that reads it, marked off as the policy sees it)."""
    ids = [tokenizer.eos_token_id]
    if prompt is not None:
        ids += tokenizer(prompt, add_special_tokens=False)["input_ids"][:prompt_limit]
        ids += tokenizer(RESPONSE_MARKER, add_special_tokens=False)["input_ids"]
    return ids + tokenizer(response, add_special_tokens=False)["input_ids"][:limit]


def _tail(tokenizer: Any, criterion: str) -> list[int]:
    """A question's own part: ``<|criterion|> criterion <|verdict|>``; the answer is the next token."""
    return ([tokenizer.convert_tokens_to_ids(CRITERION)] + tokenizer(" " + criterion, add_special_tokens=False)["input_ids"]
            + [tokenizer.convert_tokens_to_ids(VERDICT)])


def encode_question(tokenizer: Any, response: str, criterion: str, limit: int, prompt: str | None = None,
                    prompt_limit: int = 0) -> list[int]:
    """One whole question, ``<eos> [prompt RESPONSE_MARKER] response <|criterion|> criterion <|verdict|>``:
    what the judge is trained on, and what one forward per question grades."""
    return _head(tokenizer, response, limit, prompt, prompt_limit) + _tail(tokenizer, criterion)


@torch.no_grad()
def yes_by_shared_heads(model: Any, tok: Any, answers: tuple[int, int], responses: Sequence[str], criteria: Sequence[str],
                        *, limit: int, temperature: float) -> np.ndarray:
    """P(yes), shape (G, J), by shared heads (the module docstring)."""
    G, J = len(responses), len(criteria)
    heads = [_head(tok, r, limit) for r in responses]
    tails = [_tail(tok, c) for c in criteria]
    head_ids, head_mask = left_padded(heads, tok.pad_token_id)
    positions = (head_mask.cumsum(dim=1) - 1).clamp(min=0)
    out = model(input_ids=head_ids, attention_mask=head_mask, position_ids=positions, use_cache=True, logits_to_keep=1)
    rows = torch.arange(G).repeat_interleave(J)
    argument = cache_argument(model)
    cache = out[argument]
    cache.batch_select_indices(rows)
    width = max(len(t) for t in tails)
    tail_ids = torch.full((G * J, width), tok.pad_token_id, dtype=torch.long)
    tail_mask = torch.zeros((G * J, width), dtype=torch.long)
    for i in range(G * J):
        t = tails[i % J]
        tail_ids[i, : len(t)], tail_mask[i, : len(t)] = torch.tensor(t), 1
    mask = torch.cat([head_mask[rows], tail_mask], dim=1)
    tail_positions = (mask.cumsum(dim=1) - 1).clamp(min=0)[:, head_ids.shape[1]:]
    logits = model(input_ids=tail_ids, attention_mask=mask, position_ids=tail_positions, use_cache=True,
                   **{argument: cache}).logits
    last = tail_mask.sum(dim=1) - 1
    pair = logits[torch.arange(G * J), last][:, list(answers)].float() / temperature
    return torch.softmax(pair, dim=-1)[:, 0].reshape(G, J).numpy().astype(float)


@torch.no_grad()
def yes_packed(model: Any, tok: Any, answers: tuple[int, int], responses: Sequence[str], criteria: Sequence[str], *,
               limit: int, prompt: str | None, prompt_limit: int, temperature: float) -> np.ndarray:
    """P(yes), shape (G, J), packed (the module docstring); ``prompt``: the task's, read before the responses."""
    J = len(criteria)
    start = _head(tok, "", 0, prompt, prompt_limit)
    bodies = [tok(r, add_special_tokens=False)["input_ids"][:limit] for r in responses]
    tails = [_tail(tok, c) for c in criteria]
    argument = cache_argument(model)
    cache = model(input_ids=torch.tensor([start]), attention_mask=torch.ones(1, len(start), dtype=torch.long),
                  use_cache=True, logits_to_keep=1)[argument]
    cache.batch_repeat_interleave(len(bodies))
    ids, segments, positions, ends = _packed_rows(bodies, tails, len(start), tok.pad_token_id)
    hidden = model.transformer(input_ids=ids, attention_mask=_packed_mask(segments, len(start)), position_ids=positions,
                               use_cache=True, **{argument: cache}).last_hidden_state
    last = hidden[torch.arange(len(bodies)).repeat_interleave(J), ends.flatten()]
    pair = model.lm_head(last)[:, list(answers)].float() / temperature
    return torch.softmax(pair, dim=-1)[:, 0].reshape(len(bodies), J).numpy().astype(float)


def left_padded(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows as one left-padded batch (ids, attention mask): every row's last token in the last column."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):], mask[i, width - len(r):] = torch.tensor(r), 1
    return ids, mask


def _packed_rows(bodies: list[list[int]], tails: list[list[int]], offset: int,
                 pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One right-padded row per response, ``body tail₁ … tail_J``: its ids, each token's segment (0 the
    body, j the j-th tail, −1 padding), its position as in the unpacked question (a tail continues the
    body, from ``offset``, the shared start's length), and where each tail ends (G, J)."""
    width = max(len(b) for b in bodies) + sum(len(t) for t in tails)
    shape = (len(bodies), width)
    ids, segments = torch.full(shape, pad, dtype=torch.long), torch.full(shape, -1, dtype=torch.long)
    positions, ends = torch.zeros(shape, dtype=torch.long), torch.zeros((len(bodies), len(tails)), dtype=torch.long)
    for r, body in enumerate(bodies):
        ids[r, : len(body)], segments[r, : len(body)] = torch.tensor(body, dtype=torch.long), 0
        positions[r, : len(body)] = torch.arange(offset, offset + len(body))
        at = len(body)
        for j, tail in enumerate(tails):
            ids[r, at : at + len(tail)], segments[r, at : at + len(tail)] = torch.tensor(tail), j + 1
            positions[r, at : at + len(tail)] = torch.arange(offset + len(body), offset + len(body) + len(tail))
            at += len(tail)
            ends[r, j] = at - 1
    return ids, segments, positions, ends


def _packed_mask(segments: torch.Tensor, offset: int) -> torch.Tensor:
    """The 4D attention mask (True: may attend) of packed rows behind a shared start of ``offset`` tokens: every
    token sees the start; a body token sees the body up to itself; a tail token sees the body and its
    own tail up to itself; padding sees only the start."""
    width = segments.shape[1]
    query, key = segments[:, :, None], segments[:, None, :]
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    seen = causal & (key >= 0) & (query >= 0) & ((key == 0) | (key == query))
    allowed = torch.cat([torch.ones(*seen.shape[:2], offset, dtype=torch.bool), seen], dim=2)
    return allowed[:, None]
