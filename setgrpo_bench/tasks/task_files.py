"""File benchmarks: fixed instances from JSONL, native (``id, prompt, rubric``) or HealthBench (``prompt, rubrics``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, SpecError
from .benchmark import SPLITS, Benchmark
from .model import TaskInstance
from .spec_checks import file_problems
from .yamlio import line_of, read_jsonl


def _healthbench_category(points: float) -> str:
    """HealthBench criteria carry points in [-10, 10] and no category: negative → pitfall,
    ≥ 7 → essential, ≥ 4 → important, else optional."""
    if points < 0:
        return "pitfall"
    return "essential" if points >= 7 else "important" if points >= 4 else "optional"


def task_from_line(obj: Mapping[str, Any], *, benchmark: str, domain: str, split: str, index: int) -> TaskInstance:
    """A task from one JSONL object: native (``id, prompt, rubric``) or HealthBench (``prompt, rubrics``).
    Errors name the field as the line spells it (``rubrics[0].points`` for a HealthBench line)."""
    metadata = {"domain": domain, "benchmark": benchmark, "split": split, "index": index}
    if "rubrics" not in obj and "rubric" not in obj:
        raise SpecError("missing: expected 'rubrics' (HealthBench: [{criterion, points, tags}]) or 'rubric' "
                        "(native: [{id, text, points, category}])", field="rubrics")
    if "rubric" in obj:
        task = TaskInstance.from_dict({**obj, "id": obj.get("id", f"{benchmark}/{split}/{index}")})
        return TaskInstance(task.id, task.prompt, task.rubric, {**metadata, **task.metadata})
    if not isinstance(obj["rubrics"], list):
        raise SpecError(f"expected a list of {{criterion, points, tags}}, got {type(obj['rubrics']).__name__}",
                        field="rubrics")
    rubric = []
    for j, r in enumerate(obj["rubrics"]):
        if not isinstance(r, Mapping) or "criterion" not in r or "points" not in r:
            raise SpecError("expected {criterion, points, tags}", field=f"rubrics[{j}]")
        if isinstance(r["points"], bool) or not isinstance(r["points"], (int, float)):
            raise SpecError(f"expected a number, got {r['points']!r}", field=f"rubrics[{j}].points")
        rubric.append({"id": f"c{j}", "text": r["criterion"], "points": r["points"], "tags": r.get("tags") or [],
                       "category": _healthbench_category(r["points"])})
    raw = {"id": obj.get("prompt_id", f"{benchmark}/{split}/{index}"), "prompt": obj.get("prompt"), "rubric": rubric}
    try:
        task = TaskInstance.from_dict(raw)
    except SpecError as exc:  # name the HealthBench field the line holds, not the native one
        field = re.sub(r"^rubric(?=\[|$)", "rubrics", exc.field or "").replace(".text", ".criterion")
        raise SpecError(exc.reason, file=exc.file, line=exc.line, field=field or None) from None
    return TaskInstance(task.id, task.prompt, task.rubric, {**metadata, **task.metadata})


def _inside(root: Path, name: str, *, source: str | None, field: str) -> Path:
    """``root / name``, refused unless it stays inside the benchmark's folder ``root``: a relative path
    without ``..`` whose real location (symlinks followed) is under ``root``. A spec from a catalog must
    not make the package read files elsewhere on the machine."""
    relative = Path(str(name))
    if relative.is_absolute() or ".." in relative.parts:
        raise SpecError(f"{str(name)!r} must be a path inside the benchmark's folder {str(root)!r} (relative, "
                        "without '..')", file=source, field=field)
    path = root / relative
    real_root = root.resolve()
    if path.exists() and real_root != path.resolve() and real_root not in path.resolve().parents:
        raise SpecError(f"{str(name)!r} leads outside the benchmark's folder {str(root)!r} (a symlink to "
                        f"{str(path.resolve())!r}); copy the file into the folder", file=source, field=field)
    return path


class FileBenchmark(Benchmark):
    """Fixed instances from JSONL: ``tasks`` (one file, each line with a ``split``) or ``files``
    (one file per split)."""

    def __init__(self, spec: Mapping[str, Any], root: Path, source: str | None = None, lines: Mapping[str, int] | None = None):
        for problem in file_problems(spec):
            raise problem.located(file=source, line=line_of(dict(lines or {}), problem.field))
        self.name, self.domain = spec["name"], spec["domain"]
        self.description = spec.get("description", "")
        self.default_grader = spec.get("grader", "realistic")
        self.score_rule = spec.get("score_rule", "healthbench")
        self._tasks: dict[str, list[TaskInstance]] = {s: [] for s in SPLITS}
        self._hash = hashlib.sha256()
        files = {None: spec["tasks"]} if "tasks" in spec else dict(spec["files"])
        for split, name in files.items():
            path = _inside(root, name, source=source, field="files" if split else "tasks")
            if not path.is_file():
                raise SpecError(f"no such file {str(path)!r}", file=source, field="files" if split else "tasks")
            self._hash.update(path.read_bytes())
            for line, obj in read_jsonl(path):
                task_split = split or obj.pop("split", None)
                if task_split not in SPLITS:
                    raise SpecError(f"expected a split in {list(SPLITS)}, got {task_split!r}", file=str(path), line=line, field="split")
                index = len(self._tasks[task_split])
                try:
                    task = task_from_line(obj, benchmark=self.name, domain=self.domain, split=task_split, index=index)
                except SpecError as exc:
                    raise exc.located(file=str(path), line=line) from None
                self._tasks[task_split].append(task)

    def size(self, split: str) -> int:
        if split not in SPLITS:
            raise ConfigError("split", split, f"one of {list(SPLITS)}")
        return len(self._tasks[split])

    def instance(self, split: str, index: int) -> TaskInstance:
        self._check_index(split, index)
        return self._tasks[split][index]

    def content_hash(self) -> str:
        return self._hash.hexdigest()
