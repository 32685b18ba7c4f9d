"""One leaderboard submission: an agent's runs over several seeds, aggregated and validated (DESIGN §10)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from ..agents.config import TrainConfig
from ..agents.protocol import load_protocol
from ..errors import SetgrpoBenchError
from ..files import exists
from ..harness.hacking import pool_hacking
from ..harness.overoptimisation import (
    curves,
    held_out_grid,
    held_out_overoptimisation,
    overoptimisation,
)
from ..harness.pooled import pool_drift, pool_seeds
from ..harness.rundir import MANIFEST, FileError, read_json, read_metrics, step_timings
from ..harness.suite import SUITE_FIELDS, changed_parts, suite_fingerprint, suite_parts
from ..hashing import stable_hash
from ..policy.embedded import tiny_path
from ..policy.files import policy_fingerprint
from .aggregate import SEED_LEVEL_SCHEMA, aggregate_seeds
from .provenance import entry_problems, run_problems

SCHEMA_VERSION = 5
OVEROPTIMISATION_BLOCK = 20
"""Steps per block of the over-optimisation statistics (the batch's scores are noisy step by step)."""
SCHEMA_FILE = Path(__file__).with_name("submission.schema.json")


class SubmissionError(SetgrpoBenchError):
    """A run or submission cannot go on the board; the message says why and what to do."""


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def schema_problems(data: Any) -> list[str]:
    """Every schema violation of ``data``, each as ``field.path: message``."""
    validator = jsonschema.Draft202012Validator(load_schema())
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(top level)'}: {e.message}"
            for e in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))]


