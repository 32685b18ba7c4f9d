"""A finished run's records, read and checked (DESIGN §9): metrics that cover every step once (damage
reported, never dropped), measured timings, checkpoints and manifests whose files still have their
SHA-256, and the copy of its records a board keeps."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...files import (
    FileError,
    exists,
    read_bytes,
    read_json,
    sha256_file,
    write_compressed,
    write_text,
)
from .layout import (
    CHECKPOINTS,
    CHECKSUMS,
    MANIFEST,
    METRICS,
    RECORDS,
    STEP_TIMINGS,
    is_measured,
)


@dataclass
class MetricsFile:
    """``metrics.jsonl`` as read: the intact records, and the lines that are not (1-based numbers)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)
    cut_last_line: bool = False  # the last line is incomplete: a run killed while writing it

    def steps(self) -> list[int]:
        return [int(r["step"]) for r in self.records]


def read_metrics(path: Path) -> MetricsFile:
    """Every line of a metrics file: intact records kept, damaged lines reported (never dropped)."""
    out = MetricsFile()
    if not exists(path):
        return out
    raw = read_bytes(path)
    lines = raw.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                raise ValueError
            out.records.append(record)
        except ValueError:
            if number == len(lines) and not raw.endswith(b"\n"):
                out.cut_last_line = True
            else:
                out.bad_lines.append(number)
    return out


def step_timings(root: Path) -> list[dict[str, Any]]:
    """A run's measured per-step fields: from ``timings.jsonl``, or from ``metrics.jsonl`` for runs made
    before they moved out of it."""
    if exists(root / STEP_TIMINGS):
        return read_metrics(root / STEP_TIMINGS).records
    return [{k: v for k, v in r.items() if k == "step" or is_measured(k)} for r in read_metrics(root / METRICS).records]


def metrics_problems(metrics: MetricsFile, steps: int) -> list[str]:
    """Why ``metrics`` do not record steps 1…``steps`` exactly once each, or up to the step a stopping
    rule ended the run (empty when they do)."""
    problems = [f"line {n} is not a metrics record" for n in metrics.bad_lines]
    seen = metrics.steps()
    stops = [r["step"] for r in metrics.records if r.get("stopped")]
    if stops:
        steps = min(stops)
    duplicated = sorted({s for s in seen if seen.count(s) > 1})
    missing = sorted(set(range(1, steps + 1)) - set(seen))
    if duplicated:
        problems.append(f"{_steps(duplicated)} logged more than once")
    if missing:
        problems.append(f"{_steps(missing)} missing")
    if seen != sorted(seen):
        problems.append("steps are out of order")
    return problems


def _steps(values: list[int]) -> str:
    """'step 3 is', 'steps 1–3, 7 are'."""
    return f"step {values[0]} is" if len(values) == 1 else f"steps {_ranges(values)} are"


def _ranges(values: list[int]) -> str:
    parts, start = [], None
    for i, v in enumerate(values):
        start = v if start is None else start
        if i + 1 == len(values) or values[i + 1] != v + 1:
            parts.append(str(v) if start == v else f"{start}–{v}")
            start = None
    return ", ".join(parts)


def copy_records(run: Path, destination: Path, names: tuple[str, ...] = RECORDS, *, compress: bool = False) -> None:
    """Copy a run's record files (``names``, byte for byte, each atomically) into ``destination``;
    ``compress`` keeps each as ``<name>.gz`` (a board's copy: every reader here reads either)."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not exists(run / name) or (run / name).resolve() == (destination / name).resolve():
            continue
        if compress:
            write_compressed(destination / name, read_bytes(run / name))
        else:
            write_text(destination / name, read_bytes(run / name).decode("utf-8"))


def _differing(root: Path, digests: dict[str, str]) -> list[str]:
    """The names among ``digests`` whose file under ``root`` is missing or has another SHA-256."""
    return [name for name, digest in digests.items() if not exists(root / name) or sha256_file(root / name) != digest]


def checksum_problems(folder: Path) -> list[str]:
    """Files of a checkpoint whose content no longer matches the checksums written with it."""
    listed = folder / CHECKSUMS
    if not exists(listed):
        return [f"{listed} is missing"]
    return [f"{folder / name} does not match its checksum" for name in _differing(folder, read_json(listed))]


def manifest_problems(root: Path, *, weights_kept: bool = True) -> list[str]:
    """Files of a finished run that differ from its manifest (empty when all match). With
    ``weights_kept`` False (a board's copy of the run) the weights may be absent; present, they must match."""
    path = root / MANIFEST
    if not exists(path):
        return [f"{path} is missing (the run did not finish under this version, or the file was removed)"]
    try:
        files = read_json(path)["files"]
    except (FileError, KeyError, TypeError):
        return [f"{path} is damaged"]
    if not weights_kept:  # a board keeps its runs' records without their weights (megabytes per run)
        files = {n: d for n, d in files.items() if not n.startswith(f"{CHECKPOINTS}/") or exists(root / n)}
    return [f"{root / name} differs from the run's manifest (edited after the run?)" for name in _differing(root, files)]
