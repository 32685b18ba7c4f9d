"""What the checks read of a response (DESIGN §3): its normalised text, words, lines and sentences,
computed once and shared by every check of a rubric; the patterns that match terms as whole words; and
regexes kept to their line, so that grading is linear in the response."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import cached_property

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
LIST_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
WORD = re.compile(r"\w+(?:['’]\w+)*")
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def normalize(text: str) -> str:
    """Casefold and strip diacritics (combining marks after NFKD), so that ``Zoë`` matches ``zoe``."""
    if text.isascii():
        return text.casefold()
    return _COMBINING.sub("", unicodedata.normalize("NFKD", text)).casefold()


class ResponseView:
    """A response with its derived forms computed once and shared by all checks of a rubric."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def norm(self) -> str:
        return normalize(self.text)

    @cached_property
    def words(self) -> list[str]:
        return WORD.findall(self.norm)

    @cached_property
    def lines(self) -> list[str]:
        return [line for line in self.text.splitlines() if line.strip()]

    @cached_property
    def sentences(self) -> list[str]:
        """Sentences of every line, list markers removed (so ``1. Mix.`` is one sentence)."""
        return [s.strip() for line in self.lines for s in SENTENCE_END.split(LIST_MARKER.sub("", line)) if s.strip()]


def term_pattern(terms: Sequence[str]) -> re.Pattern[str]:
    """One regex matching any of ``terms`` (normalised) as whole words."""
    alternatives = sorted({re.escape(normalize(t).strip()) for t in terms}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)")


_LINE_START_RUNS = ((r"\s*", r"[^\S\n]*"), (r"\W*", r"[^\w\n]*"))


def line_local(pattern: str) -> str:
    r"""``pattern`` with ``^\s*`` and ``^\W*`` (a line start, then a run that may cross newlines) kept to
    their line: ``^[^\S\n]*``, ``^[^\w\n]*``. Whether the pattern is found anywhere is unchanged (a
    match whose run crosses a newline also matches from the line start after its last newline), but
    ``re`` no longer rescans every following blank line from every line start, which made a response of
    16,000 newlines take seconds to grade."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i:i + 2])
            i += 2
        elif in_class:
            in_class = char != "]"
            out.append(char)
            i += 1
        elif char == "[":
            start = i + 1 + (pattern[i + 1:i + 2] == "^")
            start += pattern[start:start + 1] == "]"  # a ']' first in a class is literal
            out.append(pattern[i:start])
            in_class, i = True, start
        elif char == "^":
            run = next(((slow, fast) for slow, fast in _LINE_START_RUNS if pattern.startswith(slow, i + 1)), None)
            out.append("^" + run[1] if run else "^")
            i += 1 + (len(run[0]) if run else 0)
        else:
            out.append(char)
            i += 1
    return "".join(out)
