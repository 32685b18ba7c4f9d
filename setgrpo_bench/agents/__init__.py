"""Agents: coefficient rules or SetGRPO (DESIGN §7, §8), and the configs and presets that select them.

Everything here is numpy: an agent touches no model and never sees a true score. The harness computes
what an agent asks for (Gram matrices from the live policy, reference audits) and turns its decision
into an update (``harness.objective``, ``harness.update``); true-score diagnostics live there too."""

from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".base": ["Agent", "Decision", "Groups", "Needs", "RuleAgent"],
    ".build": ["build_agent"],
    ".coefficients": ["COEFFICIENT_RULES", "group_coefficients", "grpo_coefficients"],
    ".config": ["LOSS_TYPES", "TrainConfig"],
    ".presets": ["load_preset", "resolve_config"],
    ".setgrpo": ["SetGRPOAgent"],
})
