"""The run directory (DESIGN §9): resolved config, append-only metrics, atomic checkpoints, results.

    layout.py    the names of a run's files, and whether a folder holds a run
    lock.py      one writer per folder
    records.py   metrics, timings, checksums and manifests read and checked
    folder.py    ``RunDir``: prepare, metrics, checkpoints, manifest

Every file is written atomically (``setgrpo_bench.files``); a finished run records the SHA-256 of its
files in ``manifest.json``, which ``publish`` checks and ``leaderboard audit`` re-executes.
"""

from ...files import (
    FileError,
    finite_json,
    read_json,
    sha256_file,
    write_json,
    write_text,
    write_texts,
)
from .folder import RunDir, read_record
from .layout import (
    CHECKPOINTS,
    CHECKSUMS,
    CONFIG,
    EVAL,
    EVAL_INITIAL,
    LATEST,
    LOCK,
    MANIFEST,
    MEASURED_PREFIXES,
    METRICS,
    PLOTS,
    RECORDS,
    STEP_TIMINGS,
    SUPERSEDED,
    TIMINGS,
    WEIGHTS,
    RunDirError,
    holds_run,
    is_measured,
)
from .lock import RunLock, RunLockedError
from .records import (
    MetricsFile,
    checksum_problems,
    copy_records,
    manifest_problems,
    metrics_problems,
    read_metrics,
    step_timings,
)

__all__ = [
    "CHECKPOINTS", "CHECKSUMS", "CONFIG", "EVAL", "EVAL_INITIAL", "LATEST", "LOCK", "MANIFEST", "MEASURED_PREFIXES",
    "METRICS", "PLOTS", "RECORDS", "STEP_TIMINGS", "SUPERSEDED", "TIMINGS", "WEIGHTS", "FileError", "MetricsFile",
    "RunDir", "RunDirError", "RunLock", "RunLockedError", "checksum_problems", "copy_records", "finite_json",
    "holds_run", "is_measured", "manifest_problems", "metrics_problems", "read_json", "read_record", "read_metrics", "sha256_file",
    "step_timings", "write_json", "write_text", "write_texts",
]
