"""Noise profiles of the simulated rubric judge (DESIGN §4).

A judge call on one criterion errs with a probability set by the criterion's category and the true
verdict (false positive when the truth is "not met", false negative when it is "met"), shifted on the
logit scale by a per-call leniency shared by all criteria of the call (correlated noise) and by a
length bias (longer answers look better). A share of the errors is *persistent*: the same judge
makes the same mistake on the same response and criterion every time it is asked, so repeating the
judge does not average it away. A small share of calls may be *gross errors* (the judge misreads the
response and flips most verdicts: one mis-scored response in a group). Scores may be reported on a
Likert scale, and a call may fail. ``cost`` prices a call relative to the training judge. A profile
may carry an injected ``bias`` (``graders/bias.py``): its score then rewards one surface feature.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit, logit

from ..errors import UnknownNameError
from ..tasks.schema import load_schema, schema_problems
from ..tasks.yamlio import Location, load_yaml
from .profile_files import profile_files

HERMITE = np.polynomial.hermite_e.hermegauss(64)
VERBOSITY_FIELDS = ("length_favours", "limit_blindness", "keyword_credit", "repetition_missed", "confidence_auroc",
                    "gross_visible", "difficulty_sd")
"""What LLM judges are known for beyond flips (Zheng et al. 2023; Saito et al. 2023), and a reported
confidence that carries information: off unless set (a profile without them keeps its fingerprint)."""
SCHEMA = Path(__file__).with_name("noise_profile.schema.json")
"""The profile format (fields, types, ranges): ``graders/*.yaml`` files are checked against it."""


@dataclass(frozen=True)
class NoiseProfile:
    """Parameters of a simulated judge. Rates are per criterion call, at zero leniency and at the
    reference length."""

    name: str
    false_positive: Mapping[str, float]
    false_negative: Mapping[str, float]
    leniency_sd: float = 0.0
    length_bias: float = 0.0
    reference_words: int = 60
    persistent_share: float = 0.0
    likert_levels: int = 0
    invalid_rate: float = 0.0
    max_retries: int = 2
    judge_seed: int = 0
    gross_error_rate: float = 0.0  # share of calls that misread the response and flip most verdicts
    gross_flip: float = 0.8  # in such a call, the probability that each verdict is flipped
    cost: float = 1.0  # price of one call relative to the training judge's (a reference judge costs more)
    length_favours: bool = False  # the length bias favours the response (met for criteria, not met for pitfalls)
    limit_blindness: float = 0.0  # logit shift towards "met" of a violated length/count limit, per doubling of length
    keyword_credit: float = 0.0  # logit shift towards "met" of a criterion by the share of its words the response restates
    repetition_missed: float = 0.0  # probability that the judge misses a repetition the response has
    confidence_auroc: float = 0.0  # > 0.5: how well the reported confidence separates wrong verdicts from right ones
    gross_visible: float = 0.0  # probability that a gross-error call shows up as low confidence on all its verdicts
    difficulty_sd: float = 0.0  # sd of a call's latent difficulty: a logit shift towards error on all its verdicts
    bias: Mapping[str, Any] = field(default_factory=dict)  # an injected bias (family, strength, feature); empty: none
    description: str = ""

    def __post_init__(self) -> None:
        problems = schema_problems(self.to_dict(), load_schema(SCHEMA))
        if problems:
            raise problems[0]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, file: str | None = None, lines: Location | None = None) -> NoiseProfile:
        """A profile from a parsed YAML mapping; the first problem names the file, line and field."""
        problems = schema_problems(raw, load_schema(SCHEMA), file=file, lines=lines)
        if problems:
            raise problems[0]
        return cls(**{k: v for k, v in raw.items() if k != "kind"})

    def to_dict(self) -> dict[str, Any]:
        """The profile's fields as in its YAML file (``bias`` only when it has one)."""
        return {k: dict(v) if isinstance(v, Mapping) else v for k, v in asdict(self).items() if k != "bias" or v}

    def fingerprint(self) -> dict[str, Any]:
        """What defines the judge's scores, for suite hashes: every field but the price of a call, and
        the gross-error fields only when the judge makes gross errors (otherwise they do nothing)."""
        out = {k: v for k, v in self.to_dict().items() if k != "cost"}
        if not self.gross_error_rate:
            out = {k: v for k, v in out.items() if k not in ("gross_error_rate", "gross_flip")}
        return {k: v for k, v in out.items() if k not in VERBOSITY_FIELDS or v}  # off: as before they existed

    @property
    def is_clean(self) -> bool:
        return not any(self.false_positive.values()) and not any(self.false_negative.values())

    def base_rates(self, categories: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(false-positive, false-negative) rates per criterion, each shape (J,)."""
        fp = np.array([self.false_positive[c] for c in categories])
        fn = np.array([self.false_negative[c] for c in categories])
        return fp, fn

    def length_shift(self, n_words: np.ndarray) -> np.ndarray:
        """Logit shift towards "met" for responses of ``n_words`` words: bias · log2(words / reference)."""
        return self.length_bias * np.log2(np.maximum(n_words, 1) / self.reference_words)

    def expected_error_rate(self, rate: float, n_words: int | None = None, toward_met: bool = True) -> float:
        """Marginal error probability of one call (leniency integrated out by Gauss–Hermite, gross
        errors mixed in), for a criterion with base ``rate``; ``toward_met`` for false positives."""
        if rate == 0:
            return self.gross_error_rate * self.gross_flip
        sign = 1.0 if toward_met else -1.0
        shift = sign * float(self.length_shift(np.array(n_words or self.reference_words)))
        base = expit(logit(rate) + shift)
        nodes, weights = HERMITE  # leniency (± by direction) and difficulty (towards error) add on the logit
        spread = float(np.hypot(self.leniency_sd, self.difficulty_sd))
        total = np.maximum(expit(logit(rate) + shift + spread * nodes), self.persistent_share * base)
        ordinary = float(weights @ total / weights.sum())
        return (1 - self.gross_error_rate) * ordinary + self.gross_error_rate * self.gross_flip


def persistent_uniforms(judge_seed: int, response: str, criterion_ids: tuple[str, ...]) -> np.ndarray:
    """A fixed uniform in [0, 1) per (judge, response, criterion): the judge's persistent draw."""
    out = np.empty(len(criterion_ids))
    for j, cid in enumerate(criterion_ids):
        digest = hashlib.blake2b(f"{judge_seed}\0{cid}\0{response}".encode(), digest_size=8).digest()
        out[j] = int.from_bytes(digest, "big") / 2**64
    return out


def profile_names() -> list[str]:
    """Names of the noise profiles in the catalog search path."""
    return sorted(_profile_paths())


def _profile_paths() -> dict[str, Path]:
    return profile_files({"noise"})


@lru_cache(maxsize=64)
def _load_profile_file(path: Path) -> NoiseProfile:
    data, lines = load_yaml(path)
    return NoiseProfile.from_dict(data, file=str(path), lines=lines)


def load_profile(name_or_path: str | Path | NoiseProfile) -> NoiseProfile:
    """A noise profile by catalog name (``clean``, ``mild``, ``realistic``, ``harsh``) or YAML path."""
    if isinstance(name_or_path, NoiseProfile):
        return name_or_path
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return _load_profile_file(path.resolve())
    paths = _profile_paths()
    if str(name_or_path) not in paths:
        raise UnknownNameError("noise profile", str(name_or_path), paths)
    return _load_profile_file(paths[str(name_or_path)])
