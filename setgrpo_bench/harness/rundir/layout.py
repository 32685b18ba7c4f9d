"""What a run folder holds and how it is recognised (DESIGN §9): the names of its files, which fields
of a step are measured rather than computed, and whether a folder holds a run of this package."""

from __future__ import annotations

from pathlib import Path

from ...files import FileError, exists, read_json

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


class RunDirError(FileError):
    """The output folder cannot be used as asked (e.g. it holds another run, or its files are damaged)."""


def holds_run(root: Path) -> bool:
    """Whether ``root`` holds a run this package wrote: a ``config.json`` with the run's config (or a
    damaged one beside the run's metrics or checkpoints). A model folder's ``config.json`` is not one."""
    path = root / CONFIG
    if not exists(path):
        return False
    try:
        saved = read_json(path)
    except FileError:
        return exists(root / METRICS) or (root / CHECKPOINTS).is_dir()
    return isinstance(saved, dict) and isinstance(saved.get("config"), dict) and "package_version" in saved


def written_by_run(name: str) -> bool:
    """A name a run writes in its folder (or one of its temporary files, ``.<name>.<random>``)."""
    known = (*RECORDS, *PLOTS, CHECKPOINTS, SUPERSEDED)
    return name in known or any(name.startswith(f".{k}.") for k in known)
