"""The run directory (DESIGN §9): resolved config, append-only metrics, atomic checkpoints, results.

Every file is written atomically (temporary file + ``os.replace``); a checkpoint is a folder that is
complete before the ``latest`` pointer names it, so a run killed at any instant resumes cleanly.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..agents.config import TrainConfig
from ..errors import SetgrpoBenchError

CONFIG = "config.json"
METRICS = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
LATEST = "latest"


class RunDirError(SetgrpoBenchError):
    """The output folder cannot be used as asked (e.g. it holds another run)."""


def finite_json(value: Any) -> Any:
    """``value`` with every non-finite float written as a string — "inf", "-inf", "nan" — so that
    files are standard JSON (``float("inf")`` reads them back; τ̂ = inf means the gate accepted
    nothing, -inf that there was no gate)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def write_json(path: Path, data: Any) -> None:
    """Write standard JSON atomically, with the user's file permissions."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(finite_json(data), handle, indent=2, sort_keys=True, allow_nan=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    _share(tmp)
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)


class RunDir:
    """Paths and I/O of one run's folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def prepare(self, config: TrainConfig, *, resume: bool, overwrite: bool) -> bool:
        """Create or reuse the folder. Returns True when an existing run is resumed. A run resumes
        only with the same experiment (any setting but ``steps`` and the deployment fields)."""
        existing = (self.root / CONFIG).is_file()
        if existing and overwrite:
            shutil.rmtree(self.root)
            existing = False
        if existing and not resume:
            raise RunDirError(
                f"{self.root} already holds a run; pass --resume to continue it or --overwrite to replace it"
            )
        if existing:
            saved = read_json(self.root / CONFIG)["config"]
            changed = {k: (saved.get(k), v) for k, v in config.experiment().items() if saved.get(k) != v and k != "steps"}
            if changed:
                raise RunDirError(f"cannot resume {self.root} with a different config: {changed} (saved, given)")
            return True
        if self.root.exists() and any(self.root.iterdir()):
            if not overwrite:
                raise RunDirError(f"{self.root} is not empty and holds no run; choose another --out or pass --overwrite")
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        return False

    # ---- metrics
    def append_metrics(self, record: dict[str, Any]) -> None:
        with (self.root / METRICS).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(finite_json(record), sort_keys=True, allow_nan=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def metrics(self) -> list[dict[str, Any]]:
        path = self.root / METRICS
        if not path.is_file():
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut by a kill: everything after the last complete line is dropped
        return out

    def truncate_metrics(self, last_step: int) -> list[int]:
        """Keep the records of steps ≤ ``last_step`` (the checkpoint); returns the steps dropped (they
        are redone), so that the caller can say so."""
        records = self.metrics()
        kept = [r for r in records if r["step"] <= last_step]
        fd, tmp = tempfile.mkstemp(prefix=".metrics.", dir=self.root)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(r, sort_keys=True) + "\n" for r in kept)
        _share(tmp)
        os.replace(tmp, self.root / METRICS)
        return [r["step"] for r in records if r["step"] > last_step]

    # ---- checkpoints
    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    def checkpoint_candidates(self) -> list[Path]:
        """Complete checkpoint folders, newest first: the one ``latest`` names, then the others by step
        (a damaged or missing newest one falls back to the one before it)."""
        if not self.checkpoints.is_dir():
            return []
        folders = sorted((p for p in self.checkpoints.glob("step_*") if p.is_dir()), reverse=True)
        pointer = self.checkpoints / LATEST
        named = self.checkpoints / pointer.read_text().strip() if pointer.is_file() else None
        if named in folders:
            folders.remove(named)
            folders.insert(0, named)
        return folders

    def new_checkpoint_folder(self, step: int) -> Path:
        self.checkpoints.mkdir(exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".step_{step:06d}.", dir=self.checkpoints))

    def commit_checkpoint(self, staging: Path, step: int) -> Path:
        """Move a complete checkpoint into place, point ``latest`` at it, then drop all but it and the
        one before it (written new, dropped old: a damaged newest one still has a fallback)."""
        final = self.checkpoints / f"step_{step:06d}"
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        fd, tmp = tempfile.mkstemp(prefix=".latest.", dir=self.checkpoints)
        with os.fdopen(fd, "w") as handle:
            handle.write(final.name)
        _share(tmp)
        os.replace(tmp, self.checkpoints / LATEST)
        keep = {final, *sorted(p for p in self.checkpoints.glob("step_*") if p.is_dir() and p < final)[-1:]}
        for other in self.checkpoints.iterdir():
            if other.is_dir() and other not in keep:
                shutil.rmtree(other)
        return final


def _share(path: str | Path) -> None:
    """Give a file made by ``mkstemp`` (mode 0600) the permissions the user's umask gives new files."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)
