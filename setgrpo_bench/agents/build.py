"""The agent of a config: a coefficient rule, SetGRPO around the GRPO rule, or a plugin's agent class,
wrapped in a stopping rule when the config has one."""

from __future__ import annotations

from .base import Agent, RuleAgent
from .config import TrainConfig
from .plugins import agent_class
from .setgrpo import SetGRPOAgent
from .stopping import StoppingAgent


def build_agent(config: TrainConfig) -> Agent:
    """The config's agent, inside its stopping rule when it has one."""
    agent = _agent(config)
    return agent if config.stopping.stop == "none" else StoppingAgent(agent, config.stopping)


def _agent(config: TrainConfig) -> Agent:
    c = config.coefficients
    if c.selector == "setgrpo":
        return SetGRPOAgent(config.setgrpo, std_floor=c.std_floor)
    if (plugin := agent_class(c.selector)) is not None:
        return plugin.from_config(config)
    return RuleAgent(c.rule, std_floor=c.std_floor, qae_quantile=c.qae_quantile, qae_std=c.qae_std)
