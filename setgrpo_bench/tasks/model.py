"""Task instances and rubric criteria (DESIGN §3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import SpecError
from .checks import Check, Entity, build_check
from .response import ResponseView, normalize, term_pattern

CATEGORIES = ("essential", "important", "optional", "pitfall")

Message = Mapping[str, str]


@dataclass(frozen=True)
class Criterion:
    """One rubric item. ``points`` is signed: a pitfall has negative points and is *met* when the
    response commits it. ``check`` is the programmatic test; without one, only an LLM judge can
    grade the criterion."""

    id: str
    text: str
    points: float
    category: str
    tags: tuple[str, ...] = ()
    check: Check | None = None

    def __post_init__(self) -> None:
        if not self.id or not isinstance(self.id, str):
            raise SpecError(f"expected a non-empty string id, got {self.id!r}", field="id")
        if not isinstance(self.text, str) or not self.text.strip():
            raise SpecError("expected the criterion's human-readable text", field="text")
        if self.category not in CATEGORIES:
            raise SpecError(f"expected one of {list(CATEGORIES)}, got {self.category!r}", field="category")
        if isinstance(self.points, bool) or not isinstance(self.points, (int, float)) or self.points == 0:
            raise SpecError(f"expected non-zero numeric points, got {self.points!r}", field="points")
        if (self.category == "pitfall") != (self.points < 0):
            raise SpecError(
                f"category {self.category!r} with points {self.points}: pitfalls and only pitfalls "
                "carry negative points",
                field="points",
            )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Criterion:
        """Build from ``{id, text, points, category, tags?, check?}``; errors name the field."""
        if not isinstance(raw, Mapping):
            raise SpecError(f"expected a mapping, got {type(raw).__name__}")
        missing = [k for k in ("id", "text", "points", "category") if k not in raw]
        if missing:
            raise SpecError(f"missing required field(s) {missing}", field=missing[0])
        unknown = set(raw) - {"id", "text", "points", "category", "tags", "check", "when"}
        if unknown:
            raise SpecError(f"unknown field(s) {sorted(unknown)}", field=sorted(unknown)[0])
        try:
            check = build_check(raw["check"]) if raw.get("check") is not None else None
        except SpecError as exc:
            raise SpecError(exc.reason, field=f"check.{exc.field}" if exc.field else "check") from None
        return cls(
            id=str(raw["id"]),
            text=raw["text"],
            points=raw["points"],
            category=raw["category"],
            tags=tuple(raw.get("tags") or ()),
            check=check,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "text": self.text, "points": self.points, "category": self.category}
        if self.tags:
            out["tags"] = list(self.tags)
        if self.check is not None:
            out["check"] = self.check.to_spec()
        return out


@dataclass(frozen=True)
class TaskInstance:
    """A prompt (text or chat messages) with its rubric and metadata (domain, benchmark, split, seed)."""

    id: str
    prompt: str | tuple[Message, ...]
    rubric: tuple[Criterion, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.rubric:
            raise SpecError("a rubric needs at least one criterion", field="rubric")
        if not any(c.points > 0 for c in self.rubric):
            raise SpecError("a rubric needs at least one criterion with positive points", field="rubric")
        ids = [c.id for c in self.rubric]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise SpecError(f"duplicate criterion id(s) {duplicates}", field="rubric")
        prompt_norm = normalize(self.prompt_text)
        for i, c in enumerate(self.rubric):
            if isinstance(c.check, Entity) and not term_pattern([c.check.value]).search(prompt_norm):
                raise SpecError(
                    f"entity {c.check.value!r} does not appear in the prompt", field=f"rubric[{i}].check.value"
                )

    @property
    def prompt_text(self) -> str:
        """The prompt as plain text (chat messages joined as ``role: content`` lines)."""
        if isinstance(self.prompt, str):
            return self.prompt
        return "\n".join(f"{m['role']}: {m['content']}" for m in self.prompt)

    @cached_property
    def points(self) -> np.ndarray:
        """Points of the criteria, shape (J,)."""
        return np.array([c.points for c in self.rubric], dtype=float)

    @cached_property
    def categories(self) -> tuple[str, ...]:
        return tuple(c.category for c in self.rubric)

    @property
    def gradable(self) -> bool:
        """True when every criterion has a programmatic check."""
        return all(c.check is not None for c in self.rubric)

    def true_verdicts(self, response: str) -> np.ndarray:
        """Noise-free verdict of every criterion, shape (J,) bool."""
        view = ResponseView(response)
        missing = [c.id for c in self.rubric if c.check is None]
        if missing:
            raise SpecError(
                f"criteria {missing} of task {self.id!r} have no programmatic check; grade this task "
                "with an LLM judge grader",
                field="check",
            )
        return np.fromiter((c.check.met(view) for c in self.rubric), dtype=bool, count=len(self.rubric))  # type: ignore[union-attr]

    def to_dict(self) -> dict[str, Any]:
        prompt = self.prompt if isinstance(self.prompt, str) else [dict(m) for m in self.prompt]
        return {
            "id": self.id,
            "prompt": prompt,
            "rubric": [c.to_dict() for c in self.rubric],
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TaskInstance:
        """Inverse of ``to_dict``; errors name the field (``rubric[2].points``)."""
        for key in ("id", "prompt", "rubric"):
            if key not in raw:
                raise SpecError(f"missing required field {key!r}", field=key)
        prompt = raw["prompt"]
        if isinstance(prompt, Sequence) and not isinstance(prompt, str):
            prompt = tuple(_message(m, i) for i, m in enumerate(prompt))
        elif not isinstance(prompt, str):
            raise SpecError("expected a string or a list of chat messages", field="prompt")
        if not isinstance(raw["rubric"], Sequence) or isinstance(raw["rubric"], str):
            raise SpecError("expected a list of criteria", field="rubric")
        rubric = []
        for i, c in enumerate(raw["rubric"]):
            try:
                rubric.append(Criterion.from_dict(c))
            except SpecError as exc:
                raise SpecError(exc.reason, field=f"rubric[{i}]" + (f".{exc.field}" if exc.field else "")) from None
        return cls(id=str(raw["id"]), prompt=prompt, rubric=tuple(rubric), metadata=dict(raw.get("metadata") or {}))


def _message(m: Any, i: int) -> Message:
    if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
        raise SpecError("expected a chat message {role: str, content: str}", field=f"prompt[{i}]")
    return {"role": m["role"], "content": m["content"]}
