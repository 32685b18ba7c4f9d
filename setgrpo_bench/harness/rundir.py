"""The run directory (DESIGN §9): resolved config, append-only metrics, atomic checkpoints, results.

Every file is written atomically (temporary file + ``os.replace``); a checkpoint is a folder that is
complete before the ``latest`` pointer names it, so a run killed at any instant resumes cleanly.
"""

from __future__ import annotations

import json
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


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True, allow_nan=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
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
            handle.write(json.dumps(record, sort_keys=True) + "\n")
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

    def truncate_metrics(self, last_step: int) -> None:
        """Keep the records of steps ≤ ``last_step`` (the checkpoint); later ones are redone."""
        kept = [r for r in self.metrics() if r["step"] <= last_step]
        fd, tmp = tempfile.mkstemp(prefix=".metrics.", dir=self.root)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(r, sort_keys=True) + "\n" for r in kept)
        os.replace(tmp, self.root / METRICS)

    # ---- checkpoints
    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    def latest_checkpoint(self) -> Path | None:
        pointer = self.checkpoints / LATEST
        if not pointer.is_file():
            return None
        folder = self.checkpoints / pointer.read_text().strip()
        return folder if folder.is_dir() else None

    def new_checkpoint_folder(self, step: int) -> Path:
        self.checkpoints.mkdir(exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".step_{step:06d}.", dir=self.checkpoints))

    def commit_checkpoint(self, staging: Path, step: int) -> Path:
        """Move a complete checkpoint into place, point ``latest`` at it, drop older ones."""
        final = self.checkpoints / f"step_{step:06d}"
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        fd, tmp = tempfile.mkstemp(prefix=".latest.", dir=self.checkpoints)
        with os.fdopen(fd, "w") as handle:
            handle.write(final.name)
        os.replace(tmp, self.checkpoints / LATEST)
        for other in self.checkpoints.iterdir():
            if other.is_dir() and other != final:
                shutil.rmtree(other)
        return final
