"""Loading a causal LM and its tokenizer; turning prompts into model input."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ..errors import ConfigError, SetgrpoBenchError
from .files import policy_fingerprint

RESPONSE_MARKER = "\n### Response:\n"


class PolicyError(SetgrpoBenchError):
    """The policy path does not hold a usable causal LM."""


@dataclass
class Policy:
    """A causal LM with its tokenizer (left padding, for batched generation)."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    name: str
    path: Path

    def fingerprint(self) -> str:
        """The initial policy's identity (see ``policy_fingerprint``)."""
        return policy_fingerprint(self.path)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def format_prompt(self, prompt: str) -> str:
        """The text the model continues: the tokenizer's chat template when it has one, else the
        prompt followed by a response marker (the format the embedded model is trained on)."""
        if getattr(self.tokenizer, "chat_template", None):
            messages = [{"role": "user", "content": prompt}]
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return prompt + RESPONSE_MARKER


def check_device(device: str) -> None:
    """``cpu``, ``cuda`` or ``cuda:N``, and CUDA only where it exists."""
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ConfigError("device", device, "'cpu', 'cuda' or 'cuda:N'")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device", device, "a device that exists", "CUDA is not available here; use --device cpu.")


def load_policy_folder(path: Path, device: str = "cpu", *, name: str | None = None) -> Policy:
    """A transformers causal-LM folder (saved with ``save_pretrained``) as a ``Policy`` on ``device``."""
    check_device(device)
    if not path.is_dir() or not (path / "config.json").is_file():
        raise PolicyError(f"policy path {str(path)!r} is not a model folder (no config.json); give 'tiny' or a "
                          "transformers causal-LM folder saved with save_pretrained")
    try:
        AutoConfig.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    except (ValueError, OSError, KeyError) as exc:
        raise PolicyError(f"policy path {str(path)!r} is not a causal LM ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # a damaged weights file: safetensors and torch raise their own types  # noqa: BLE001
        raise PolicyError(f"policy path {str(path)!r}: its weights cannot be read ({type(exc).__name__}: "
                          f"{str(exc)[:160]}); the folder is damaged or not a saved model") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return Policy(model=model.to(device), tokenizer=tokenizer, name=name or path.name, path=path)
