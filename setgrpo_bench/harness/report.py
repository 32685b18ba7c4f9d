"""Run reports: the learning-curve figure and the terminal summary table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from rich.table import Table  # noqa: E402


def plot_curves(metrics: list[dict[str, Any]], result: dict[str, Any], path: Path, title: str) -> None:
    """Training reward (judge) and true score per step, with the eval macro before and after."""
    fig, ax = plt.subplots(figsize=(7, 4))
    if metrics:
        steps = np.array([m["step"] for m in metrics])
        for key, label in (("reward", "train reward (judge)"), ("true_score", "train true score")):
            values = np.array([m[key] for m in metrics])
            ax.plot(steps, values, alpha=0.35, label=f"{label}, per step")
            window = max(1, len(values) // 10)
            smooth = np.convolve(values, np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1 :], smooth, label=f"{label}, moving mean")
    last = metrics[-1]["step"] if metrics else 1
    ax.errorbar([0], [result["initial"]["macro_true_score"]], yerr=[result["initial"]["macro_true_score_se"]],
                fmt="ks", label="eval macro true score")
    ax.errorbar([last], [result["final"]["macro_true_score"]], yerr=[result["final"]["macro_true_score_se"]], fmt="ks")
    ax.set(xlabel="step", ylabel="score", title=title, ylim=(0, 1))
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_table(result: dict[str, Any]) -> Table:
    """Per benchmark, per domain and macro true scores before and after training."""
    oracle = " [oracle: trained on true scores]" if result.get("oracle") else ""
    table = Table(title=f"{result['agent']}{oracle}: held-out true score (eval split)")
    for column in ("benchmark", "domain", "before", "after", "Δ", "judge after"):
        table.add_column(column, justify="right" if column not in ("benchmark", "domain") else "left")
    before, after = result["initial"], result["final"]
    for name, row in sorted(after["per_env"].items()):
        b = before["per_env"][name]["true_score"]
        table.add_row(name, row["domain"], f"{b:.3f}", f"{row['true_score']:.3f}", f"{row['true_score'] - b:+.3f}",
                      f"{row['judge_score']:.3f}")
    for domain, row in after["domains"].items():
        b = before["domains"][domain]["true_score"]
        table.add_row(f"[italic]{domain} mean", "", f"{b:.3f}", f"{row['true_score']:.3f}",
                      f"{row['true_score'] - b:+.3f}", f"{row['judge_score']:.3f}")
    b, a = before["macro_true_score"], after["macro_true_score"]
    table.add_row("[bold]macro", "", f"{b:.3f}", f"[bold]{a:.3f} ± {after['macro_true_score_se']:.3f}",
                  f"{a - b:+.3f}", f"{after['macro_judge_score']:.3f}")
    return table
