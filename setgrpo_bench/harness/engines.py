"""The rollout engine a config asks for (DESIGN §6): the sampling loop, transformers' ``generate``, or vLLM."""

from __future__ import annotations

from ..agents.config import TrainConfig
from ..policy.engine import (
    GenerateEngine,
    GenerationConfig,
    RolloutEngine,
    TransformersEngine,
)
from ..policy.model import Policy
from ..policy.vllm_engine import VLLMEngine


def make_engine(config: TrainConfig, policy: Policy) -> RolloutEngine:
    """The engine of ``config.rollout.engine`` over ``policy``, with the config's sampling settings."""
    r = config.rollout
    generation = GenerationConfig(max_new_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p)
    if r.engine == "vllm":
        return VLLMEngine(policy, generation, gpu_memory_utilization=r.vllm_gpu_memory, seed=config.run.seed)
    return GenerateEngine(policy, generation) if r.engine == "generate" else TransformersEngine(policy, generation)
