"""Per-step metrics where researchers look (``--report-to tensorboard,wandb``): the same values as
``metrics.jsonl``, under TRL's names where the two share a meaning, SetGRPO's under ``setgrpo/`` (as
``SetGRPOTrainer`` logs them), the rest under their own names. wandb runs offline: nothing leaves the
machine; ``wandb sync`` uploads the run folder's ``wandb/`` later."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..agents.fields import REPORTERS
from ..errors import ConfigError

TRL_NAMES = {"reward": "reward", "loss": "loss", "grad_norm": "grad_norm", "kl": "kl",
             "clip_fraction": "clip_ratio/region_mean", "response_tokens": "completions/mean_length"}
"""Our metric → TRL's ``GRPOTrainer`` log key, where they mean the same."""
SETGRPO = ("q", "tau", "alpha_a", "window_d1", "window_d2", "accepted_groups", "acceptance_nonconstant", "uncertifiable",
           "score_mean", "coverage_ref", "reversal_ref", "coverage_true", "reversal_true", "audited_groups")


def reporter_names(spec: str) -> list[str]:
    """``"tensorboard,wandb"`` → the reporters (``""``: none; the config checked the names)."""
    return [n.strip() for n in spec.split(",") if n.strip() in REPORTERS]


def logged_name(key: str) -> str:
    """The name a metric is reported under."""
    return TRL_NAMES.get(key) or (f"setgrpo/{key}" if key in SETGRPO else key)


class Reporters:
    """The reporters a run writes to, in its folder (``tensorboard/``, ``wandb/``)."""

    def __init__(self, spec: str, root: Path, *, name: str, config: Mapping[str, Any]) -> None:
        self.writers: list[Any] = []
        for kind in reporter_names(spec):
            self.writers.append(_tensorboard(root) if kind == "tensorboard" else _wandb(root, name, config))

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """One step's numbers (non-numbers and non-finite values are left out)."""
        values = {logged_name(k): float(v) for k, v in metrics.items() if k != "step" and isinstance(v, (int, float))
                  and not isinstance(v, bool) and math.isfinite(v)}
        for writer in self.writers:
            if hasattr(writer, "add_scalar"):
                for name, value in values.items():
                    writer.add_scalar(name, value, step)
                writer.flush()
            else:
                writer.log(values, step=step)

    def close(self) -> None:
        for writer in self.writers:
            writer.close() if hasattr(writer, "add_scalar") else writer.finish()


def _tensorboard(root: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ConfigError("report_to", "tensorboard", "an installed tensorboard", "pip install -e '.[tensorboard]'") from None
    return SummaryWriter(log_dir=str(root / "tensorboard"))


def _wandb(root: Path, name: str, config: Mapping[str, Any]) -> Any:
    try:
        import wandb
    except ImportError:
        raise ConfigError("report_to", "wandb", "an installed wandb", "pip install -e '.[wandb]'") from None
    return wandb.init(mode="offline", dir=str(root), project="setgrpo_bench", name=name, config=dict(config),
                      reinit="finish_previous")
