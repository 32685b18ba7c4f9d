"""The run directory (DESIGN §9): resolved config, append-only metrics, atomic checkpoints, results.

Every file is written atomically (temporary file + ``os.replace``); a checkpoint is a folder that is
complete (with the checksums of its files) before the ``latest`` pointer names it, so a run killed at
any instant resumes cleanly. One process writes a folder at a time (``RunLock``); a finished run
records the SHA-256 of its files in ``manifest.json``, which ``publish`` checks.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents.config import TrainConfig
from ..errors import SetgrpoBenchError

CONFIG = "config.json"
METRICS = "metrics.jsonl"
EVAL = "eval.json"
EVAL_INITIAL = "eval_initial.json"
TIMINGS = "timings.json"
STEP_TIMINGS = "timings.jsonl"
MANIFEST = "manifest.json"
CHECKPOINTS = "checkpoints"
LATEST = "latest"
LOCK = ".lock"
SUPERSEDED = "superseded"
PLOTS = ("curve.png", "setgrpo.png")
CHECKSUMS = "checksums.json"
WEIGHTS = "model.safetensors"
RECORDS = (CONFIG, METRICS, EVAL_INITIAL, EVAL, TIMINGS, STEP_TIMINGS, MANIFEST)
"""A finished run's record files: what a board keeps of it to verify its entry (not the weights)."""
MEASURED_PREFIXES = ("time_", "peak_rss", "gpu_peak_mem")
"""Per-step fields that are measured (seconds, memory), not computed: they go to ``timings.jsonl``, so
that two runs of the same config and thread count write byte-identical ``metrics.jsonl`` (older runs
kept them in ``metrics.jsonl``)."""


def is_measured(key: str) -> bool:
    return key.startswith(MEASURED_PREFIXES)


class RunDirError(SetgrpoBenchError):
    """The output folder cannot be used as asked (e.g. it holds another run, or its files are damaged)."""


class RunLockedError(RunDirError):
    """Another live process writes this run folder."""

    exit_status = 3
    """What ``python -m setgrpo_bench run`` exits with, so that ``sweep`` knows not to retry the run."""


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
    """Write standard JSON atomically, with the user's file permissions; a failed write (full disk,
    no permission) leaves no partial file and raises ``RunDirError`` naming the file."""
    text = json.dumps(finite_json(data), indent=2, sort_keys=True, allow_nan=False) + "\n"
    write_text(path, text)


def write_text(path: Path, text: str) -> None:
    """Write a text file atomically (temporary file + rename), with the user's file permissions."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        _share(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise RunDirError(f"cannot write {path}: {_os_reason(exc)}") from None


def write_texts(texts: dict[Path, str]) -> None:
    """Replace several text files together: every new content is written to a temporary file first (a
    full disk fails there, replacing nothing), then each is renamed over its file."""
    staged: dict[Path, str] = {}
    try:
        for path, text in texts.items():
            fd, staged[path] = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            _share(staged[path])
    except OSError as exc:
        for tmp in staged.values():
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise RunDirError(f"cannot write {', '.join(str(p) for p in texts)}: {_os_reason(exc)}; none was replaced") from None
    for path, tmp in staged.items():
        os.replace(tmp, path)


def copy_records(run: Path, destination: Path, names: tuple[str, ...] = RECORDS) -> None:
    """Copy a run's record files (``names``, byte for byte, each atomically) into ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in names:
        if (run / name).is_file() and (run / name).resolve() != (destination / name).resolve():
            with open(run / name, encoding="utf-8", newline="") as handle:
                write_text(destination / name, handle.read())


def holds_run(root: Path) -> bool:
    """Whether ``root`` holds a run this package wrote: a ``config.json`` with the run's config (or a
    damaged one beside the run's metrics or checkpoints). A model folder's ``config.json`` is not one."""
    path = root / CONFIG
    if not path.is_file():
        return False
    try:
        saved = read_json(path)
    except RunDirError:
        return (root / METRICS).is_file() or (root / CHECKPOINTS).is_dir()
    return isinstance(saved, dict) and isinstance(saved.get("config"), dict) and "package_version" in saved


def _written_by_run(name: str) -> bool:
    """A name a run writes in its folder (or one of its temporary files, ``.<name>.<random>``)."""
    known = (*RECORDS, *PLOTS, CHECKPOINTS, SUPERSEDED)
    return name in known or any(name.startswith(f".{k}.") for k in known)


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "the disk is full; free some space and run again with --resume"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "no permission to write there; choose another --out"
    return exc.strerror or str(exc)


