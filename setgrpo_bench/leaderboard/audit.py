"""``leaderboard audit``: an entry's numbers checked by running its seeds again (DESIGN §10).

Hashes written by whoever published an entry prove nothing about that publisher: a forger edits a
score, recomputes the averages and the manifest, and every consistency check passes. Re-execution does
not trust the publisher. A run is deterministic given its config, seed, thread count, code and kind of
machine, so re-running a recorded config must give its ``eval.json`` value for value and final weights
whose SHA-256 is the one its manifest records. An audit draws k of an entry's seeds at audit time (the
publisher cannot know which), re-runs each from its recorded ``config.json`` and compares:

  full    eval_initial.json and eval.json value for value, every step's computed metrics, and the
          final weights' hash against the manifest (a whole run per seed)
  quick   eval_initial.json value for value and the first N steps' computed metrics (seconds per seed;
          it proves the start of the run, not its end)

Every field the recorded files hold is compared; a field today's code writes that the recorded run did
not (a diagnostic added since) is not a contradiction and is left out of the comparison.

Each audit is kept in ``<board>/audits/<entry name>.json`` with the seeds, date, package version, git
hash and outcome, tied to the entry's runs (their manifests) so that a replaced entry is audited anew.
The board rejects an entry whose latest audit did not reproduce it and shows every entry's audit.

A run re-executes bit for bit only on the kind of machine it ran on: CPUs with other vector units (AVX2,
AVX-512) or vendors run other floating-point kernels, which sum in other orders; a step's gradient then
differs in its 7th digit and the run drifts from there. Runs record their machine (``config.json``); a
difference on another machine, or for a run that recorded none, is inconclusive, not a rejection.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from .. import __version__
from ..agents.config import TrainConfig
from ..errors import SetgrpoBenchError
from ..files import exists
from ..harness.rundir import (
    CONFIG,
    EVAL,
    EVAL_INITIAL,
    MANIFEST,
    TIMINGS,
    WEIGHTS,
    FileError,
    is_measured,
    read_json,
    read_metrics,
    sha256_file,
    write_json,
)
from ..hashing import stable_hash
from .layout import ARCHIVED, AUDITS, RESULTS, RUNS, archive_note
from .submission import git_hash
from .verify import entry_runs


class AuditError(SetgrpoBenchError):
    """An audit cannot be carried out as asked (not a failed audit: nothing was compared)."""


def runs_key(submission: dict[str, Any]) -> str:
    """What an audit of ``submission`` is tied to: its runs' manifests (a replaced entry has others)."""
    return stable_hash(submission.get("runs") or submission["seeds"])


def audit_path(board: str | Path, name: str) -> Path:
    return Path(board) / AUDITS / f"{name}.json"


def load_audits(board: str | Path, name: str) -> list[dict[str, Any]]:
    """The audits recorded for entry ``name``, oldest first (none: an empty list)."""
    path = audit_path(board, name)
    if not path.is_file():
        return []
    data = read_json(path)
    return list(data.get("audits", [])) if isinstance(data, dict) else []


def latest_audit(submission: dict[str, Any], board: str | Path) -> dict[str, Any] | None:
    """The newest audit of the entry's current runs (None when they were never audited)."""
    key = runs_key(submission)
    matching = [a for a in load_audits(board, submission["name"]) if a.get("runs_key") == key]
    return matching[-1] if matching else None


def fully_audited(submission: dict[str, Any], board: str | Path) -> bool:
    """Whether a full audit (every step, not ``--quick``) has re-executed the entry's current runs."""
    key = runs_key(submission)
    return any(a.get("runs_key") == key and a.get("mode") == "full" for a in load_audits(board, submission["name"]))


REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
"""An audit's result: every seed re-executed to the same values; a seed differs on the machine it was made
on (a rejection); a seed differs, but it was made on another kind of machine or did not record its own
(floating-point kernels differ between CPUs, so nothing follows: audit it on the machine it names)."""


def _machine(m: dict[str, str] | None) -> str:
    return f"{m['cpu']} ({m['cpu_capability']})" if m else "an unrecorded machine"


def describe(audit: dict[str, Any] | None) -> str:
    """One line for the page: which seeds, how, when, with which version, on what, and the result."""
    if audit is None:
        return "not audited"
    seeds = ", ".join(audit["seeds"])
    how = f"{audit['mode']}" + (f", {audit['steps']} steps" if audit["mode"] == "quick" else "")
    where = ""
    if audit["result"] == INCONCLUSIVE:
        first = next(o for o in audit["seeds"].values() if o["differences"])
        where = f": made on {_machine(first['recorded_machine'])}, re-executed on {_machine(first['machine'])}"
    return f"seed {seeds} {audit['result']}{where} ({how}; {audit['date'][:10]}, setgrpo_bench {audit['package_version']})"


