"""Programmatic rubric checks: does a response meet one criterion?

Each check is a small frozen dataclass with ``met(view) -> bool``; ``build_check`` turns a spec
mapping (``{"type": "keyword_any", "terms": [...]}``) into one, validating every field. Matching of
terms is case- and diacritic-insensitive and respects word boundaries, as a human reader would.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from ..errors import SpecError, UnknownNameError
from .response import (
    SENTENCE_END,
    WORD,
    ResponseView,
    line_local,
    normalize,
    term_pattern,
)

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+\S")
_GREETING = re.compile(r"^\W*(?:dear|hi|hello|hey|good (?:morning|afternoon|evening)|greetings)\b")
_SIGN_OFF = re.compile(
    r"\b(?:regards|best|sincerely|cheers|thanks|thank you|warmly|yours|see you|take care)\b"
)


class Check:
    """Base class: subclasses set ``type`` and implement ``met``."""

    type: ClassVar[str]

    def met(self, view: ResponseView) -> bool:
        raise NotImplementedError

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": self.type}
        for f in fields(self):  # type: ignore[arg-type]
            if f.init:
                value = getattr(self, f.name)
                spec[f.name] = list(value) if isinstance(value, tuple) else value
        return spec


@dataclass(frozen=True)
class KeywordAny(Check):
    """Met when at least one of ``terms`` occurs."""

    type: ClassVar[str] = "keyword_any"
    terms: tuple[str, ...]
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pattern", term_pattern(self.terms))

    def met(self, view: ResponseView) -> bool:
        return self._pattern.search(view.norm) is not None


@dataclass(frozen=True)
class KeywordAll(Check):
    """Met when every one of ``terms`` occurs."""

    type: ClassVar[str] = "keyword_all"
    terms: tuple[str, ...]
    _patterns: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_patterns", tuple(term_pattern([t]) for t in self.terms))

    def met(self, view: ResponseView) -> bool:
        return all(p.search(view.norm) is not None for p in self._patterns)


@dataclass(frozen=True)
class Forbidden(KeywordAny):
    """Met when none of ``terms`` occurs (e.g. "avoids jargon")."""

    type: ClassVar[str] = "forbidden"

    def met(self, view: ResponseView) -> bool:
        return not super().met(view)


@dataclass(frozen=True)
class Entity(KeywordAll):
    """Met when ``value``, an entity that appears in the prompt, is copied into the response."""

    type: ClassVar[str] = "entity"
    terms: tuple[str, ...] = field(init=False)
    value: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not self.value.strip():
            raise SpecError(f"expected a non-empty string, got {self.value!r}", field="value")
        object.__setattr__(self, "terms", (self.value,))
        super().__post_init__()

    def to_spec(self) -> dict[str, Any]:
        return {"type": self.type, "value": self.value}


@dataclass(frozen=True)
class Regex(Check):
    """Met when ``pattern`` matches somewhere in the response (``^``/``$`` match at line ends)."""

    type: ClassVar[str] = "regex"
    pattern: str
    ignore_case: bool = True
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        flags = re.MULTILINE | (re.IGNORECASE if self.ignore_case else 0)
        object.__setattr__(self, "_compiled", re.compile(line_local(self.pattern), flags))

    def met(self, view: ResponseView) -> bool:
        return self._compiled.search(view.text) is not None


def _in_range(n: int, minimum: int | None, maximum: int | None) -> bool:
    return (minimum is None or n >= minimum) and (maximum is None or n <= maximum)


@dataclass(frozen=True)
class WordCount(Check):
    """Met when the number of words lies in [min, max] (either bound optional)."""

    type: ClassVar[str] = "word_count"
    min: int | None = None
    max: int | None = None

    def met(self, view: ResponseView) -> bool:
        return _in_range(len(view.words), self.min, self.max)


@dataclass(frozen=True)
class Ordering(Check):
    """Met when every term occurs and their first occurrences appear in the given order."""

    type: ClassVar[str] = "ordering"
    terms: tuple[str, ...]
    _patterns: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_patterns", tuple(term_pattern([t]) for t in self.terms))

    def met(self, view: ResponseView) -> bool:
        positions = []
        for pattern in self._patterns:
            match = pattern.search(view.norm)
            if match is None:
                return False
            positions.append(match.start())
        return all(a < b for a, b in zip(positions, positions[1:]))


_COUNTERS: dict[str, Callable[[ResponseView, re.Pattern[str] | None], int]] = {
    "bullets": lambda v, _: sum(bool(_BULLET.match(line)) for line in v.lines),
    "numbered": lambda v, _: sum(bool(_NUMBERED.match(line)) for line in v.lines),
    "sentences": lambda v, _: len(v.sentences),
    "paragraphs": lambda v, _: len([p for p in re.split(r"\n\s*\n", v.text) if p.strip()]),
    "term": lambda v, p: len(p.findall(v.norm)) if p else 0,
}


@dataclass(frozen=True)
class Count(Check):
    """Met when the count of ``unit`` (bullets, numbered, sentences, paragraphs, term) is in range.

    ``exactly`` sets both bounds ("exactly 3 bullet points").
    """

    type: ClassVar[str] = "count"
    unit: str
    min: int | None = None
    max: int | None = None
    exactly: int | None = None
    term: str | None = None
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.unit not in _COUNTERS:
            raise SpecError(f"unknown unit {self.unit!r}; expected one of {sorted(_COUNTERS)}", field="unit")
        if self.unit == "term" and not self.term:
            raise SpecError("unit 'term' needs a 'term' to count", field="term")
        if self.exactly is None and self.min is None and self.max is None:
            raise SpecError("give 'exactly', 'min' or 'max'", field="exactly")
        object.__setattr__(self, "_pattern", term_pattern([self.term]) if self.term else None)

    def met(self, view: ResponseView) -> bool:
        n = _COUNTERS[self.unit](view, self._pattern)
        if self.exactly is not None:
            return n == self.exactly
        return _in_range(n, self.min, self.max)


_STRUCTURES: dict[str, Callable[[ResponseView], bool]] = {
    "list": lambda v: sum(bool(_BULLET.match(line)) for line in v.lines) >= 2,
    "greeting": lambda v: bool(v.sentences) and _GREETING.search(normalize(v.sentences[0])) is not None,
    "sign_off": lambda v: bool(v.lines) and _SIGN_OFF.search(normalize(v.lines[-1])) is not None,
    "question_at_end": lambda v: v.text.rstrip().endswith("?"),
}


@dataclass(frozen=True)
class Structure(Check):
    """Met when the response has the structure ``kind``: list, greeting, sign_off, question_at_end."""

    type: ClassVar[str] = "structure"
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in _STRUCTURES:
            raise SpecError(f"unknown kind {self.kind!r}; expected one of {sorted(_STRUCTURES)}", field="kind")

    def met(self, view: ResponseView) -> bool:
        return _STRUCTURES[self.kind](view)


@dataclass(frozen=True)
class CompleteSentences(Check):
    """Met when the response is prose: finished and made of sentences.

    A sentence counts when it has at least ``min_words`` words and ends with punctuation; list items,
    an opening greeting line ("Dear Ana,") and a closing sign-off line ("Best, Tom") are exempt.
    Keyword strings ("dear tina party tuesday cheers") and truncated output fail.
    """

    type: ClassVar[str] = "complete_sentences"
    min_words: int = 3
    min_fraction: float = 0.8

    def met(self, view: ResponseView) -> bool:
        lines = [line for line in view.lines if not _BULLET.match(line)]
        if lines and len(lines) > 1 and _GREETING.search(normalize(lines[0])) and len(WORD.findall(lines[0])) <= 4:
            lines = lines[1:]
        if lines and len(lines) > 1 and _SIGN_OFF.search(normalize(lines[-1])) and len(WORD.findall(lines[-1])) <= 5:
            lines = lines[:-1]
        if not lines:
            return bool(view.lines)
        if lines[-1].rstrip()[-1] not in ".!?\"')":
            return False
        prose = [s.strip() for line in lines for s in SENTENCE_END.split(line) if s.strip()]
        full = sum(len(WORD.findall(s)) >= self.min_words and s[-1] in ".!?:,\"')" for s in prose)
        return full / len(prose) >= self.min_fraction


@dataclass(frozen=True)
class Repetition(Check):
    """Met when the response repeats itself: a word three times in a row, or a share of repeated
    word n-grams above ``max_ratio``. Used as a pitfall."""

    type: ClassVar[str] = "repetition"
    n: int = 3
    max_ratio: float = 0.15

    def met(self, view: ResponseView) -> bool:
        words = view.words
        if any(a == b == c for a, b, c in zip(words, words[1:], words[2:])):
            return True
        grams = [tuple(words[i : i + self.n]) for i in range(len(words) - self.n + 1)]
        return bool(grams) and 1.0 - len(set(grams)) / len(grams) > self.max_ratio


CHECK_TYPES: dict[str, type[Check]] = {
    c.type: c
    for c in (
        KeywordAny, KeywordAll, Forbidden, Entity, Regex, WordCount, Ordering, Count, Structure,
        CompleteSentences, Repetition,
    )
}

_INT_FIELDS = {"min", "max", "exactly", "n", "min_words"}
_FLOAT_FIELDS = {"max_ratio", "min_fraction"}
_TERM_FIELDS = {"terms"}


def _coerce(name: str, value: Any) -> Any:
    if name in _INT_FIELDS and value is not None:
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).lstrip("-").isdigit():
            raise SpecError(f"expected an integer, got {value!r}", field=name)
        return int(value)
    if name in _FLOAT_FIELDS:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise SpecError(f"expected a number, got {value!r}", field=name) from None
    if name in _TERM_FIELDS:
        if isinstance(value, str) or not isinstance(value, Sequence) or not value:
            raise SpecError(f"expected a non-empty list of strings, got {value!r}", field=name)
        if not all(isinstance(t, str) and t.strip() for t in value):
            raise SpecError(f"every term must be a non-empty string, got {value!r}", field=name)
        return tuple(value)
    return value


def build_check(spec: Mapping[str, Any]) -> Check:
    """Build a check from its spec mapping; raises ``SpecError`` naming the bad field.

    >>> build_check({"type": "word_count", "max": 50}).met(ResponseView("Short and sweet."))
    True
    """
    if not isinstance(spec, Mapping) or "type" not in spec:
        raise SpecError(f"a check must be a mapping with a 'type', got {spec!r}", field="type")
    kind = spec["type"]
    if kind not in CHECK_TYPES:
        raise SpecError(str(UnknownNameError("check type", str(kind), CHECK_TYPES)), field="type")
    cls = CHECK_TYPES[kind]
    allowed = {f.name for f in fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = set(spec) - allowed - {"type"}
    if unknown:
        raise SpecError(f"unknown field(s) {sorted(unknown)} for check {kind!r}; allowed: {sorted(allowed)}")
    kwargs = {k: _coerce(k, v) for k, v in spec.items() if k != "type"}
    try:
        return cls(**kwargs)
    except re.error as exc:
        raise SpecError(f"invalid regular expression: {exc}", field="pattern") from None
    except TypeError as exc:
        raise SpecError(f"bad fields for check {kind!r}: {exc}") from None
