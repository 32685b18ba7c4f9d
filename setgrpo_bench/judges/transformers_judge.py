"""A local causal LM as the judge backend: the verdict's probability is the model's own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError
from ..policy import load_policy, policy_fingerprint, policy_path


def context_length(model: torch.nn.Module) -> int:
    """Positions the model can attend to (``max_position_embeddings`` or GPT-2's ``n_positions``)."""
    config = model.config
    return int(getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 2048))


def judge_identity(spec: str | Path) -> dict[str, Any]:
    """What identifies a local judge model, from its files alone (no weights are loaded): suite
    hashes of LLM-judged runs are computed with this."""
    path = policy_path(spec)
    return {"kind": "transformers", "policy": "tiny" if str(spec) == "tiny" else path.name,
            "hash": policy_fingerprint(path)}


class TransformersJudge:
    """A local causal LM judge: P(yes) from the next-token distribution over " yes" and " no"."""

    def __init__(self, path: str | Path, device: str = "cpu", batch_size: int = 64) -> None:
        self.policy = load_policy(path, device)
        self.spec = path
        self.batch_size = batch_size
        tok = self.policy.tokenizer
        self.answer_ids = [tok(" yes", add_special_tokens=False)["input_ids"][0],
                           tok(" no", add_special_tokens=False)["input_ids"][0]]
        # a question longer than the context keeps its end, where the answer follows
        tok.truncation_side = "left"
        self.context = context_length(self.policy.model)
        if self.answer_ids[0] == self.answer_ids[1]:
            raise ConfigError("judge", str(path), "a tokenizer where ' yes' and ' no' start with different tokens")

    def identity(self) -> dict[str, Any]:
        return judge_identity(self.spec)

    @torch.no_grad()
    def yes_probabilities(self, questions: Sequence[str], system: str = "") -> np.ndarray:
        """P(yes) / (P(yes) + P(no)) for the first answer token of each question, shape (N,) (T = 1)."""
        tok, model = self.policy.tokenizer, self.policy.model
        out = []
        for start in range(0, len(questions), self.batch_size):
            chunk = [self.policy.format_prompt((system + "\n\n" if system else "") + q) for q in questions[start : start + self.batch_size]]
            enc = tok(chunk, return_tensors="pt", padding=True, truncation=True, max_length=self.context).to(self.policy.device)
            positions = (enc["attention_mask"].cumsum(1) - 1).clamp(min=0)
            logits = model(**enc, position_ids=positions).logits[:, -1].float()
            pair = torch.log_softmax(logits, dim=-1)[:, self.answer_ids]
            out.append(torch.softmax(pair, dim=-1)[:, 0].cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)
