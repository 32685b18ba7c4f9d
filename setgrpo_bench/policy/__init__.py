"""The policy: a transformers causal LM, its tokenizer, and generation engines (DESIGN §6)."""

from .engine import EngineError, GenerateEngine, GenerationConfig, Rollout, RolloutEngine, TransformersEngine
from .load import load_policy, policy_path
from .model import Policy, PolicyError, policy_fingerprint
from .tiny import TinyConfig, build_tiny, tiny_path

__all__ = [
    "EngineError", "GenerateEngine", "GenerationConfig", "Policy", "PolicyError", "Rollout", "RolloutEngine", "TinyConfig", "TransformersEngine",
    "build_tiny", "load_policy", "policy_fingerprint", "policy_path", "tiny_path",
]
