"""``RunDir``: one run's folder and its operations (DESIGN §9) — prepare it (create, resume, or replace
a run and nothing else), append and keep metrics, commit checkpoints atomically, write the manifest.
A checkpoint is a folder that is complete (with the checksums of its files) before the ``latest``
pointer names it, so a run killed at any instant resumes cleanly."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...agents.config import ADDED_LATER
from ...files import (
    FileError,
    finite_json,
    os_reason,
    read_json,
    sha256_file,
    share_permissions,
    write_json,
    write_text,
)
from .layout import (
    CHECKPOINTS,
    CHECKSUMS,
    CONFIG,
    EVAL,
    EVAL_INITIAL,
    LATEST,
    LOCK,
    MANIFEST,
    METRICS,
    STEP_TIMINGS,
    SUPERSEDED,
    TIMINGS,
    WEIGHTS,
    RunDirError,
    holds_run,
    written_by_run,
)
from .lock import RunLock
from .records import MetricsFile, copy_records, metrics_problems, read_metrics

if TYPE_CHECKING:
    from ...agents.config import TrainConfig


def read_record(path: Path) -> Any:
    """A JSON record of a run folder; a damaged one raises ``RunDirError`` (what a run stops with)."""
    try:
        return read_json(path)
    except FileError as exc:
        raise RunDirError(str(exc)) from None


class RunDir:
    """Paths and I/O of one run's folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def lock(self) -> RunLock:
        return RunLock(self.root)

    def prepare(self, config: TrainConfig, *, resume: bool, overwrite: bool) -> bool:
        """Create or reuse the folder (its lock held). Returns True when an existing run is resumed. A
        run resumes only with the same experiment (any setting but ``steps`` and the deployment fields).
        ``overwrite`` replaces a run this package wrote, and nothing else: a folder holding other files
        is refused, whatever the flags."""
        existing = holds_run(self.root)
        if resume and not existing and not overwrite:
            raise RunDirError(f"--resume: {self.root} holds no run to continue (no {CONFIG} of a run); run without "
                              "--resume to start it")
        replaced = existing and overwrite
        if replaced:
            self._clear()  # the run's files; the user's own files beside it stay
            existing = False
        if existing and not resume:
            raise RunDirError(
                f"{self.root} already holds a run; pass --resume to continue it or --overwrite to replace it"
            )
        if existing:
            saved = read_record(self.root / CONFIG)["config"]
            saved = {**ADDED_LATER, **saved}
            changed = {k: (saved.get(k), v) for k, v in config.experiment().items() if saved.get(k) != v and k != "steps"}
            if changed:
                raise RunDirError(f"cannot resume {self.root} with a different config: {changed} (saved, given)")
            return True
        others = sorted(p.name for p in self.root.iterdir() if p.name != LOCK)
        if others and not replaced:
            listed = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            raise RunDirError(f"{self.root} is not empty and holds no run of this package ({listed}); choose another "
                              "--out (a run folder starts empty, and --overwrite replaces only a run)")
        return False

    def _clear(self) -> None:
        """Remove the files a run writes (the lock, which this process holds, aside); anything else in
        the folder was not written by a run and stays."""
        for child in self.root.iterdir():
            if child.name == LOCK or not written_by_run(child.name):
                continue
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()

    def set_aside(self, steps: int) -> Path | None:
        """Move the results of the finished ``steps``-step run (evaluation, timings, manifest, and a copy
        of its config) to ``superseded/steps<steps>/`` before the run is extended: nothing it produced is
        lost if the extension fails. None when there was no result to keep."""
        if not (self.root / EVAL).is_file():
            return None
        kept = self.root / SUPERSEDED / f"steps{steps}"
        kept.mkdir(parents=True, exist_ok=True)
        copy_records(self.root, kept, names=(CONFIG,))
        for name in (EVAL, TIMINGS, MANIFEST):
            if (self.root / name).is_file():
                os.replace(self.root / name, kept / name)
        return kept

    # ---- metrics
    def append_metrics(self, record: dict[str, Any]) -> None:
        try:
            with (self.root / METRICS).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(finite_json(record), sort_keys=True, allow_nan=False) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise RunDirError(f"cannot write {self.root / METRICS}: {os_reason(exc)}") from None

    def read_metrics(self) -> MetricsFile:
        return read_metrics(self.root / METRICS)

    def append_timings(self, record: dict[str, Any]) -> None:
        """One step's measured fields (``is_measured``), appended to ``timings.jsonl``."""
        try:
            with (self.root / STEP_TIMINGS).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(finite_json(record), sort_keys=True, allow_nan=False) + "\n")
        except OSError as exc:
            raise RunDirError(f"cannot write {self.root / STEP_TIMINGS}: {os_reason(exc)}") from None

    def metrics(self) -> list[dict[str, Any]]:
        """The intact records (for reading; ``keep_metrics`` decides what a resumed run keeps)."""
        return self.read_metrics().records

    def keep_metrics(self, last_step: int) -> list[int]:
        """Keep the records of steps 1…``last_step`` (the checkpoint), refusing damage among them; return
        the steps logged after it (they are redone and their lines replaced)."""
        metrics = self.read_metrics()
        below = MetricsFile([r for r in metrics.records if r["step"] <= last_step], metrics.bad_lines)
        problems = metrics_problems(below, last_step)
        if problems:
            raise RunDirError(
                f"cannot resume {self.root}: {METRICS} does not record the steps up to the checkpoint (step {last_step}): "
                + "; ".join(problems) + f". Restore {METRICS}, or pass --overwrite to start the run again")
        write_text(self.root / METRICS, "".join(json.dumps(r, sort_keys=True) + "\n" for r in below.records))
        timings = read_metrics(self.root / STEP_TIMINGS).records  # measured, not results: damage is dropped
        write_text(self.root / STEP_TIMINGS, "".join(json.dumps(r, sort_keys=True) + "\n" for r in timings
                                                     if r["step"] <= last_step))
        return [r["step"] for r in metrics.records if r["step"] > last_step]

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
        try:
            self.checkpoints.mkdir(exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix=f".step_{step:06d}.", dir=self.checkpoints))
        except OSError as exc:
            raise RunDirError(f"cannot write a checkpoint in {self.checkpoints}: {os_reason(exc)}") from None
        share_permissions(folder, directory=True)
        return folder

    def commit_checkpoint(self, staging: Path, step: int) -> Path:
        """Record the checksums of a complete checkpoint, move it into place, point ``latest`` at it,
        then drop all but it and the one before it (written new, dropped old: a damaged newest one
        still has a fallback)."""
        write_json(staging / CHECKSUMS, {p.name: sha256_file(p) for p in sorted(staging.iterdir()) if p.is_file()})
        final = self.checkpoints / f"step_{step:06d}"
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        write_text(self.checkpoints / LATEST, final.name)
        keep = {final, *sorted(p for p in self.checkpoints.glob("step_*") if p.is_dir() and p < final)[-1:]}
        for other in self.checkpoints.iterdir():
            if other.is_dir() and other not in keep:
                shutil.rmtree(other)
        return final

    # ---- provenance
    def write_manifest(self) -> dict[str, Any]:
        """SHA-256 of the files a result rests on (config, metrics, both evaluations, the final weights)."""
        newest = self.checkpoint_candidates()[:1]
        final = newest[0] / WEIGHTS if newest else None
        files = {name: sha256_file(self.root / name) for name in (CONFIG, METRICS, EVAL_INITIAL, EVAL)}
        if final is not None and final.is_file():
            files[f"{CHECKPOINTS}/{final.parent.name}/{WEIGHTS}"] = sha256_file(final)
        manifest = {"files": files}
        write_json(self.root / MANIFEST, manifest)
        return manifest
