"""Trainer state on disk without pickle's code execution (DESIGN §9).

A checkpoint's optimiser, random streams and agent state are plain data: dicts, lists, tuples,
numbers, strings, tensors and numpy arrays. They are written with ``torch.save`` after every numpy
array is turned into a tensor, and read back with ``torch.load(weights_only=True)``, which rebuilds
only those types: a crafted ``trainer_state.pt`` in a run folder someone sends is refused, never run.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import SetgrpoBenchError

_ARRAY = "__ndarray__"


class StateFileError(SetgrpoBenchError):
    """A state file cannot be written as plain data, or is not one this package wrote."""


def to_plain(value: Any, where: str = "state") -> Any:
    """``value`` with numpy arrays as tagged tensors and numpy scalars as Python numbers; anything
    that is not plain data is refused, naming where it sits."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise StateFileError(f"{where}: an array of Python objects cannot be saved without pickle")
        return {_ARRAY: torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: to_plain(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [to_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if isinstance(value, tuple) else items
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value
    raise StateFileError(f"{where}: a {type(value).__name__} is not plain data (dicts, lists, numbers, strings, "
                         "tensors and numpy arrays); return it as such from state_dict()")


def from_plain(value: Any) -> Any:
    """The inverse of ``to_plain``: tagged tensors back to numpy arrays."""
    if isinstance(value, dict):
        if set(value) == {_ARRAY}:
            return value[_ARRAY].numpy()
        return {k: from_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [from_plain(v) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    return value


def save_state(path: str | Path, state: dict[str, Any]) -> None:
    torch.save(to_plain(state), path)


def load_state(path: str | Path) -> dict[str, Any]:
    """A state file written by ``save_state``; anything else that would need pickle to run code is
    refused with ``StateFileError``."""
    try:
        return from_plain(torch.load(path, weights_only=True, map_location="cpu"))
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StateFileError(f"{path} is not a state file of plain data; it was refused unread, not executed "
                             f"({first[:160]})") from None
