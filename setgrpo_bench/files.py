"""Safe file I/O for every layer (DESIGN §9): standard JSON with non-finite numbers as strings, written
atomically (temporary file + rename, with the user's permissions) — one file or several together —
and read back with errors that name the file and the line."""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import IO, Any

from .errors import SetgrpoBenchError


class FileError(SetgrpoBenchError):
    """A file cannot be read or written as asked; the message names it and says why."""


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
    no permission) leaves no partial file and raises ``FileError`` naming the file."""
    text = json.dumps(finite_json(data), indent=2, sort_keys=True, allow_nan=False) + "\n"
    write_text(path, text)



def write_text(path: Path, text: str) -> None:
    """Write a text file atomically (temporary file + rename), with the user's file permissions."""
    write_texts({path: text})


def write_texts(texts: dict[Path, str]) -> None:
    """Replace one or several text files together: every new content is written to a temporary file
    first (a full disk fails there, replacing nothing and leaving no partial file), then each is renamed
    over its file."""
    staged: dict[Path, str] = {}
    try:
        for path, text in texts.items():
            fd, staged[path] = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            share_permissions(staged[path])
    except OSError as exc:
        for tmp in staged.values():
            if os.path.exists(tmp):
                os.unlink(tmp)
        unchanged = "; none was replaced" if len(texts) > 1 else ""
        raise FileError(f"cannot write {', '.join(str(p) for p in texts)}: {os_reason(exc)}{unchanged}") from None
    for path, tmp in staged.items():
        os.replace(tmp, path)


def os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "the disk is full; free some space and try again (a run: with --resume)"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "no permission to write there; choose another place (a run: another --out)"
    return exc.strerror or str(exc)


COMPRESSED = ".gz"
"""A file may be kept gzip-compressed as ``<name>.gz`` (a board keeps its runs' records so); every reader
here reads either, and a file's SHA-256 is that of its content."""


def stored(path: Path) -> Path | None:
    """Where ``path``'s content is kept: the file itself, else its compressed copy, else None."""
    compressed = path.with_name(path.name + COMPRESSED)
    return path if path.is_file() else compressed if compressed.is_file() else None


def exists(path: Path) -> bool:
    return stored(path) is not None


def open_binary(path: Path) -> IO[bytes]:
    """``path``'s content for reading, decompressed when it is kept compressed."""
    where = stored(path)
    if where is None:
        raise FileNotFoundError(errno.ENOENT, "no such file", str(path))
    return gzip.open(where, "rb") if where.name.endswith(COMPRESSED) and where != path else open(where, "rb")


def read_bytes(path: Path) -> bytes:
    with open_binary(path) as handle:
        return handle.read()


def read_json(path: Path) -> Any:
    """A JSON file (or its compressed copy); a damaged or missing one raises ``FileError`` naming the
    file and the line."""
    try:
        return json.loads(read_bytes(path).decode("utf-8"))
    except FileNotFoundError:
        raise FileError(f"{path} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError) as exc:
        where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise FileError(f"{path} is damaged ({where}); restore it (in a run folder, --overwrite starts the run "
                        "again)") from None


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's content (decompressed when it is kept compressed)."""
    digest = hashlib.sha256()
    with open_binary(path) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_compressed(path: Path, data: bytes) -> None:
    """Keep ``data`` as ``<path>.gz``, atomically and byte for byte the same for the same data (no name or
    time in the gzip header), and remove an uncompressed ``path`` it replaces."""
    compressed = path.with_name(path.name + COMPRESSED)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{compressed.name}.", dir=path.parent)
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as out:
            out.write(data)
        share_permissions(tmp)
        os.replace(tmp, compressed)
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise FileError(f"cannot write {compressed}: {os_reason(exc)}") from None
    path.unlink(missing_ok=True)


def share_permissions(path: str | Path, *, directory: bool = False) -> None:
    """Give a file or folder made by ``mkstemp``/``mkdtemp`` (mode 0600/0700) the permissions the
    user's umask gives new files and folders."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, (0o777 if directory else 0o666) & ~umask)
