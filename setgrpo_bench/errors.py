"""Typed errors: each names where the problem is (file, line, field) and what was expected."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SetgrpoBenchError(Exception):
    """Base class of every error this package raises on purpose."""


class SpecError(SetgrpoBenchError, ValueError):
    """A spec, task file or rubric is malformed.

    The message starts with ``file:line: field:`` for whichever of the three are known, so an editor
    can jump to the problem.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file, self.line, self.field, self.reason = file, line, field, message
        where = ":".join(str(p) for p in (file, line) if p is not None)
        prefix = "".join(f"{p}: " for p in (where, field) if p)
        super().__init__(prefix + message)

    def located(self, *, file: str | None = None, line: int | None = None) -> SpecError:
        """The same error with a file/line filled in where it was still unknown."""
        return SpecError(
            self.reason,
            file=self.file or file,
            line=self.line if self.line is not None else line,
            field=self.field,
        )


class ConfigError(SetgrpoBenchError, ValueError):
    """A parameter value is out of its allowed range."""

    def __init__(self, name: str, given: object, allowed: str, fix: str = "") -> None:
        message = f"{name}={given!r} is not allowed: expected {allowed}."
        super().__init__(message + (f" {fix}" if fix else ""))


class UnknownNameError(SetgrpoBenchError, LookupError):
    """A name (env id, profile, agent, check type) is not registered; suggests the closest."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        listing = ", ".join(known) if len(known) <= 20 else ", ".join(known[:20]) + ", ..."
        super().__init__(f"unknown {kind} {name!r}.{hint} Known: {listing or '(none)'}.")
        self.kind, self.name, self.known = kind, name, known
