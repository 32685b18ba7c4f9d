import numpy as np
import pytest
import torch

from setgrpo_bench.errors import ConfigError
from setgrpo_bench.policy import GenerationConfig, TransformersEngine, load_policy
from setgrpo_bench.policy.engine import response_mask, token_logprobs


@pytest.fixture(scope="module")
def policy(small_policy):
    return load_policy(small_policy)


def test_engine_logprobs_equal_a_recomputed_forward(policy, medication):
    torch.manual_seed(0)
    engine = TransformersEngine(policy, GenerationConfig(max_new_tokens=20, temperature=0.8))
    prompts = [medication.instance("eval", i).prompt_text for i in (0, 1, 2)] + ["Hi"]  # unequal lengths
    rollout = engine.generate(prompts)
    assert rollout.prompt_ids.shape[0] == len(rollout) == 4
    with torch.no_grad():
        recomputed = token_logprobs(policy.model, rollout, temperature=0.8) * rollout.response_mask
    assert torch.allclose(recomputed, rollout.logprobs, atol=1e-4)


def test_response_mask_stops_after_first_eos():
    ids = torch.tensor([[5, 6, 0, 0, 7], [5, 6, 7, 8, 9]])
    assert response_mask(ids, eos_id=0).tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]


def test_generation_is_seeded(policy):
    engine = TransformersEngine(policy, GenerationConfig(max_new_tokens=10))
    torch.manual_seed(3)
    a = engine.generate(["Write a note."] * 3).texts
    torch.manual_seed(3)
    assert engine.generate(["Write a note."] * 3).texts == a


@pytest.mark.parametrize("kw, match", [({"temperature": 0}, "temperature"), ({"top_p": 1.5}, "top_p"),
                                       ({"max_new_tokens": 0}, "max_new_tokens")])
def test_bad_generation_config(kw, match):
    with pytest.raises(ConfigError, match=match):
        GenerationConfig(**kw)


def test_bad_device():
    with pytest.raises(ConfigError, match="device='tpu'"):
        load_policy("tiny", device="tpu")
