"""The policy: a transformers causal LM, its tokenizer, and generation engines (DESIGN §6)."""

from .engine import GenerationConfig, Rollout, TransformersEngine
from .model import Policy, load_policy
from .tiny import TinyConfig, build_tiny, tiny_path

__all__ = [
    "GenerationConfig", "Policy", "Rollout", "TinyConfig", "TransformersEngine", "build_tiny", "load_policy",
    "tiny_path",
]
