"""What makes a board entry trustworthy (DESIGN §10): its runs are whole and consistent with themselves,
its aggregates are what its runs give, and its files are the ones its manifests name.

Three layers of checks, each returning every problem as a sentence:
  run_problems      one run folder: metrics cover its steps once each; its evaluation's averages,
                    judge calls and SetGRPO statistics are what its own per-benchmark scores and
                    metrics give
  entry_problems    one entry: its seeds are 0..k−1, and its macro and domain scores, standard errors
                    and intervals agree with its per-benchmark results
  preset_problems   a protocol run is the preset it is named after (nothing but the seed, the judge
                    profile and where it ran differs)
Publishing also requires each run's manifest to match its files (``harness.rundir.manifest_problems``),
and ``leaderboard build`` rebuilds each entry from ``leaderboard/runs`` when the runs are there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..agents.presets import resolve_config
from ..errors import SetgrpoBenchError
from ..files import finite_json
from ..harness.averages import aggregate
from ..harness.hacking import hacking_anatomy
from ..harness.pooled import drift_diagnostics, summarise_diagnostics, summarise_updates
from ..harness.rundir import MetricsFile, metrics_problems
from .aggregate import SEED_LEVEL_SCHEMA, macro_se, mean_se, seed_level_se

TOLERANCE = 1e-9


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=TOLERANCE, abs_tol=TOLERANCE)
    return a == b


def _same(mine: Mapping[str, Any], stated: Mapping[str, Any], keys: list[str]) -> list[str]:
    return [k for k in keys if not _close(mine.get(k), stated.get(k))]


def run_problems(config: Mapping[str, Any], result: Mapping[str, Any], metrics: MetricsFile) -> list[str]:
    """Why a finished run's files contradict each other (empty when they agree)."""
    steps = int(config["config"]["steps"])
    damage = metrics_problems(metrics, steps)
    problems = [f"metrics.jsonl: {'; '.join(damage)}"] if damage else []
    if result.get("steps") != steps:
        problems.append(f"eval.json is of a {result.get('steps')}-step run, config.json of a {steps}-step one")
    for phase in ("initial", "final"):
        evaluation = result.get(phase) or {}
        per_env = evaluation.get("per_env") or {}
        if not per_env:
            problems.append(f"eval.json: the {phase} evaluation has no per-benchmark scores")
            continue
        derived = aggregate(per_env)
        keys = [f"{k}_{s}" for k in ("macro", "domain_macro") for s in ("true_score", "judge_score")] + [
            "macro_true_score_se", "macro_judge_score_se"]
        for key in _same(derived, evaluation, keys):
            problems.append(f"eval.json: the {phase} {key} {evaluation.get(key)} is not what its per-benchmark scores "
                            f"give ({derived[key]})")
        for domain, entry in derived["domains"].items():
            stated = (evaluation.get("domains") or {}).get(domain, {})
            if _same(entry, stated, ["true_score", "judge_score", "true_score_se"]):
                problems.append(f"eval.json: the {phase} {domain} scores are not the mean of its benchmarks")
    records = metrics.records
    for key in ("grader_calls", "audit_calls", "grader_cost"):
        total = sum(r.get(key, r.get("grader_calls", 0)) for r in records)
        if not _close(total, result.get(key)):
            problems.append(f"eval.json: {key} {result.get(key)} is not the sum over metrics.jsonl ({total})")
    if not result.get("grader_calls"):
        problems.append("eval.json: no judge call was made (grader_calls is 0)")
    diagnostics = summarise_diagnostics(records)
    stated = result.get("diagnostics") or {}
    differing = [k for k in set(diagnostics) | set(stated) if not _close(diagnostics.get(k), stated.get(k))]
    if differing:
        problems.append(f"eval.json: SetGRPO statistics {sorted(differing)[:4]} are not what metrics.jsonl gives")
    if "updates" in result:  # runs made before the optimiser's steps were logged have none
        updates = summarise_updates(records)
        differing = [k for k in set(updates) | set(result["updates"]) if not _close(updates.get(k), result["updates"].get(k))]
        if differing:
            problems.append(f"eval.json: update statistics {sorted(differing)} are not what metrics.jsonl gives")
    if "drift" in result and result["drift"] != drift_diagnostics(records):  # runs made before it have none
        problems.append("eval.json: the reversal by block and by window age is not what metrics.jsonl gives")
    if "hacking" in result and result["hacking"] != finite_json(hacking_anatomy(result.get("curve", []), records)):
        problems.append("eval.json: the hacking onset and the bias's discovery are not what its curve and metrics.jsonl give")
    return problems


