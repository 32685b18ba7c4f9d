import dataclasses

import numpy as np
import pytest
import torch
from scipy.stats import binom

from setgrpo_bench.errors import ConfigError
from setgrpo_bench.policy import (
    EngineError,
    GenerateEngine,
    GenerationConfig,
    TransformersEngine,
    load_policy,
)
from setgrpo_bench.policy.engine import response_mask, token_logprobs, top_p_filter


@pytest.fixture(scope="module")
def policy(small_policy):
    return load_policy(small_policy)


@pytest.mark.parametrize("engine_class", [TransformersEngine, GenerateEngine])
@pytest.mark.parametrize("top_p", [1.0, 0.8])
def test_engine_logprobs_equal_a_teacher_forced_recompute(policy, medication, engine_class, top_p):
    torch.manual_seed(0)
    engine = engine_class(policy, GenerationConfig(max_new_tokens=20, temperature=0.8, top_p=top_p))
    prompts = [medication.instance("eval", i).prompt_text for i in (0, 1, 2)] * 4 + ["Hi"]  # unequal lengths
    rollout = engine.generate(prompts)
    assert rollout.prompt_ids.shape[0] == len(rollout) == 13
    with torch.no_grad():
        recomputed = token_logprobs(policy.model, rollout, temperature=0.8) * rollout.response_mask
    assert (recomputed - rollout.logprobs).abs().max() <= 1e-5


def _exact_next_token(policy, prompt, temperature, top_p, prefix=()):
    """The sampling distribution of the next token after ``prompt`` + ``prefix`` (tempered, nucleus)."""
    enc = policy.tokenizer([policy.format_prompt(prompt)], return_tensors="pt")
    ids = torch.cat([enc["input_ids"], torch.tensor([list(prefix)], dtype=torch.long)], dim=1)
    with torch.no_grad():
        scores = policy.model(input_ids=ids).logits[0, -1].float() / temperature
    return top_p_filter(scores[None], top_p)[0].softmax(-1).numpy()


@pytest.mark.parametrize("engine_class", [TransformersEngine, GenerateEngine])
def test_sampled_tokens_follow_the_model_distribution(policy, engine_class):
    """2,000 samples of the first two tokens on a fixed prompt: every token's count is within its
    binomial interval (level 1e-4 per token, Bonferroni over tokens), for the first token and for
    the second given the most frequent first token (the KV-cache path); nucleus-excluded tokens
    never appear."""
    prompt, temperature, top_p, n = "Write a short note to Ana about her medication.", 1.3, 0.9, 2000
    torch.manual_seed(11)
    rollout = engine_class(policy, GenerationConfig(max_new_tokens=2, temperature=temperature, top_p=top_p,
                                                    batch_size=500)).generate([prompt] * n)
    first = rollout.response_ids[:, 0].numpy()
    checks = [(first, _exact_next_token(policy, prompt, temperature, top_p))]
    top = int(np.bincount(first).argmax())
    second = rollout.response_ids[first == top, 1].numpy()
    if top != policy.tokenizer.eos_token_id:
        checks.append((second, _exact_next_token(policy, prompt, temperature, top_p, prefix=(top,))))
    for tokens, p in checks:
        counts = np.bincount(tokens, minlength=len(p))
        assert counts[p == 0].sum() == 0
        support = np.flatnonzero(p > 0)
        level = 1e-4 / len(support)
        low, high = binom.interval(1 - level, len(tokens), p[support])
        assert np.all((counts[support] >= low) & (counts[support] <= high))


def test_the_sampling_loop_says_when_a_model_has_no_kv_cache(policy):
    class NoCache(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None):
            raise AssertionError("never called")

    with pytest.raises(EngineError, match="no KV cache argument.*--engine generate"):
        TransformersEngine(dataclasses.replace(policy, model=NoCache()))


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


def test_the_shipped_policy_matches_the_suite_and_its_config():
    """The embedded policy ships inside the package under the key of the suite and config it was
    built from; a change to a benchmark, a rubric or the config makes this fail: rebuild it with
    ``python -m setgrpo_bench build-policy``."""
    from setgrpo_bench.policy.embedded import (
        SHIPPED,
        TinyConfig,
        build_key,
        shipped_key,
        tiny_path,
    )

    assert shipped_key() is not None, f"no policy is shipped in {SHIPPED}"
    assert shipped_key() == build_key(TinyConfig()), "the shipped policy is stale: python -m setgrpo_bench build-policy"
    assert tiny_path() == SHIPPED
    assert sum(f.stat().st_size for f in SHIPPED.iterdir()) <= 10 * 2**20


def test_the_policy_hash_ignores_library_metadata(small_policy, tmp_path):
    import json
    import shutil

    from setgrpo_bench.policy import policy_fingerprint

    copy = tmp_path / "copy"
    shutil.copytree(small_policy, copy)
    config = json.loads((copy / "config.json").read_text())
    config["transformers_version"] = "0.0.1"
    (copy / "config.json").write_text(json.dumps(config, indent=7))
    assert policy_fingerprint(copy) == policy_fingerprint(small_policy)
    config["n_embd"] = config["n_embd"] * 2
    (copy / "config.json").write_text(json.dumps(config))
    assert policy_fingerprint(copy) != policy_fingerprint(small_policy)
