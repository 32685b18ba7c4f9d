"""Agents: coefficient rules or SetGRPO, plus the shared GRPO objective (DESIGN §7, §8)."""

from .base import Agent, Decision, Groups, RuleAgent
from .coefficients import COEFFICIENT_RULES, grpo_coefficients, group_coefficients
from .config import TrainConfig, load_preset, resolve_config
from .objective import LOSS_TYPES, grpo_loss
from .setgrpo import SetGRPOAgent
from .trainer import Trainer

__all__ = [
    "COEFFICIENT_RULES", "LOSS_TYPES", "Agent", "Decision", "Groups", "RuleAgent", "SetGRPOAgent", "TrainConfig",
    "Trainer", "grpo_coefficients", "grpo_loss", "group_coefficients", "load_preset", "resolve_config",
]
