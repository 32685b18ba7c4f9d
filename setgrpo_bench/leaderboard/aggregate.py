"""Seed aggregation of eval scores (DESIGN §9): means, standard errors across seeds, bootstrap CIs.

With S seeds and K benchmarks, per benchmark k: mean m_k over seeds and se_k = sd_k/√S; per domain
and overall (macro) the unweighted mean of benchmark means, with SE = √(Σ se_k²)/K (a mean of
independent means). Bootstrap CIs resample *seeds* (the same resample for every benchmark, so the
macro CI keeps the correlation a seed induces across benchmarks).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import bootstrap


def mean_se(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard error of the mean over axis 0 (SE 0 for a single seed)."""
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
    return float(values.mean()), float(se)


def macro_se(ses: Sequence[float]) -> float:
    """SE of an unweighted mean of K independent means: √(Σ se_k²) / K."""
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


def aggregate_seeds(per_seed: np.ndarray, judge_per_seed: np.ndarray, benchmarks: Sequence[str],
                    domains: Sequence[str], *, seed: int = 0, initial_per_seed: np.ndarray | None = None,
                    ) -> tuple[dict, dict, dict]:
    """(results per benchmark, groups per domain, macro) from (S, K) arrays of per-seed eval scores."""
    rng = np.random.default_rng(seed)
    per_seed, judge = np.asarray(per_seed, float), np.asarray(judge_per_seed, float)

    def score(columns: list[int]) -> dict:
        means_ses = [mean_se(per_seed[:, k]) for k in columns]
        entry = {
            "true_score": float(np.mean([m for m, _ in means_ses])),
            "true_score_se": means_ses[0][1] if len(columns) == 1 else macro_se([s for _, s in means_ses]),
            "true_score_ci": list(bootstrap_ci(per_seed, columns, rng=rng)),
            "judge_score": float(judge[:, columns].mean()),
        }
        if initial_per_seed is not None:
            entry["initial_true_score"] = float(np.asarray(initial_per_seed, float)[:, columns].mean())
        return entry

    results = {name: score([k]) for k, name in enumerate(benchmarks)}
    groups = {}
    for domain in sorted(set(domains)):
        groups[domain] = score([k for k, d in enumerate(domains) if d == domain])
    return results, groups, score(list(range(len(benchmarks))))
