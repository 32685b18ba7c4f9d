"""Rollout engines: the vLLM engine's errors and, where vLLM and CUDA exist, its rollouts; the
trainer's importance-sampling correction and weight push for engines that sample elsewhere."""

import importlib.util

import numpy as np
import pytest
import torch

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.errors import ConfigError
from setgrpo_bench.harness.objective import grpo_loss
from setgrpo_bench.harness.suite import make_envs
from setgrpo_bench.harness.trainer import Trainer
from setgrpo_bench.policy import GenerationConfig, TransformersEngine, load_policy

HAS_VLLM = importlib.util.find_spec("vllm") is not None
HAS_CUDA = torch.cuda.is_available()


@pytest.mark.skipif(HAS_VLLM and HAS_CUDA, reason="vLLM and CUDA are present: the engine can start")
def test_vllm_engine_says_what_is_missing(small_policy):
    from setgrpo_bench.policy.vllm_engine import EngineError, VLLMEngine

    with pytest.raises(EngineError, match="pip install -e '.\\[vllm\\]'|needs a CUDA GPU"):
        VLLMEngine(load_policy(small_policy))


def test_vllm_on_cpu_is_a_config_error():
    with pytest.raises(ConfigError, match="add --device cuda"):
        resolve_config("grpo", {"engine": "vllm"})


@pytest.mark.skipif(not (HAS_VLLM and HAS_CUDA), reason="needs vLLM and a CUDA GPU (pip install -e '.[vllm]')")
def test_vllm_rollouts_match_the_trainer_and_follow_weight_pushes(small_policy):  # pragma: no cover - GPU only
    from setgrpo_bench.policy.engine import token_logprobs
    from setgrpo_bench.policy.vllm_engine import VLLMEngine

    policy = load_policy(small_policy, "cuda")
    engine = VLLMEngine(policy, GenerationConfig(max_new_tokens=16))
    rollout = engine.generate(["Write a note."] * 8)
    trainer_lp = token_logprobs(policy.model, _to_cuda(rollout)) * rollout.response_mask.cuda()
    assert torch.allclose(trainer_lp.cpu(), rollout.logprobs, atol=5e-2)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.mul_(0.0)
    engine.sync_weights()
    assert engine.generate(["Write a note."])  # runs on the pushed (zeroed) weights


def _to_cuda(rollout):
    from setgrpo_bench.harness.trainer import _to

    return _to(rollout, torch.device("cuda"))


def test_importance_weights_multiply_the_surrogate_by_hand():
    logprobs = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    old = logprobs.detach().clone()
    mask = torch.ones(1, 2)
    weights = torch.tensor([[0.5, 2.0]])
    plain, _ = grpo_loss(logprobs, old, torch.tensor([1.0]), mask, torch.tensor([True]))
    weighted, _ = grpo_loss(logprobs, old, torch.tensor([1.0]), mask, torch.tensor([True]), is_weights=weights)
    assert plain.item() == pytest.approx(-1.0) and weighted.item() == pytest.approx(-(0.5 + 2.0) / 2)


class _ElsewhereEngine(TransformersEngine):
    """Samples like the transformers engine but reports slightly different log-probabilities, as a
    separate inference engine would, and counts weight pushes."""

    needs_correction = True
    pushes = 0

    def generate(self, prompts):
        rollout = super().generate(prompts)
        rollout.logprobs = (rollout.logprobs - 0.3) * rollout.response_mask
        return rollout

    def sync_weights(self):
        type(self).pushes += 1


def test_trainer_corrects_for_an_engine_that_samples_elsewhere(small_policy):
    config = resolve_config("grpo", {"policy": small_policy, "envs": "MedicationGuide", "groups_per_step": 4,
                                     "group_size": 4, "max_new_tokens": 12, "noise": "realistic"})
    torch.manual_seed(0)
    policy = load_policy(small_policy)
    engine = _ElsewhereEngine(policy, GenerationConfig(max_new_tokens=12))
    trainer = Trainer(config, policy, make_envs(config), engine=engine)
    trainer.warm_up()
    metrics = trainer.step()
    assert metrics["accepted_groups"] > 0
    # the trainer's own π_old is used: the ratio starts at 1, not at e^0.3, and the weights were pushed
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-3)
    assert _ElsewhereEngine.pushes == 1


def test_a_local_qwen2_checkpoint_trains_setgrpo_with_a_layer_subset(small_policy, tmp_path):
    """Any local HF causal LM works as the policy: a small random Qwen2 (the GPU check's architecture)."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from setgrpo_bench.harness import run

    tokenizer = AutoTokenizer.from_pretrained(small_policy)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(tmp_path / "qwen2")
    tokenizer.save_pretrained(tmp_path / "qwen2")
    overrides = {"policy": str(tmp_path / "qwen2"), "envs": "UnitConversion", "steps": 1, "groups_per_step": 2,
                 "group_size": 3, "eval_instances": 1, "max_new_tokens": 8, "warmup_groups": 6, "window": 8,
                 "geometry": "last:1"}
    result = run(resolve_config("setgrpo", overrides), tmp_path / "run")
    assert result["steps"] == 1 and np.isfinite(result["final"]["macro_true_score"])
