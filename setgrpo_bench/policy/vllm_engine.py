"""vLLM rollouts on the training GPU (the ``[vllm]`` extra; imported only when asked for).

The engine holds its own copy of the weights: after every optimiser step the trainer pushes its
parameters with ``sync_weights`` (``load_weights`` on the engine's model, as TRL's colocate mode
does). vLLM's sampling log-probabilities differ slightly from the trainer's (kernels, precision), so
``needs_correction`` is True: the trainer recomputes π_old itself and weights each token of the
surrogate by min(π_old/π_vllm, C) (truncated importance sampling).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .engine import (
    EngineError,
    GenerationConfig,
    Rollout,
    RolloutEngine,
    cat_rollouts,
    response_mask,
)
from .model import Policy


class VLLMEngine(RolloutEngine):
    """Batched sampling with vLLM (colocated with the trainer on one GPU)."""

    needs_correction = True

    def __init__(self, policy: Policy, config: GenerationConfig = GenerationConfig(), *, gpu_memory_utilization: float = 0.3,
                 seed: int = 0) -> None:
        try:
            import vllm
        except ImportError:
            raise EngineError("the vLLM engine needs vLLM: pip install -e '.[vllm]' on a CUDA machine, "
                              "or use --engine transformers") from None
        if not torch.cuda.is_available():
            raise EngineError("the vLLM engine needs a CUDA GPU; use --engine transformers on this machine")
        self.vllm, self.policy, self.config = vllm, policy, config
        dtype = str(next(policy.model.parameters()).dtype).removeprefix("torch.")
        self.llm = vllm.LLM(model=str(policy.path), tokenizer=str(policy.path), dtype=dtype, seed=seed,
                            gpu_memory_utilization=gpu_memory_utilization, enable_prefix_caching=True,
                            max_model_len=max(config.max_new_tokens + 1024, 2048))

    def sync_weights(self) -> None:
        """Push the trainer's current parameters into the engine and drop its prefix cache."""
        model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        for name, param in self.policy.model.named_parameters():
            model.load_weights([(name, param.data)])
        self.llm.reset_prefix_cache()

    @torch.no_grad()
    def generate(self, prompts: Sequence[str]) -> Rollout:
        """One sampled response per prompt, with vLLM's log-probabilities of the sampled tokens."""
        tok, c = self.policy.tokenizer, self.config
        texts = [self.policy.format_prompt(p) for p in prompts]
        params = self.vllm.SamplingParams(temperature=c.temperature, top_p=c.top_p, max_tokens=c.max_new_tokens,
                                          logprobs=0, seed=int(torch.randint(2**31 - 1, ()).item()))
        outputs = self.llm.generate(texts, params, use_tqdm=False)
        parts = []
        for text, out in zip(texts, outputs):
            sample = out.outputs[0]
            ids = list(sample.token_ids) or [tok.eos_token_id]
            logprobs = [step[token].logprob if step and token in step else 0.0
                        for token, step in zip(ids, sample.logprobs or [None] * len(ids))]
            enc = tok([text], return_tensors="pt")
            response = torch.tensor([ids])
            mask = response_mask(response, tok.eos_token_id)
            parts.append(Rollout(enc["input_ids"], enc["attention_mask"], response, mask,
                                 torch.tensor([logprobs], dtype=torch.float32) * mask, [sample.text.strip()]))
        return cat_rollouts(parts, tok.pad_token_id)
