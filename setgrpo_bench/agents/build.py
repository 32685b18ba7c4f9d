"""The agent of a config: a coefficient rule, or SetGRPO around the GRPO rule."""

from __future__ import annotations

from .base import Agent, RuleAgent
from .config import TrainConfig
from .setgrpo import SetGRPOAgent


def build_agent(config: TrainConfig) -> Agent:
    c = config.coefficients
    if c.selector == "setgrpo":
        return SetGRPOAgent(config.setgrpo, std_floor=c.std_floor)
    return RuleAgent(c.rule, std_floor=c.std_floor, qae_quantile=c.qae_quantile, qae_std=c.qae_std)
