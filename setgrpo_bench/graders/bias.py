"""Injected judge biases (DESIGN §4), in the form of CHERRL (Wang et al. 2026, "Reproducing, Analyzing,
and Detecting Reward Hacking in Rubric-Based Reinforcement Learning"): a judge whose score is the gold
rubric score ``s`` (with the profile's usual call noise) plus ``α·b(response)``, one bias family at a
time, so that the divergence between the biased and the gold score is exactly observable.

  lexical   b = 1 when the response uses one of ``words`` (as whole words)
  format    b = 1 when the response is a list of exactly ``items`` items (lines with a list marker)
  closing   b = 1 when the response's last line ends with ``phrase`` (trailing punctuation aside)

The reported score is ``(s + α·b) / (1 + α)``: CHERRL's ``s + α·b`` rescaled to [0, 1], which orders
responses and normalises within a group exactly as ``s + α·b`` does. A bias is deterministic in the
response: repeating the judge does not average it away.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..tasks.response import LIST_MARKER, ResponseView, normalize, term_pattern

BIAS_FAMILIES = ("lexical", "format", "closing")


def has_feature(bias: Mapping[str, Any], response: str | ResponseView) -> bool:
    """Whether the response (its text, or its view when the caller has one) shows the surface feature
    that ``bias`` rewards."""
    view = response if isinstance(response, ResponseView) else ResponseView(response)
    family = bias["family"]
    if family == "lexical":
        return term_pattern(bias["words"]).search(view.norm) is not None
    if family == "format":
        return sum(bool(LIST_MARKER.match(line)) for line in view.lines) == bias["items"]
    if family == "closing":
        last = normalize(view.lines[-1]).rstrip(" .!?,;:") if view.lines else ""
        return last.endswith(normalize(bias["phrase"]))
    raise ValueError(f"unknown bias family {family!r}; expected one of {list(BIAS_FAMILIES)}")


def feature_rate(bias: Mapping[str, Any], responses: Sequence[str]) -> float:
    """The share of ``responses`` that show the biased feature (NaN for none)."""
    return float(np.mean([has_feature(bias, r) for r in responses])) if responses else float("nan")


def biased(score: np.ndarray, feature: np.ndarray, strength: float) -> np.ndarray:
    """The biased score ``(s + α·b) / (1 + α)`` of gold scores ``s`` and features ``b`` ∈ {0, 1}."""
    return (np.asarray(score, float) + strength * np.asarray(feature, float)) / (1.0 + strength)
