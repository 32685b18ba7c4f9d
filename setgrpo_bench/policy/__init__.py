"""The policy: a transformers causal LM, its tokenizer, and generation engines (DESIGN §6)."""

from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".engine": ["EngineError", "GenerateEngine", "GenerationConfig", "Rollout", "RolloutEngine", "TransformersEngine"],
    ".load": ["load_policy", "policy_path"],
    ".embedded": ["TinyConfig", "tiny_path"],
    ".files": ["policy_fingerprint"],
    ".model": ["Policy", "PolicyError"],
    ".tiny": ["build_tiny"],
})
