"""SetGRPO's promises measured over a whole run (or several seeds), from integer counts (DESIGN §9).

Each step logs counts — audited groups and how many of them the set covered, audited accepted
groups and how many of them reversed — and rates are pooled over the counts: a mean of per-step
rates over a handful of groups would over-weight steps with one such group. Every rate comes with
its exact (Clopper–Pearson) 95% interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from scipy.stats import binomtest

RATES = {  # rate: (events, trials) — w.r.t. the reference grader and the true score
    "coverage_ref": ("n_covered_ref", "n_audited"),
    "reversal_ref": ("n_reversed_ref", "n_audited_accepted"),
    "coverage_true": ("n_covered_true", "n_nonconstant"),
    "reversal_true": ("n_reversed_true", "n_accepted"),
    "acceptance_nonconstant": ("n_accepted", "n_nonconstant"),
}
RATIOS = {  # ratio of pooled sums
    "update_energy_ratio": ("energy_executed", "energy_grpo"),
    "retained_alignment": ("alignment_executed_true", "alignment_grpo_true"),
}
MEANS = ("q", "tau", "uncertifiable")
COUNTS = sorted({k for pair in RATES.values() for k in pair})
SUMS = sorted({k for pair in RATIOS.values() for k in pair})


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) confidence interval for k successes in n ≥ 1 trials (scipy's binomtest)."""
    interval = binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(interval.low), float(interval.high)


def rate_with_interval(name: str, k: int, n: int) -> dict[str, float | None]:
    """``name``, ``name_low``, ``name_high``: k/n with its exact interval (all None when n = 0)."""
    low, high = clopper_pearson(k, n) if n else (None, None)
    return {name: k / n if n else None, f"{name}_low": low, f"{name}_high": high}


def pool(totals: Mapping[str, float], means: Mapping[str, float | None] | None = None) -> dict[str, Any]:
    """Rates with their intervals, ratios and the counts themselves from summed counts."""
    out: dict[str, Any] = dict(means or {})
    for rate, (events, trials) in RATES.items():
        out.update(rate_with_interval(rate, int(totals.get(events, 0)), int(totals.get(trials, 0))))
    for ratio, (top, bottom) in RATIOS.items():
        out[ratio] = totals[top] / totals[bottom] if totals.get(bottom) else None
    out.update({k: int(totals.get(k, 0)) for k in COUNTS})
    out.update({k: float(totals.get(k, 0.0)) for k in SUMS})
    return out


def summarise_diagnostics(metrics: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A run's pooled SetGRPO statistics (empty for agents that build no set): rates from the counts
    summed over its steps, and the mean over steps of q, τ̂ and the uncertifiable share."""
    metrics = [m for m in metrics if "n_audited" in m]
    if not metrics:
        return {}
    totals = {k: sum(float(m.get(k, 0)) for m in metrics) for k in COUNTS + SUMS}
    means = {}
    for key in MEANS:
        values = np.array([m[key] for m in metrics if key in m], dtype=float)  # None → NaN
        finite = values[np.isfinite(values)]
        means[key] = float(finite.mean()) if finite.size else None
    return pool(totals, means)


def pool_seeds(diagnostics: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Several seeds' pooled statistics pooled again: counts summed, means averaged."""
    diagnostics = [d for d in diagnostics if d and "n_audited" in d]
    if not diagnostics:
        return {}
    totals = {k: sum(float(d.get(k, 0)) for d in diagnostics) for k in COUNTS + SUMS}
    means = {}
    for key in MEANS:
        values = [d[key] for d in diagnostics if d.get(key) is not None]
        means[key] = float(np.mean(values)) if values else None
    return pool(totals, means)


def summarise_updates(metrics: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What a run's optimiser did, for every agent: the share of steps on which it stepped, the mean
    parameter step ‖Δθ‖ and the mean number of groups trained on over those steps (empty for runs
    that did not log them)."""
    metrics = [m for m in metrics if "stepped" in m]
    if not metrics:
        return {}
    stepped = [m for m in metrics if m["stepped"]]
    return {
        "executed_steps": len(stepped) / len(metrics),
        "param_step": float(np.mean([m["param_step"] for m in stepped])) if stepped else 0.0,
        "groups_per_executed_step": float(np.mean([m["groups_executed"] for m in stepped])) if stepped else 0.0,
    }


BLOCK_STEPS = 20
"""Steps per block of the certificate's drift diagnostics (``reversal_by_block``)."""
AGE_EDGES = (10, 20, 30, 40)
"""Edges (in steps) of the calibration window's mean age in ``reversal_by_age``: <10, 10–20, …, ≥40."""


def _reversal(part: list[Mapping[str, Any]]) -> dict[str, Any]:
    n = int(sum(m["n_audited_accepted"] for m in part))
    k = int(sum(m["n_reversed_ref"] for m in part))
    return {"n_audited_accepted": n, "n_reversed_ref": k, **rate_with_interval("reversal_ref", k, n)}


def reversal_by_block(metrics: Iterable[Mapping[str, Any]], block: int = BLOCK_STEPS) -> list[dict[str, Any]]:
    """Reversal of the audited accepted groups against the reference per block of ``block`` steps
    (1–20, 21–40, …), pooled over each block's counts with its exact interval: whether the gate's
    certificate still holds as the policy moves away from the one its window saw."""
    metrics = [m for m in metrics if "n_audited_accepted" in m]
    last = max((int(m["step"]) for m in metrics), default=0)
    return [{"first_step": start, "last_step": min(start + block - 1, last),
             **_reversal([m for m in metrics if start <= m["step"] < start + block])}
            for start in range(1, last + 1, block)]


def reversal_by_age(metrics: Iterable[Mapping[str, Any]], edges: tuple[int, ...] = AGE_EDGES) -> list[dict[str, Any]]:
    """The same reversal by the calibration window's mean age at the step (``window_age``, in steps):
    flat when the certificate does not age; runs that did not log the age give none."""
    metrics = [m for m in metrics if "n_audited_accepted" in m and m.get("window_age") is not None
               and np.isfinite(m["window_age"])]
    bounds = [0, *edges, None]
    return [{"min_age": low, "max_age": high,
             **_reversal([m for m in metrics if low <= m["window_age"] and (high is None or m["window_age"] < high)])}
            for low, high in zip(bounds[:-1], bounds[1:])] if metrics else []


def drift_diagnostics(metrics: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A SetGRPO run's certificate over time (``eval.json``'s ``drift``): by block of steps and by
    the window's age (empty for agents that build no set)."""
    metrics = [m for m in metrics if "n_audited_accepted" in m]
    return {"blocks": reversal_by_block(metrics), "ages": reversal_by_age(metrics)} if metrics else {}


def pool_drift(drifts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Several runs' drift diagnostics pooled: each block's (and age bin's) counts summed over runs."""
    drifts = [d for d in drifts if d]
    out: dict[str, Any] = {}
    for part, key in (("blocks", ("first_step", "last_step")), ("ages", ("min_age", "max_age"))):
        rows: dict[tuple, list[dict[str, Any]]] = {}
        for d in drifts:
            for row in d.get(part, []):
                rows.setdefault(tuple(row[k] for k in key), []).append(row)
        out[part] = [{**dict(zip(key, where)), **_reversal(found)} for where, found in sorted(rows.items())]
    return out if drifts else {}