def entry_problems(entry: Mapping[str, Any]) -> list[str]:
    """Why an entry's aggregates contradict its own per-benchmark results (empty when they agree)."""
    results, groups, macro = entry["results"], entry["groups"], entry["macro"]
    problems = []
    scores = [r["true_score"] for r in results.values()]
    if not _close(float(np.mean(scores)), macro["true_score"]):
        problems.append(f"macro.true_score {macro['true_score']} is not the mean of the per-benchmark scores "
                        f"({float(np.mean(scores))})")
    domains = entry["suite"].get("domains") or {}  # schema 3 records each benchmark's domain
    if entry["schema_version"] >= SEED_LEVEL_SCHEMA:
        problems += _seed_level_problems(entry, domains)
    elif not _close(macro_se([r["true_score_se"] for r in results.values()]), macro["true_score_se"]):
        problems.append("macro.true_score_se is not √(Σ se²)/K of the per-benchmark standard errors")
    for name, group in groups.items():
        members = [b for b in results if domains.get(b) == name]
        if members and not _close(float(np.mean([results[b]["true_score"] for b in members])), group["true_score"]):
            problems.append(f"groups.{name}.true_score is not the mean of its benchmarks {members}")
    for where, value in [("macro", macro), *((f"groups.{n}", g) for n, g in groups.items()),
                         *((f"results.{n}", r) for n, r in results.items())]:
        low, high = value["true_score_ci"]
        if not low - TOLERANCE <= value["true_score"] <= high + TOLERANCE:
            problems.append(f"{where}.true_score_ci [{low}, {high}] does not contain its estimate {value['true_score']}")
    if len(entry["seeds"]) < 2:
        problems.append(f"seeds: {len(entry['seeds'])} seed; a standard error across seeds needs at least 2")
    elif entry["seeds"] != list(range(len(entry["seeds"]))):
        problems.append(f"seeds: {entry['seeds']}; an entry's seeds are 0..k−1 ({list(range(len(entry['seeds'])))} for "
                        f"{len(entry['seeds'])} seeds), so that none can be chosen for its result: run the missing seeds "
                        "and publish all of them")
    return problems


def _seed_level_problems(entry: Mapping[str, Any], domains: Mapping[str, str]) -> list[str]:
    """Seed-level entries: every score and SE follows from the per-seed scores each benchmark keeps."""
    results, seeds = entry["results"], entry["seeds"]
    short = [b for b, r in results.items() if len(r.get("per_seed") or []) != len(seeds)]
    if short:
        return [f"results.{b}.per_seed must hold one score per seed ({len(seeds)})" for b in short]
    problems = []
    for name, result in results.items():
        mean, se = mean_se(np.array(result["per_seed"]))
        if _same({"true_score": mean, "true_score_se": se}, result, ["true_score", "true_score_se"]):
            problems.append(f"results.{name}: true_score and true_score_se are not the mean and SE of its per_seed scores")
    names = list(results)
    matrix = np.array([results[b]["per_seed"] for b in names]).T  # seeds × benchmarks
    averages = [("macro", entry["macro"], range(len(names))),
                *((f"groups.{g}", group, [k for k, b in enumerate(names) if domains.get(b) == g])
                  for g, group in entry["groups"].items())]
    for where, stated, columns in averages:
        if columns and not _close(seed_level_se(matrix, columns), stated["true_score_se"]):
            problems.append(f"{where}.true_score_se is not the SE across seeds of the seeds' mean over its benchmarks")
    return problems


def preset_problems(config: Mapping[str, Any]) -> list[str]:
    """Settings in which a protocol run differs from its preset under that protocol (the preset is
    resolved at the run's seed and judge profile, so only those may differ from the preset's own; where
    it ran is not a setting): a board compares presets, not tuned variants."""
    try:
        preset = resolve_config(config["agent"], {"protocol": config["protocol"], "noise": config["noise"],
                                                  "seed": config["seed"]}).experiment()
    except SetgrpoBenchError as exc:
        return [f"config: preset {config.get('agent')!r} cannot be resolved under {config.get('protocol')} ({exc})"]
    differing = sorted(k for k, v in preset.items() if k in config and config[k] != v)
    return [f"config: {k}={config[k]!r} differs from preset {config['agent']!r} ({preset[k]!r}); board runs use the "
            "preset unchanged" for k in differing]
