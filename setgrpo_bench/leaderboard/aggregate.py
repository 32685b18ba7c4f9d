"""Seed aggregation of eval scores (DESIGN §9): means, standard errors across seeds, bootstrap CIs.

With S seeds and K benchmarks, per benchmark k: mean m_k over seeds and se_k = sd_k/√S; per domain
and overall (macro) the unweighted mean of benchmark means, with the SE across seeds of the seeds' own
means over those benchmarks, sd(M_s)/√S. A seed trains one policy that is evaluated on every
benchmark, so its scores move together: √(Σ se_k²)/K (a mean of *independent* means, what submissions
of schema ≤ 4 state) understated the seed-to-seed spread for 18 of board v2's first 21 entries, by up to
2.5×. Bootstrap CIs resample *seeds* too (the same resample for every benchmark).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import bootstrap

SEED_LEVEL_SCHEMA = 5
"""The submission schema from which domain and macro SEs are seed-level (earlier ones: √(Σ se_k²)/K)."""


def mean_se(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard error of the mean over axis 0 (SE 0 for a single seed)."""
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
    return float(values.mean()), float(se)


def macro_se(ses: Sequence[float]) -> float:
    """SE of an unweighted mean of K independent means: √(Σ se_k²) / K (schema ≤ 4 submissions)."""
    ses = np.asarray(ses, dtype=float)
    return float(np.sqrt((ses**2).sum()) / len(ses))


def bootstrap_ci(per_seed: np.ndarray, columns: Sequence[int], *, rng: np.random.Generator, n_boot: int = 2000,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of the mean over ``columns`` (benchmarks) of the seed-mean, resampling seeds
    (``scipy.stats.bootstrap``). Resampling a seed resamples all its benchmarks together, so the
    statistic is the mean of the seeds' own means over ``columns``.

    ``per_seed`` has shape (S, K). With one seed, or seeds that agree exactly, the interval is the point.
    """
    per_seed_mean = np.asarray(per_seed, dtype=float)[:, list(columns)].mean(axis=1)
    if per_seed_mean.size == 1 or np.ptp(per_seed_mean) == 0:
        point = float(per_seed_mean.mean())
        return point, point
    result = bootstrap((per_seed_mean,), np.mean, n_resamples=n_boot, confidence_level=level, method="percentile",
                       random_state=rng)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def seed_level_se(per_seed: np.ndarray, columns: Sequence[int]) -> float:
    """SE across seeds of the mean over ``columns`` (benchmarks): sd(M_s)/√S with M_s seed s's mean over
    them. Unbiased for the variance whatever the correlation a seed induces across benchmarks."""
    return mean_se(np.asarray(per_seed, dtype=float)[:, list(columns)].mean(axis=1))[1]


def aggregate_seeds(per_seed: np.ndarray, judge_per_seed: np.ndarray, benchmarks: Sequence[str],
                    domains: Sequence[str], *, seed: int = 0, initial_per_seed: np.ndarray | None = None,
                    seed_level: bool = True) -> tuple[dict, dict, dict]:
    """(results per benchmark, groups per domain, macro) from (S, K) arrays of per-seed eval scores.

    ``seed_level``: domain and macro SEs across seeds of the seeds' means, and each benchmark's
    per-seed scores kept (``per_seed``, in the order of the rows) so that the entry can be checked on
    its own (schema 5); otherwise √(Σ se_k²)/K as schemas ≤ 4 stated it."""
    rng = np.random.default_rng(seed)
    per_seed, judge = np.asarray(per_seed, float), np.asarray(judge_per_seed, float)

    def score(columns: list[int]) -> dict:
        means_ses = [mean_se(per_seed[:, k]) for k in columns]
        if len(columns) == 1:
            se = means_ses[0][1]
        else:
            se = seed_level_se(per_seed, columns) if seed_level else macro_se([s for _, s in means_ses])
        entry = {
            "true_score": float(np.mean([m for m, _ in means_ses])),
            "true_score_se": se,
            "true_score_ci": list(bootstrap_ci(per_seed, columns, rng=rng)),
            "judge_score": float(judge[:, columns].mean()),
        }
        if initial_per_seed is not None:
            entry["initial_true_score"] = float(np.asarray(initial_per_seed, float)[:, columns].mean())
        return entry

    results = {name: score([k]) for k, name in enumerate(benchmarks)}
    if seed_level:
        for k, name in enumerate(benchmarks):
            results[name]["per_seed"] = per_seed[:, k].tolist()
    groups = {}
    for domain in sorted(set(domains)):
        groups[domain] = score([k for k, d in enumerate(domains) if d == domain])
    return results, groups, score(list(range(len(benchmarks))))
