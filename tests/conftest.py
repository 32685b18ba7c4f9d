import numpy as np
import pytest
from scipy.stats import binom

import setgrpo_bench  # noqa: F401  (registers the built-in environments)
from setgrpo_bench.envs import load_env_benchmark, registered_env_ids


def binomial_ok(k: int, n: int, p: float, alpha: float = 1e-4) -> bool:
    """Is ``k`` successes in ``n`` trials consistent with rate ``p`` at two-sided level ``alpha``?"""
    low, high = binom.interval(1 - alpha, n, p)
    return low <= k <= high


@pytest.fixture(scope="session")
def builtin_ids() -> list[str]:
    return registered_env_ids()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def medication():
    return load_env_benchmark("MedicationGuide")