def failure(audit: dict[str, Any]) -> str:
    """Why an audit did not reproduce an entry's runs, for the board's list of rejected files."""
    reasons = [f"seed {seed}: {'; '.join(outcome['differences'])}" for seed, outcome in audit["seeds"].items()
               if outcome["differences"]]
    return (f"its audit of {audit['date'][:10]} ({audit['mode']} re-execution on the machine the runs were made on, "
            f"setgrpo_bench {audit['package_version']}) did not reproduce its runs: " + "; ".join(reasons))


class _Stop(Exception):
    """Raised after the last step a quick audit compares."""


def _config(recorded: Path) -> TrainConfig:
    """The recorded run's config, with the thread count it ran with (a different count changes the
    floating-point sums, and so the result)."""
    saved = read_json(recorded / CONFIG)
    values = dict(saved["config"])
    if not values.get("threads") and exists(recorded / TIMINGS):
        values["threads"] = int(read_json(recorded / TIMINGS).get("threads") or 0)
    if not values.get("threads"):
        raise AuditError(f"{recorded}: the run recorded no thread count (threads 0, no {TIMINGS}); it cannot be "
                         "re-executed as it ran")
    return TrainConfig.from_record(values)


def _macro(path: Path) -> str:
    try:
        data = read_json(path)
    except FileError:
        return "unreadable"
    final = data.get("final", data)
    value = final.get("macro_true_score") if isinstance(final, dict) else None
    return f"{value:.4f}" if isinstance(value, (int, float)) else "none"


def _computed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not is_measured(k)} for r in records]


def _as_recorded(again: Any, recorded: Any) -> Any:
    """A re-executed record restricted, at every depth, to the fields the recorded run wrote: a field
    written only since the run was recorded (a newer diagnostic, a held-out curve point's judge score)
    is new, not a contradiction; a recorded field the re-execution lacks or computes otherwise still is."""
    if isinstance(again, dict) and isinstance(recorded, dict):
        return {k: _as_recorded(v, recorded[k]) for k, v in again.items() if k in recorded}
    if isinstance(again, list) and isinstance(recorded, list) and len(again) == len(recorded):
        return [_as_recorded(a, r) for a, r in zip(again, recorded)]
    return again


def _same_file(recorded: Path, again: Path) -> bool:
    mine = read_json(recorded)
    return mine == _as_recorded(read_json(again), mine)


def compare(recorded: Path, again: Path, *, steps: int | None) -> list[str]:
    """How the re-executed run ``again`` differs from the recorded one (empty: reproduced). ``steps``
    None compares the whole run, else the initial evaluation and the first ``steps`` steps."""
    problems = []
    if not _same_file(recorded / EVAL_INITIAL, again / EVAL_INITIAL):
        problems.append(f"{EVAL_INITIAL} differs from its re-execution (macro true score {_macro(recorded / EVAL_INITIAL)} "
                        f"recorded, {_macro(again / EVAL_INITIAL)} re-executed)")
    mine, theirs = (_computed(read_metrics(r / "metrics.jsonl").records) for r in (recorded, again))
    if steps is not None:
        mine = mine[:steps]
    theirs = [_as_recorded(a, r) for a, r in zip(theirs, mine)] + theirs[len(mine):]
    if mine != theirs[:len(mine)] or len(theirs) < len(mine):
        first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
        fields = sorted(k for k in set(mine[first]) | set(theirs[first]) if mine[first].get(k) != theirs[first].get(k)) \
            if first < min(len(mine), len(theirs)) else ["missing steps"]
        problems.append(f"metrics.jsonl differs from step {first + 1} on ({', '.join(fields[:5])})")
    if steps is None:
        if not _same_file(recorded / EVAL, again / EVAL):
            problems.append(f"{EVAL} differs from its re-execution (macro true score {_macro(recorded / EVAL)} recorded, "
                            f"{_macro(again / EVAL)} re-executed)")
        weights = {k: v for k, v in read_json(recorded / MANIFEST)["files"].items() if k.endswith(WEIGHTS)}
        for name, digest in weights.items():
            if not (again / name).is_file() or sha256_file(again / name) != digest:
                problems.append(f"the final weights re-executed are not those its manifest records ({name})")
        if not weights:
            problems.append(f"its {MANIFEST} records no final weights to compare")
    return problems