def _read_run(folder: Path) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(config.json, eval.json, metrics records) of a finished run whose files agree with each other."""
    for name in ("config.json", "eval.json", "metrics.jsonl"):
        if not exists(folder / name):
            hint = " (the run has not finished: resume it with --resume)" if name == "eval.json" else ""
            raise SubmissionError(f"{folder} has no {name}{hint}")
    try:
        config, result = read_json(folder / "config.json"), read_json(folder / "eval.json")
    except FileError as exc:
        raise SubmissionError(str(exc)) from None
    metrics = read_metrics(folder / "metrics.jsonl")
    try:
        problems = run_problems(config, result, metrics)
    except (KeyError, TypeError, ValueError) as exc:
        problems = [f"a run file lacks a field ({type(exc).__name__}: {exc})"]
    if problems:
        raise SubmissionError(f"{folder}: " + "; ".join(problems))
    return config, result, metrics.records


def run_folders(paths: Sequence[str | Path]) -> list[Path]:
    """Run folders named directly or found up to three levels below (a sweep's ``<agent>/seed<k>/``),
    their records as a run writes them or as a board keeps them (compressed)."""
    out: list[Path] = []
    for path in map(Path, paths):
        if exists(path / "config.json") or exists(path / "eval.json"):
            out.append(path)
        else:
            found = next((runs for depth in ("*", "*/*", "*/*/*") if (runs := sorted(
                {p.parent for name in ("config.json", "config.json.gz") for p in path.glob(f"{depth}/{name}")}))), [])
            if not found:
                raise SubmissionError(f"{path} holds no run (no config.json in it or below it)")
            out += found
    return out


def git_hash() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def make_submission(runs: Sequence[Path], *, name: str | None = None, command: str | None = None,
                    schema_version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """Aggregate the runs of one agent (same config but the seed, distinct seeds) into a submission of
    ``schema_version`` (an older one rebuilds an entry as it was published: fields it lacked stay out)."""
    read = [(folder, *_read_run(folder)) for folder in runs]
    experiment, seeds, suite_hash, policy_hash = _one_experiment(read)
    first = read[0][1]
    benchmarks = sorted(read[0][2]["final"]["per_env"])
    domains = [read[0][2]["final"]["per_env"][b]["domain"] for b in benchmarks]
    manifests = [(c["config"]["seed"], folder / MANIFEST) for folder, c, _, _ in read]
    version = min(schema_version, SCHEMA_VERSION) if all(exists(path) for _, path in manifests) else 2

    seed_level = version >= SEED_LEVEL_SCHEMA
    # a seed-level entry keeps each benchmark's per-seed scores in the order of its (sorted) seeds
    order = np.argsort(seeds, kind="stable") if seed_level else np.arange(len(seeds))

    def per_seed(key: str, phase: str = "final") -> np.ndarray:
        return np.array([[r[phase]["per_env"][b][key] for b in benchmarks] for _, _, r, _ in read])[order]

    results, groups, macro = aggregate_seeds(per_seed("true_score"), per_seed("judge_score"), benchmarks, domains,
                                             initial_per_seed=per_seed("true_score", "initial"), seed_level=seed_level)
    steps = min(len(m) for *_, m in read)
    curve = lambda key: np.mean([[row[key] for row in m[:steps]] for *_, m in read], axis=0).tolist()  # noqa: E731
    diagnostics = pool_seeds(r.get("diagnostics") or {} for _, _, r, _ in read)
    config = {k: v for k, v in read[0][1]["config"].items() if k != "seed"}
    agent = config["agent"]
    submission = {
        "schema_version": version,
        "name": name or f"{agent}-{config['noise']}-{suite_hash[:8]}",
        "agent": agent, "oracle": bool(config["oracle"]), "config": config, "config_hash": stable_hash(experiment),
        "policy": {"name": first["policy"], "hash": policy_hash},
        "suite": {"id": config["envs"], "hash": suite_hash, "noise": config["noise"], "benchmarks": benchmarks,
                  "eval_instances": int(config["eval_instances"])},
        "seeds": sorted(seeds),
        "n_samples": {b: int(read[0][2]["final"]["per_env"][b]["n"]) for b in benchmarks},
        "results": results, "groups": groups, "macro": macro, "diagnostics": diagnostics,
        "grader_calls_per_step": float(np.mean([r["grader_calls"] / max(r["steps"], 1) for _, _, r, _ in read])),
        "grader_cost_per_step": float(np.mean([r.get("grader_cost", r["grader_calls"]) / max(r["steps"], 1)
                                               for _, _, r, _ in read])),
        "wall_time_s": float(np.mean([sum(row["time_step"] for row in step_timings(folder)) for folder, *_ in read])),
        "curves": {"step": list(range(1, steps + 1)), "true_score": curve("true_score"), "reward": curve("reward")},
        "versions": {"package": first["package_version"], "torch": first["torch"], "python": first["python"],
                     **({"transformers": first["transformers"]} if "transformers" in first else {})},
        "git_hash": git_hash(), "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if version >= 3:  # runs that record their manifests
        submission["runs"] = [{"seed": seed, "manifest": read_json(path)} for seed, path in sorted(manifests)]
        submission["suite"]["domains"] = dict(zip(benchmarks, domains))
        if "suite_parts" in first:
            submission["suite"]["parts"] = first["suite_parts"]
    _add_plugins(submission, read)
    _add_curves(submission, read, version, steps)
    if config.get("protocol"):
        protocol = load_protocol(config["protocol"])
        submission["protocol"] = {"id": protocol.id, "hash": protocol.fingerprint()}
    if command:
        submission["command"] = command
    return submission


def _one_experiment(read: list[tuple[Path, dict[str, Any], dict[str, Any], list[dict[str, Any]]]]
                    ) -> tuple[dict[str, Any], list[int], str, str]:
    """(experiment, seeds, suite hash, policy hash) of runs that make one submission: the same config but
    the seed, distinct seeds, one suite and policy; anything else is refused with the reason."""
    if not read:
        raise SubmissionError("no runs given")
    configs = [_experiment(folder, c["config"]) for folder, c, _, _ in read]
    if any(c != configs[0] for c in configs):
        raise SubmissionError("the runs differ in more than the seed: "
                              + ", ".join(str(f) for f, *_ in read) + "; publish one agent configuration at a time")
    seeds = [c["config"]["seed"] for _, c, _, _ in read]
    if len(set(seeds)) != len(seeds):
        raise SubmissionError(f"seeds must be distinct, got {sorted(seeds)}")
    hashes = {(c.get("suite_hash"), c.get("policy_hash")) for _, c, _, _ in read}
    if len(hashes) != 1 or None in next(iter(hashes)):
        raise SubmissionError("the runs were made on different suites or policies (or by a version that did not record them)")
    return configs[0], seeds, *next(iter(hashes))


def _add_plugins(submission: dict[str, Any], read: list[Any]) -> None:
    """The installed packages and catalog presets whose method this is (name, version, source hash): the
    same for every run, or refused."""
    plugins = [c.get("plugins") for _, c, _, _ in read]
    if any(p != plugins[0] for p in plugins):
        raise SubmissionError("the runs were made with different versions of a plugin: " + ", ".join(str(f) for f, *_ in read))
    if plugins[0]:
        submission["plugins"] = plugins[0]


def _add_dynamics(submission: dict[str, Any], read: list[Any], steps: int) -> None:
    """Schema ≥ 4: the per-step SEs of the curves, the over-optimisation statistics, what the optimiser
    did, averaged over seeds, SetGRPO's reversal by block and window age, pooled over seeds, and the
    reward hacking read from each run (``harness/hacking.py``), pooled (each when every run logged it)."""
    judge, true = curves([folder for folder, *_ in read])
    per_step_se = lambda v: (v.std(axis=0, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.zeros(v.shape[1])).tolist()  # noqa: E731
    submission["curves"].update({"true_score_se": per_step_se(true), "reward_se": per_step_se(judge)})
    block = OVEROPTIMISATION_BLOCK if steps >= 3 * OVEROPTIMISATION_BLOCK else max(1, steps // 3)
    stats = overoptimisation(judge, true, block=block)
    submission["overoptimisation"] = {k: stats[k] for k in (
        "block", "true_peak", "true_end", "drop", "drop_se", "judge_gain", "judge_minus_true_end")}
    updates = [r["updates"] for _, _, r, _ in read if r.get("updates")]
    if len(updates) == len(read):
        submission["updates"] = {k: float(np.mean([u[k] for u in updates])) for k in sorted(updates[0])}
    drifts = [r["drift"] for _, _, r, _ in read if r.get("drift")]
    if drifts and len(drifts) == len(read):
        submission["drift"] = pool_drift(drifts)
    anatomies = [r["hacking"] for _, _, r, _ in read if r.get("hacking")]
    if anatomies and len(anatomies) == len(read):
        submission["hacking"] = pool_hacking(anatomies)


def _add_curves(submission: dict[str, Any], read: list[Any], version: int, steps: int) -> None:
    """Schema ≥ 4: the training curves' dynamics; runs that measured a held-out curve: that curve."""
    if version >= 4:
        _add_dynamics(submission, read, steps)
    if all("curve" in r for _, _, r, _ in read):
        _add_held_out(submission, read)


def _add_held_out(submission: dict[str, Any], read: list[Any]) -> None:
    """Runs that measured a held-out curve: its mean and SE over seeds on one grid of steps, the
    over-optimisation measured on it, and the step each seed stopped at (when the agent may stop)."""
    config = submission["config"]
    grid, true = held_out_grid([r["curve"] for _, _, r, _ in read], int(config["steps"]), int(config["eval_every"]))
    se = true.std(axis=0, ddof=1) / np.sqrt(len(true)) if len(true) > 1 else np.zeros(len(grid))
    submission["held_out"] = {"step": grid, "true_score": true.mean(axis=0).tolist(), "true_score_se": se.tolist(),
                              **held_out_overoptimisation(grid, true)}
    if any("stopped_at_step" in r for _, _, r, _ in read):
        order = np.argsort([c["config"]["seed"] for _, c, _, _ in read], kind="stable")
        submission["stopped_at_step"] = [read[i][2].get("stopped_at_step") for i in order]


def _experiment(folder: Path, config: dict[str, Any]) -> dict[str, Any]:
    """What a run computed, seed aside: runs that differ only in the seed or in where they ran
    (device, engine) aggregate into one submission. Only the settings the run recorded count: a
    setting added later (at its default) does not change an archived run's identity."""
    try:
        return {k: v for k, v in TrainConfig.from_flat(config).experiment().items() if k != "seed" and k in config}
    except SetgrpoBenchError as exc:
        raise SubmissionError(f"{folder}/config.json: {exc}") from None


def _suite_config(submission: dict[str, Any]) -> TrainConfig:
    config = submission["config"]
    return TrainConfig.from_flat({k: config[k] for k in SUITE_FIELDS if k in config})


def current_suite_parts(submission: dict[str, Any]) -> dict[str, Any]:
    return suite_parts(_suite_config(submission))


def current_suite_hash(submission: dict[str, Any]) -> str:
    """The suite hash the submission's config gives with the catalog as it is now (no judge model is
    loaded to compute it)."""
    config = submission["config"]
    return suite_fingerprint(TrainConfig.from_flat({k: config[k] for k in SUITE_FIELDS if k in config}))


def check_submission(submission: Any, *, current: bool = True) -> list[str]:
    """Every reason the submission cannot go on the current board (empty when it can): its schema, its
    own consistency, its protocol file, then (``current``) the suite and policy it was made on, as they
    are now. An archived board (``current=False``) keeps entries made on an earlier suite: they are
    checked against their runs instead."""
    problems = schema_problems(submission)
    if problems:
        return problems
    if submission["schema_version"] >= 2:
        problems = entry_problems(submission)
        if problems:
            return problems
    if "protocol" in submission:
        try:
            protocol = load_protocol(submission["protocol"]["id"])
        except SetgrpoBenchError as exc:
            return [f"protocol: {exc}"]
        if protocol.fingerprint() != submission["protocol"]["hash"]:
            return [f"protocol: {protocol.id} has changed since the runs were made (its file now fixes another "
                    "budget); rerun under the current protocol"]
    if not current:
        return []
    if submission["schema_version"] < SEED_LEVEL_SCHEMA:
        return [f"schema_version: {submission['schema_version']} states its macro SE as √(Σ se_k²)/K, which ignores that a "
                f"seed moves every benchmark; publish its runs again with this version (schema {SCHEMA_VERSION})"]
    try:
        now = current_suite_hash(submission)
    except (SetgrpoBenchError, TypeError) as exc:
        return [f"config: cannot rebuild the suite it was run on ({exc})"]
    if now != submission["suite"]["hash"]:
        parts = submission["suite"].get("parts")
        how = "; ".join(changed_parts(parts, current_suite_parts(submission))) if parts else (
            "benchmarks, rubrics, judge profile or eval size changed")
        return [f"suite.hash: {submission['suite']['hash'][:12]}… was computed on a different suite than the current "
                f"catalog's {now[:12]}… ({how}); rerun on this version"]
    if submission["schema_version"] >= 2 and submission["policy"]["name"] == "tiny":
        folder = tiny_path()  # the build for the current suite; never built here
        if not folder.is_dir():
            return [f"policy: the embedded policy of the current suite is not built ({folder}); rebuild it with "
                    "python -m setgrpo_bench build-policy"]
        shipped = policy_fingerprint(folder)
        if submission["policy"]["hash"] != shipped:
            return [f"policy.hash: made with the embedded policy {submission['policy']['hash'][:12]}…, but this version's "
                    f"is {shipped[:12]}… (the policy was rebuilt since); rerun on this version"]
    return []
