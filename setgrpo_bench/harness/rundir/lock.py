"""One writer per run folder (DESIGN §9): a ``flock`` held for the life of the process that writes it."""

from __future__ import annotations

import fcntl
import os
import warnings
from pathlib import Path
from typing import Any

from ...files import os_reason
from .layout import LOCK, RunDirError


class RunLockedError(RunDirError):
    """Another live process writes this run folder."""

    exit_status = 3
    """What ``python -m setgrpo_bench run`` exits with, so that ``sweep`` knows not to retry the run."""


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
            raise RunDirError(f"cannot use {self.root}: {os_reason(exc)}") from None
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
