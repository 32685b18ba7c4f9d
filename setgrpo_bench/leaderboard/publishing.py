"""``publish``: validate a run (or a sweep) and add it to the board as one JSON file (DESIGN §10)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..agents.presets import board_presets
from ..agents.protocol import Protocol
from ..harness.rundir import copy_records, manifest_problems, read_json, write_json
from .board import build_board
from .layout import ARCHIVED, RESULTS, RUNS, archive_note
from .provenance import preset_problems
from .submission import SubmissionError, check_submission, make_submission, run_folders
from .verify import entry_runs


def _existing(results: Path) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(results.glob("*.json")):
        try:
            out.append((path, json.loads(path.read_text(encoding="utf-8"))))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue  # a broken file is reported by the board build, not by publish
    return out


def publish(paths: Sequence[str | Path], board: str | Path, *, name: str | None = None,
            command: str | None = None, replace: bool = False, protocol: str | None = None) -> list[Path]:
    """Turn run folders (or a sweep folder: one submission per agent) into board files; rebuild the board.
    Each run's record files (not its weights) are copied to ``<board>/runs/<entry name>/seed<k>/``,
    from which the board rebuilds and so verifies the entry: an entry owns its records, and publishing
    never writes into another entry's (``replace`` replaces the records of the entry it replaces only).

    Refuses, with the reason, anything that does not validate: a run whose files differ from its
    manifest or contradict each other, an entry whose aggregates do not follow from its runs or that
    has fewer than 2 seeds, a protocol run that is not its preset, runs made on another suite or (with
    ``protocol``, a ``name@version``) under another protocol, repeated seeds, or a duplicate of a
    submission already on the board (``replace`` lets a submission take the place of the one with its
    name, e.g. the same agent with more seeds). Builds nothing: no policy, no judge model.
    """
    if archive_note(board) is not None:
        raise SubmissionError(f"{board} is an archived board ({Path(board) / ARCHIVED}): it keeps an earlier suite's "
                              "results; publish to the live board")
    by_agent = _by_agent(run_folders(paths))
    if name and len(by_agent) > 1:
        raise SubmissionError(f"--name names one submission, but the runs hold {len(by_agent)}: {sorted(by_agent)}")
    results = Path(board) / RESULTS
    results.mkdir(parents=True, exist_ok=True)
    written = []
    for agent, runs in sorted(by_agent.items()):
        submission = make_submission(runs, name=name, command=command)
        problems = _problems(submission, protocol) + _clashes(submission, results, replace=replace)
        if problems:
            raise SubmissionError(f"{agent}: " + "; ".join(problems))
        _keep_records(submission, runs, Path(board) / RUNS, replace=replace)
        target = results / f"{submission['name']}.json"
        write_json(target, submission)
        written.append(target)
    build_board(board)
    return written


def held_cells(board: str | Path, protocol: str | None = None) -> set[tuple[str, str]]:
    """The (agent, judge profile) cells ``board`` holds an entry of; given a protocol id, only the
    entries made under it."""
    return {(e.get("agent"), e.get("suite", {}).get("noise")) for _, e in _existing(Path(board) / RESULTS)
            if protocol is None or e.get("protocol", {}).get("id") == protocol}


def ready_cells(sweep_root: str | Path, board: str | Path, protocol: Protocol) -> list[list[Path]]:
    """The cells of ``protocol``'s complete board that a sweep (``sweep --agents board``, folders
    ``<sweep_root>/<judge>/<agent>/seed<k>/``) has finished at every seed and the board does not hold yet:
    each cell's run folders, seeds 0 … k − 1, ready to ``publish``. A board filled this way while its
    sweep runs takes each cell once, whole."""
    held = held_cells(board)
    ready = []
    for agent, noise, k in protocol.cells(board_presets(protocol)):
        folders = [Path(sweep_root) / noise / agent / f"seed{seed}" for seed in range(k)]
        if (agent, noise) not in held and all((f / "eval.json").is_file() for f in folders):
            ready.append(folders)
    return ready


def _by_agent(folders: list[Path]) -> dict[str, list[Path]]:
    """The run folders by (agent, judge profile): one submission each; a run whose files differ from its
    manifest is refused first."""
    by_agent: dict[str, list[Path]] = {}
    for folder in folders:
        problems = manifest_problems(folder) if (folder / "eval.json").is_file() else []
        if problems:
            raise SubmissionError(f"{folder}: " + "; ".join(problems))
        saved = read_json(folder / "config.json").get("config", {}) if (folder / "config.json").is_file() else {}
        by_agent.setdefault(f"{saved.get('agent', folder.name)} ({saved.get('noise', '?')})", []).append(folder)
    return by_agent


def _problems(submission: dict[str, Any], protocol: str | None) -> list[str]:
    """Why a submission cannot go on this board: its own checks, its preset, the board's protocol."""
    problems = check_submission(submission)
    if submission["config"].get("protocol"):
        problems += preset_problems({**submission["config"], "seed": submission["seeds"][0]})
    if protocol and submission.get("protocol", {}).get("id") != protocol:
        problems.append(f"protocol: the runs were made under {submission.get('protocol', {}).get('id') or 'no protocol'}, "
                        f"this board compares agents under {protocol}; rerun with --protocol {protocol}")
    return problems


def _clashes(submission: dict[str, Any], results: Path, *, replace: bool) -> list[str]:
    """An entry already on the board with the submission's name (unless ``replace``) or its runs."""
    for path, other in _existing(results):
        same_runs = (other.get("config_hash"), other.get("suite", {}).get("hash"), other.get("seeds")) == (
            submission["config_hash"], submission["suite"]["hash"], submission["seeds"])
        if replace and other.get("name") == submission["name"]:
            continue
        if other.get("name") == submission["name"] or same_runs:
            why = "same name" if other.get("name") == submission["name"] else "same config, suite and seeds"
            return [f"already on the board as {path.name} ({why})"]
    return []


def _keep_records(submission: dict[str, Any], runs: list[Path], root: Path, *, replace: bool) -> None:
    """Copy each run's records under the entry's own name; with ``replace``, its own earlier seeds go."""
    by_seed = {read_json(folder / "config.json")["config"]["seed"]: folder for folder in runs}
    kept_runs = entry_runs(submission, root)
    for stale in sorted(kept_runs[0].parent.glob("seed*")) if replace else []:  # its own earlier seeds only
        if stale not in kept_runs and stale.is_dir():
            shutil.rmtree(stale)
    for seed, kept in zip(submission["seeds"], kept_runs):
        if kept.is_dir() and kept.resolve() != by_seed[seed].resolve():
            shutil.rmtree(kept)  # this entry's earlier records of the seed: no file of them may linger
        copy_records(by_seed[seed], kept, compress=True)  # a board keeps its runs' records compressed
