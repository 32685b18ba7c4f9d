"""A policy by spec: ``tiny`` (the embedded model) or any transformers causal-LM folder."""

from __future__ import annotations

from pathlib import Path

from .model import Policy, check_device, load_policy_folder
from .tiny import build_tiny


def policy_path(spec: str | Path) -> Path:
    """The folder of ``spec``: the embedded model's (built and cached on first use) or ``spec`` itself."""
    return build_tiny() if str(spec) == "tiny" else Path(spec).expanduser()


def load_policy(spec: str | Path, device: str = "cpu") -> Policy:
    """``tiny`` or a transformers causal-LM folder, on ``device``."""
    check_device(device)
    return load_policy_folder(policy_path(spec), device, name="tiny" if str(spec) == "tiny" else None)
