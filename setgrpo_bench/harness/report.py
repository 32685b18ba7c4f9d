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


def plot_setgrpo(metrics: list[dict[str, Any]], path: Path, title: str) -> None:
    """Per step: q, τ̂, acceptance and uncertifiable shares, coverage and reversal rates."""
    steps = np.array([m["step"] for m in metrics])
    series = lambda key: np.array([m.get(key, np.nan) for m in metrics], dtype=float)  # noqa: E731
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    top.plot(steps, series("q"), label="q (set radius multiplier)")
    top.plot(steps, np.where(np.isfinite(series("tau")), series("tau"), np.nan), label="τ̂ (gate threshold)")
    top.set(ylabel="value", title=title)
    top.legend(fontsize=7)
    for key, label in (("acceptance_nonconstant", "accepted share"), ("uncertifiable", "uncertifiable share"),
                       ("coverage_ref", "coverage of C (reference)"), ("coverage_true", "coverage of C (true)"),
                       ("reversal_true", "reversal rate of accepted (true)")):
        bottom.plot(steps, series(key), label=label, alpha=0.8)
    bottom.set(xlabel="step", ylabel="rate", ylim=(0, 1))
    bottom.legend(fontsize=7, ncol=2)
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
    if result.get("diagnostics"):
        table.caption = setgrpo_summary(result["diagnostics"])
    b, a = before["macro_true_score"], after["macro_true_score"]
    table.add_row("[bold]macro", "", f"{b:.3f}", f"[bold]{a:.3f} ± {after['macro_true_score_se']:.3f}",
                  f"{a - b:+.3f}", f"{after['macro_judge_score']:.3f}")
    return table


def _rate(d: dict[str, Any], key: str) -> str:
    if d.get(key) is None:
        return "—"
    return f"{d[key]:.2f} [{d[f'{key}_low']:.2f}, {d[f'{key}_high']:.2f}]"


def setgrpo_summary(d: dict[str, Any]) -> str:
    """SetGRPO's run in words: what it accepted, whether its set covered and its gate held."""
    energy = f"{d['update_energy_ratio']:.2f}×" if d.get("update_energy_ratio") is not None else "—"
    return (f"SetGRPO accepted {_rate(d, 'acceptance_nonconstant')} of the non-constant groups "
            f"({d['n_accepted']} of {d['n_nonconstant']}); its executed updates had {energy} the energy cᵀKc of "
            f"GRPO's on the same groups. Coverage of the coefficient set (share of groups whose reference / true "
            f"coefficients lie in it): {_rate(d, 'coverage_ref')} / {_rate(d, 'coverage_true')}. Reversal rate "
            f"of accepted groups (executed update opposing the reference / true one): {_rate(d, 'reversal_ref')} / "
            f"{_rate(d, 'reversal_true')}. 95% Clopper–Pearson intervals over the run's groups.")