def reexecute(recorded: Path, out: Path, *, steps: int | None, console: Console) -> dict[str, Any]:
    """Run the recorded run again into ``out`` (its config, seed and thread count, nothing cached) and
    compare: the differences, the machine the run recorded and this one."""
    from ..harness.runner import machine, run

    config = _config(recorded)
    if steps is not None and not 1 <= steps <= config.run.steps:
        raise AuditError(f"--quick {steps}: a quick audit compares 1..{config.run.steps} steps of this run")

    def stop(step: int, _metrics: dict[str, Any]) -> None:
        if steps is not None and step >= steps:
            raise _Stop

    try:
        run(config, out, console=console, on_step=stop, reuse_initial=False)
    except _Stop:
        pass
    return {"differences": compare(recorded, out, steps=steps),
            "recorded_machine": read_json(recorded / CONFIG).get("machine"), "machine": machine()}


def result_of(outcomes: dict[str, dict[str, Any]]) -> str:
    """``REPRODUCED``, ``NOT_REPRODUCED`` (a seed differs on the machine it names) or ``INCONCLUSIVE``."""
    differing = [o for o in outcomes.values() if o["differences"]]
    if not differing:
        return REPRODUCED
    return NOT_REPRODUCED if any(o["recorded_machine"] == o["machine"] for o in differing) else INCONCLUSIVE


def audit_entry(submission: dict[str, Any], board: str | Path, *, seeds: Sequence[int] | None = None, count: int = 1,
                steps: int | None = None, work: str | Path | None = None, console: Console | None = None,
                rng: random.Random | None = None) -> dict[str, Any]:
    """Audit one entry of ``board``: re-execute ``seeds`` (default: ``count`` drawn now, by ``rng``, a
    system-entropy source unless given) and return the audit record (not yet kept; ``keep_audit``)."""
    console = console or Console(quiet=True)
    folders = dict(zip(submission["seeds"], entry_runs(submission, Path(board) / RUNS)))
    if not all(exists(f / EVAL) for f in folders.values()):
        raise AuditError(f"{submission['name']}: its runs are not under {Path(board) / RUNS}; only an entry whose runs "
                         "the board keeps can be audited")
    if seeds is None:
        if not 1 <= count <= len(folders):
            raise AuditError(f"--seeds-per-entry {count}: {submission['name']} has {len(folders)} seeds")
        seeds = sorted((rng or random.SystemRandom()).sample(sorted(folders), count))
    unknown = sorted(set(seeds) - set(folders))
    if unknown:
        raise AuditError(f"{submission['name']} has no seed {unknown[0]} (its seeds: {sorted(folders)})")
    scratch = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="setgrpo-audit-"))
    outcomes, t0 = {}, time.perf_counter()
    try:
        for seed in seeds:
            out = scratch / submission["name"] / f"seed{seed}"
            if out.exists():
                shutil.rmtree(out)
            outcomes[str(seed)] = reexecute(folders[seed], out, steps=steps, console=console)
    finally:
        if work is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return {
        "runs_key": runs_key(submission), "mode": "full" if steps is None else "quick", "steps": steps,
        "seeds": outcomes, "result": result_of(outcomes),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "package_version": __version__,
        "git_hash": git_hash(), "seconds": round(time.perf_counter() - t0, 1),
    }


def keep_audit(board: str | Path, name: str, audit: dict[str, Any]) -> Path:
    """Append ``audit`` to the entry's audit file (written atomically)."""
    path = audit_path(board, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"entry": name, "audits": [*load_audits(board, name), audit]})
    return path


def entries(board: str | Path, names: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The entries of ``board`` to audit: those named (every one when none is), read as published."""
    if archive_note(board) is not None:
        raise AuditError(f"{board} is an archived board ({Path(board) / ARCHIVED}): its runs were made by an earlier "
                         "version, whose code this checkout does not hold")
    found = {}
    for path in sorted((Path(board) / RESULTS).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue  # the board build lists it as rejected
        if isinstance(data, dict) and "name" in data:
            found[data["name"]] = data
    missing = sorted(set(names) - set(found))
    if missing:
        raise AuditError(f"{board} has no entry {missing[0]!r} (entries: {', '.join(sorted(found)) or 'none'})")
    return [found[n] for n in (names or sorted(found))]
