import os

import numpy as np
import pytest
from scipy.stats import binom

import setgrpo_bench  # noqa: F401  (registers the built-in environments)
from setgrpo_bench.envs import load_env_benchmark, registered_env_ids
from setgrpo_bench.harness.threads import available_cores, set_threads
from setgrpo_bench.policy.embedded import CACHE_ENV, TinyConfig
from setgrpo_bench.policy.tiny import build_tiny

# a test-sized embedded policy, built from scratch by the same code as the real one
SMALL_POLICY = TinyConfig(vocab_size=400, n_embd=32, n_layer=1, n_head=2, instances_per_benchmark=4,
                   examples_per_instance=1, batch_size=8)


SMALL_RUN = dict(envs="MedicationGuide,UnitConversion", groups_per_step=2, group_size=3, eval_instances=2,
                 max_new_tokens=12)
"""A run sized for tests (add ``steps`` and ``policy``)."""


def groups_of(rewards: np.ndarray):
    """A batch as an agent sees it, with nothing but the rewards (no rollout, tasks or judge spreads)."""
    from setgrpo_bench.agents.base import Groups

    return Groups(rollout=None, tasks=[], env_indices=[], rewards=rewards, spreads=np.zeros_like(rewards))


def scored_batch(trainer, policy, tasks, seed):
    """A generation batch as TRL hands it to SetGRPO (4 completions per task): one rollout, its rewards,
    TRL's output dict."""
    import torch

    from setgrpo_bench.policy import GenerationConfig, TransformersEngine

    rows = [t for t in tasks for _ in range(4)]
    torch.manual_seed(seed)
    rollout = TransformersEngine(policy, GenerationConfig(max_new_tokens=10)).generate([t.prompt_text for t in rows])
    inputs = [{"prompt": t.prompt_text, "task_id": t.id} for t in rows]
    rewards = trainer.reward_funcs[0](prompts=[i["prompt"] for i in inputs], completions=rollout.texts,
                                      task_id=[t.id for t in rows])
    rewards = torch.tensor([[np.nan if r is None else r] for r in rewards], dtype=torch.float32)
    trainer._scored = (inputs, [i["prompt"] for i in inputs], rollout.texts, rollout.response_ids.tolist(), rewards)
    output = {"prompt_ids": rollout.prompt_ids, "prompt_mask": rollout.prompt_mask, "completion_ids": rollout.response_ids,
              "completion_mask": rollout.response_mask, "advantages": torch.zeros(len(inputs))}
    return rollout, rewards, output


class Killed(Exception):
    """Raised by ``kill_after`` to interrupt a run between steps."""


def kill_after(last: int):
    """An ``on_step`` callback that interrupts a run once step ``last`` is on disk."""

    def on_step(step, _metrics):
        if step == last:
            raise Killed

    return on_step


def binomial_ok(k: int, n: int, p: float, alpha: float = 1e-4) -> bool:
    """Is ``k`` successes in ``n`` trials consistent with rate ``p`` at two-sided level ``alpha``?"""
    low, high = binom.interval(1 - alpha, n, p)
    return low <= k <= high


def pytest_configure(config):
    """Under ``pytest -n N`` each worker, and every process its tests start, gets its share of the cores:
    N workers with every core each would oversubscribe them (DESIGN §9)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        os.environ["OMP_NUM_THREADS"] = str(max(1, available_cores() // workers))
        set_threads(0)


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Tests write their cached evaluations and policies to a private cache, never the user's."""
    mp = pytest.MonkeyPatch()
    mp.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("session-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def builtin_ids() -> list[str]:
    return registered_env_ids()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def medication():
    return load_env_benchmark("MedicationGuide")


@pytest.fixture(scope="session")
def grpo_runs(small_policy, tmp_path_factory):
    """Two finished 3-step seeds of a test-sized GRPO run (``<root>/grpo/seed<k>``), made once for every
    test that reads finished runs; a test that changes them works on a copy."""
    from setgrpo_bench.agents import resolve_config
    from setgrpo_bench.harness import run

    root = tmp_path_factory.mktemp("grpo-runs")
    for seed in (0, 1):
        run(resolve_config("grpo", {**SMALL_RUN, "steps": 3, "policy": small_policy, "seed": seed}),
            root / "grpo" / f"seed{seed}")
    return root


@pytest.fixture(scope="session")
def small_policy(tmp_path_factory) -> str:
    """Folder of a test-sized tiny policy (built once per session in a private cache)."""
    return str(build_tiny(SMALL_POLICY, out=tmp_path_factory.mktemp("small-policy") / "small"))
