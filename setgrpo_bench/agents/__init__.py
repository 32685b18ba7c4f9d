"""Agents: coefficient rules or SetGRPO (DESIGN §7, §8). Everything here is torch-free except the GRPO
objective (``agents.objective``) and the gradient geometry (``agents.geometry``)."""

from .base import Agent, Decision, Groups, Needs, RuleAgent
from .build import build_agent
from .coefficients import COEFFICIENT_RULES, grpo_coefficients, group_coefficients
from .config import LOSS_TYPES, TrainConfig, load_preset, resolve_config
from .setgrpo import SetGRPOAgent

__all__ = [
    "COEFFICIENT_RULES", "LOSS_TYPES", "Agent", "Decision", "Groups", "Needs", "RuleAgent", "SetGRPOAgent",
    "TrainConfig", "build_agent", "grpo_coefficients", "group_coefficients", "load_preset", "resolve_config",
]
