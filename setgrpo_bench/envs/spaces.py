"""A Gymnasium text space that holds any Unicode string: prompts and responses are free text."""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Text

_SAMPLE_CHARSET = string.ascii_letters + string.digits + " .,;:!?'-\n" + "éüñçøå—“”€漢字"


class UnicodeText(Text):
    """Any ``str`` of length ``min_length..max_length``; samples from a mixed charset."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=_SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and (self.min_length, self.max_length) == (other.min_length, other.max_length)