def read_json(path: Path) -> Any:
    """A JSON file; a damaged or missing one raises ``RunDirError`` naming the file and the line."""
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise RunDirError(f"{path} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise RunDirError(f"{path} is damaged ({where}); restore it (in a run folder, --overwrite starts the run "
                          "again)") from None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
    if not path.is_file():
        return out
    raw = path.read_bytes()
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
    if (root / STEP_TIMINGS).is_file():
        return read_metrics(root / STEP_TIMINGS).records
    return [{k: v for k, v in r.items() if k == "step" or is_measured(k)} for r in read_metrics(root / METRICS).records]


def metrics_problems(metrics: MetricsFile, steps: int) -> list[str]:
    """Why ``metrics`` do not record steps 1…``steps`` exactly once each (empty when they do)."""
    problems = [f"line {n} is not a metrics record" for n in metrics.bad_lines]
    seen = metrics.steps()
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


class RunLock:
    """An exclusive lock on a run folder for the life of a process (``flock`` on ``<run>/.lock``).

    The lock file holds the holder's PID. The kernel releases the lock when its holder dies, so a lock
    left by a dead process is free: it is taken over with a warning naming that process."""

    def __init__(self, root: Path) -> None:
        self.root, self.handle = root, None

    def acquire(self) -> RunLock:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.handle = open(self.root / LOCK, "a+", encoding="utf-8")  # noqa: SIM115 (held for the run's life)
        except OSError as exc:
            raise RunDirError(f"cannot use {self.root}: {_os_reason(exc)}") from None
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder()
            self.handle.close()
            self.handle = None
            raise RunLockedError(
                f"{self.root} is being written by another process (PID {holder or 'unknown'}); one run folder has one "
                "writer at a time: wait for it to finish, stop it, or choose another --out") from None
        previous = self._holder()
        if previous and previous != os.getpid():
            warnings.warn(f"{self.root}: took over the lock; it named process {previous}, which "
                          + ("no longer runs (it ended without releasing the lock)" if not _running(previous) else
                             "no longer holds it (that number now belongs to a running process here, or the lock "
                             "was taken on another machine)"), stacklevel=2)
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(str(os.getpid()))
        self.handle.flush()
        return self

    def _holder(self) -> int | None:
        self.handle.seek(0)
        text = self.handle.read().strip()
        return int(text) if text.isdigit() else None

    def release(self) -> None:
        if self.handle is not None:
            self.handle.seek(0)
            self.handle.truncate()  # a clean release leaves no PID behind
            self.handle.flush()
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *_: Any) -> None:
        self.release()


def _running(pid: int) -> bool:
    """Whether a process with this number runs on this machine now (it may not be the one that wrote it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


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
            saved = read_json(self.root / CONFIG)["config"]
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
            if child.name == LOCK or not _written_by_run(child.name):
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
            raise RunDirError(f"cannot write {self.root / METRICS}: {_os_reason(exc)}") from None

    def read_metrics(self) -> MetricsFile:
        return read_metrics(self.root / METRICS)

    def append_timings(self, record: dict[str, Any]) -> None:
        """One step's measured fields (``is_measured``), appended to ``timings.jsonl``."""
        try:
            with (self.root / STEP_TIMINGS).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(finite_json(record), sort_keys=True, allow_nan=False) + "\n")
        except OSError as exc:
            raise RunDirError(f"cannot write {self.root / STEP_TIMINGS}: {_os_reason(exc)}") from None

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
            raise RunDirError(f"cannot write a checkpoint in {self.checkpoints}: {_os_reason(exc)}") from None
        _share(folder, directory=True)
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


def _differing(root: Path, digests: dict[str, str]) -> list[str]:
    """The names among ``digests`` whose file under ``root`` is missing or has another SHA-256."""
    return [name for name, digest in digests.items() if not (root / name).is_file() or sha256_file(root / name) != digest]


def checksum_problems(folder: Path) -> list[str]:
    """Files of a checkpoint whose content no longer matches the checksums written with it."""
    listed = folder / CHECKSUMS
    if not listed.is_file():
        return [f"{listed} is missing"]
    return [f"{folder / name} does not match its checksum" for name in _differing(folder, read_json(listed))]


def manifest_problems(root: Path, *, weights_kept: bool = True) -> list[str]:
    """Files of a finished run that differ from its manifest (empty when all match). With
    ``weights_kept`` False (a board's copy of the run) the weights may be absent; present, they must match."""
    path = root / MANIFEST
    if not path.is_file():
        return [f"{path} is missing (the run did not finish under this version, or the file was removed)"]
    try:
        files = read_json(path)["files"]
    except (RunDirError, KeyError, TypeError):
        return [f"{path} is damaged"]
    if not weights_kept:  # a board keeps its runs' records without their weights (megabytes per run)
        files = {n: d for n, d in files.items() if not n.startswith(f"{CHECKPOINTS}/") or (root / n).is_file()}
    return [f"{root / name} differs from the run's manifest (edited after the run?)" for name in _differing(root, files)]


def _share(path: str | Path, *, directory: bool = False) -> None:
    """Give a file or folder made by ``mkstemp``/``mkdtemp`` (mode 0600/0700) the permissions the
    user's umask gives new files and folders."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, (0o777 if directory else 0o666) & ~umask)
