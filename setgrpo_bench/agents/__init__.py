"""Agents: coefficient rules plus the shared GRPO objective (DESIGN §7)."""

from .coefficients import COEFFICIENT_RULES, grpo_coefficients, group_coefficients
from .config import TrainConfig, load_preset, resolve_config
from .objective import LOSS_TYPES, grpo_loss
from .trainer import Trainer

__all__ = [
    "COEFFICIENT_RULES", "LOSS_TYPES", "TrainConfig", "Trainer", "grpo_coefficients", "grpo_loss",
    "group_coefficients", "load_preset", "resolve_config",
]
