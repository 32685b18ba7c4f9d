"""Over-optimisation of a judge (Gao et al. 2023): the judge's score of the training samples keeps
rising while their true score peaks and falls. Measured from runs' ``metrics.jsonl`` (the per-step
mean judge reward and true score of the training batch), over seeds:

  peak     the highest block mean of the true score (blocks of ``block`` steps smooth the batch noise)
  end      the last block's mean; drop = peak − end, with its standard error across seeds
  judge_gain, judge_minus_true_end   how far the judge's score rose, and how far above the truth it ends

The same on the held-out curve (``held_out_grid``, ``held_out_overoptimisation``): the true score of the
policy on dev instances every ``eval_every`` steps, which a stopped run measures too. Any logged metric
per block over seeds (``metric_blocks``, the ``blocks`` command) puts the judge's grade, the true score and
the answers' length side by side: how a policy over-optimises, not only whether.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .rundir import read_metrics


def curves(runs: Sequence[str | Path]) -> tuple[np.ndarray, np.ndarray]:
    """(judge reward, true score) per seed and step, shapes (S, T) over the steps every run has."""
    records = [read_metrics(Path(r) / "metrics.jsonl").records for r in runs]
    steps = min(len(r) for r in records)
    judge = np.array([[row["reward"] for row in r[:steps]] for r in records], dtype=float)
    true = np.array([[row["true_score"] for row in r[:steps]] for r in records], dtype=float)
    return judge, true


def block_means(values: np.ndarray, block: int) -> np.ndarray:
    """(S, T) → (S, ⌊T/block⌋) block means."""
    n = values.shape[1] // block
    return values[:, : n * block].reshape(values.shape[0], n, block).mean(axis=2)


def metric_blocks(records: Sequence[Sequence[Mapping[str, Any]]], key: str, *, block: int) -> list[dict[str, Any]]:
    """``key`` per block of ``block`` steps (steps 1–``block``, …): each run's mean over the block's steps
    that logged it, then the mean and SE of those across the runs that reached the block — a stopped run
    logs no step after its stop, so a late block holds fewer runs (``runs``)."""
    per_run: list[dict[int, list[tuple[int, float]]]] = []
    for rows in records:
        blocks: dict[int, list[tuple[int, float]]] = {}
        for row in rows:
            value = row.get(key)
            if isinstance(value, int | float) and np.isfinite(value):
                step = int(row["step"])
                blocks.setdefault((step - 1) // block, []).append((step, float(value)))
        per_run.append(blocks)
    out = []
    for b in sorted(set().union(*per_run)):
        reached = [run[b] for run in per_run if b in run]
        means = np.array([np.mean([v for _, v in rows]) for rows in reached])
        se = float(means.std(ddof=1) / np.sqrt(len(means))) if len(means) > 1 else float("nan")
        out.append({"first_step": b * block + 1, "last_step": max(s for rows in reached for s, _ in rows),
                    "runs": len(means), "mean": float(means.mean()), "se": se})
    return out


def overoptimisation(judge: np.ndarray, true: np.ndarray, *, block: int = 20) -> dict[str, Any]:
    """The statistics of the module docstring from (S, T) per-step curves."""
    judge_blocks, true_blocks = block_means(judge, block), block_means(true, block)
    mean_true = true_blocks.mean(axis=0)
    peak = int(np.argmax(mean_true))
    drops = true_blocks[:, peak] - true_blocks[:, -1]  # per seed, at the peak block of the seed mean
    seeds = len(drops)
    se = float(drops.std(ddof=1) / np.sqrt(seeds)) if seeds > 1 else float("nan")
    return {
        "seeds": seeds, "steps": int(judge.shape[1]), "block": block,
        "true_blocks": mean_true.tolist(), "judge_blocks": judge_blocks.mean(axis=0).tolist(),
        "peak_block": peak, "true_peak": float(mean_true[peak]), "true_end": float(mean_true[-1]),
        "drop": float(drops.mean()), "drop_se": se, "drop_in_se": float(drops.mean() / se) if se and se > 0 else float("nan"),
        "judge_gain": float(judge_blocks.mean(axis=0)[-1] - judge_blocks.mean(axis=0)[0]),
        "judge_minus_true_end": float(judge_blocks.mean(axis=0)[-1] - mean_true[-1]),
    }


def held_out_grid(curves: Sequence[Sequence[dict[str, float]]], steps: int, every: int) -> tuple[list[int], np.ndarray]:
    """Runs' held-out curves (``eval.json``'s ``curve``) on one grid of steps: 0, ``every``, 2·``every`` …
    and ``steps``. A run that stopped early keeps its last point from then on: its policy no longer
    changes and every point samples the same way, so that is the score it would have been measured at.
    Returns (grid, (S, len(grid)) true scores)."""
    grid = sorted({0, *range(every, steps + 1, every), steps}) if every else [0, steps]
    values = np.empty((len(curves), len(grid)))
    for i, curve in enumerate(curves):
        points = sorted((int(p["step"]), float(p["true_score"])) for p in curve)
        for j, step in enumerate(grid):
            values[i, j] = [v for s, v in points if s <= step][-1]
    return grid, values


def held_out_overoptimisation(grid: Sequence[int], true: np.ndarray) -> dict[str, Any]:
    """Over-optimisation on the held-out curve: the peak of the seeds' mean, its end, and the drop
    peak − end per seed (its mean and SE across seeds)."""
    mean = true.mean(axis=0)
    peak = int(np.argmax(mean))
    drops = true[:, peak] - true[:, -1]
    se = float(drops.std(ddof=1) / np.sqrt(len(drops))) if len(drops) > 1 else float("nan")
    return {"peak_step": int(grid[peak]), "true_peak": float(mean[peak]), "true_end": float(mean[-1]),
            "drop": float(drops.mean()), "drop_se": se}
