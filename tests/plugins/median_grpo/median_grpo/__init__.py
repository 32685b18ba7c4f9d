"""A setgrpo_bench plugin: GRPO whose baseline is the group's median instead of its mean."""

from pathlib import Path

import numpy as np

from setgrpo_bench.agents.plugins import Plugin


def median_coefficients(rewards: np.ndarray, *, std_floor: float = 0.05, eps: float = 1e-4, **_: float) -> np.ndarray:
    """a_i = (r_i − median(r)) / (max(std(r), std_floor) + ε): robust to one mis-scored response."""
    rewards = np.asarray(rewards, dtype=float)
    if rewards.size < 2 or np.ptp(rewards) == 0:
        return np.zeros_like(rewards)
    return (rewards - np.median(rewards)) / (max(float(rewards.std(ddof=1)), std_floor) + eps)


plugin = Plugin(rules={"median_grpo": median_coefficients})
catalog = Path(__file__).parent / "catalog"
