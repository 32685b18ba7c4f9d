"""Run reports: the learning-curve figure and the terminal summary table."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from rich.table import Table

from .overoptimisation import block_means

Plot = TypeVar("Plot", bound=Callable[..., Any])


def literal_text(plot: Plot) -> Plot:
    """Draw every string of the figure as written: an agent or benchmark name holding ``$`` is a name,
    not mathtext (which would fail to parse, or typeset it)."""

    @functools.wraps(plot)
    def drawn_literally(*args: Any, **kwargs: Any) -> Any:
        with matplotlib.rc_context({"text.parse_math": False}):
            return plot(*args, **kwargs)

    return drawn_literally  # type: ignore[return-value]


def _smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving mean (NaN-aware): point i averages the finite values of steps i − w + 1 … i."""
    out = np.full(values.shape, np.nan)
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1) : i + 1]
        chunk = chunk[np.isfinite(chunk)]
        if chunk.size:
            out[i] = chunk.mean()
    return out


def _series(metrics: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.array([m.get(key, np.nan) if m.get(key) is not None else np.nan for m in metrics], dtype=float)


def _line(ax: Axes, steps: np.ndarray, values: np.ndarray, label: str, colour: str) -> None:
    """A smoothed line with the raw per-step values faint behind it."""
    window = max(1, len(values) // 10)
    ax.plot(steps, values, color=colour, alpha=0.25, lw=0.8)
    ax.plot(steps, _smooth(values, window), color=colour, lw=1.8, label=label + (f" ({window}-step mean)" if window > 1 else ""))


@literal_text
def plot_curves(metrics: list[dict[str, Any]], result: dict[str, Any], path: Path, title: str) -> None:
    """Training reward (judge) and true score per step, and the held-out eval macro before and after
    training with ±2 SE bars; axes fit the data, the legend sits outside them."""
    fig = Figure(figsize=(9, 4))  # no pyplot, no backend: savefig renders with Agg
    ax = fig.subplots()
    steps = np.array([m["step"] for m in metrics])
    if metrics:
        _line(ax, steps, _series(metrics, "reward"), "train reward (judge)", "tab:blue")
        _line(ax, steps, _series(metrics, "true_score"), "train true score", "tab:orange")
    last = int(steps[-1]) if metrics else 1
    points = [(0, result["initial"]), (last, result["final"])]
    ax.errorbar([x for x, _ in points], [e["macro_true_score"] for _, e in points],
                yerr=[2 * e["macro_true_score_se"] for _, e in points], fmt="ks", capsize=4, ms=6,
                label="held-out eval macro true score (±2 SE)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="step", ylabel="score", title=title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


@literal_text
def plot_setgrpo(metrics: list[dict[str, Any]], path: Path, title: str, *, alpha_a: float, alpha: float) -> None:
    """``setgrpo_figure`` written to ``path``."""
    setgrpo_figure(metrics, title, alpha_a=alpha_a, alpha=alpha).savefig(path, dpi=110)


def setgrpo_figure(metrics: list[dict[str, Any]], title: str, *, alpha_a: float, alpha: float) -> Figure:
    """SetGRPO's run at a glance, one question per panel: what it accepted, whether its set covered
    (against 1 − α_a at the level the set was chosen at in each step), whether its gate held (against
    α), and the radius q and threshold τ̂. Leading steps in which nothing was certified are shaded and
    say so: the window is still filling, and no group can be accepted."""
    steps = np.array([m["step"] for m in metrics])
    fig = Figure(figsize=(11, 6.5))
    axes = fig.subplots(2, 2, sharex=True)
    (accept, cover), (risk, knobs) = axes
    _line(accept, steps, _series(metrics, "acceptance_nonconstant"), "accepted", "tab:green")
    _line(accept, steps, _series(metrics, "uncertifiable"), "uncertifiable", "tab:red")
    accept.set(ylabel="share of non-constant groups", ylim=(-0.02, 1.02), title="What was trained on")
    _coverage_panel(cover, steps, metrics, alpha_a)
    _line(risk, steps, _series(metrics, "reversal_ref"), "w.r.t. the reference", "tab:blue")
    _line(risk, steps, _series(metrics, "reversal_true"), "w.r.t. the true score", "tab:orange")
    risk.axhline(alpha, color="k", ls="--", lw=1, label=f"α = {alpha:.2f}")
    risk.set(xlabel="step", ylabel="reversal rate of accepted groups", ylim=(-0.02, 1.02),
             title="(c) Does the gate hold its risk?")
    _line(knobs, steps, _series(metrics, "q"), "q (set radius)", "tab:purple")
    tau = _series(metrics, "tau")
    _line(knobs, steps, np.where(np.isfinite(tau), tau, np.nan), "τ̂ (gate threshold on λ*)", "tab:brown")
    knobs.set(xlabel="step", title="Calibrated quantities (τ̂ = ∞: nothing certified)")
    if not np.isfinite(_series(metrics, "reversal_ref")).any() and not np.isfinite(_series(metrics, "reversal_true")).any():
        risk.text(0.5, 0.5, "no group was accepted", transform=risk.transAxes, ha="center", color="grey")
    _shade_calibrating(axes, steps, metrics)
    for ax in axes.flat:
        ax.legend(fontsize=7, loc="best")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _coverage_panel(cover: Axes, steps: np.ndarray, metrics: list[dict[str, Any]], alpha_a: float) -> None:
    """Coverage of C w.r.t. the reference and the truth, against the level each step's set was chosen at
    (α_a is chosen inside the risk test from a grid, so the promise changes from step to step)."""
    _line(cover, steps, _series(metrics, "coverage_ref"), "w.r.t. the reference", "tab:blue")
    _line(cover, steps, _series(metrics, "coverage_true"), "w.r.t. the true score", "tab:orange")
    certified = np.isfinite(_series(metrics, "tau"))  # with nothing certified no set level was chosen
    chosen = np.where(certified, _series(metrics, "alpha_a"), np.nan)
    if np.isfinite(chosen).any():
        cover.step(steps, 1 - chosen, where="mid", color="k", ls="--", lw=1,
                   label="1 − α_a at the level chosen in each step")
    else:
        cover.axhline(1 - alpha_a, color="k", ls="--", lw=1, label=f"nominal 1 − α_a = {1 - alpha_a:.2f}")
    cover.set(ylabel="coverage of the set C", ylim=(-0.02, 1.02), title="(a) Does the set cover its chosen level?")


def _shade_calibrating(axes: np.ndarray, steps: np.ndarray, metrics: list[dict[str, Any]]) -> None:
    """Shade the leading steps in which nothing was certified (τ̂ = ∞): the window's D2 fold held too few
    groups for Learn-then-Test to certify the risk level, so no group could be accepted."""
    tau = _series(metrics, "tau")
    ready = np.flatnonzero(np.isfinite(tau))
    first = int(ready[0]) if ready.size else len(steps)
    if first == 0 or not len(steps):
        return
    end = steps[first] - 0.5 if first < len(steps) else steps[-1] + 0.5
    for ax in axes.flat:
        ax.axvspan(steps[0] - 0.5, end, color="grey", alpha=0.12, lw=0)
    axes[0, 1].text((steps[0] - 0.5 + end) / 2, 0.5, "window filling:\nnothing certified yet", ha="center",
                    va="center", fontsize=7, color="dimgrey")


@literal_text
def plot_overoptimisation(judge: np.ndarray, true: np.ndarray, path: Path, *, title: str, block: int = 20) -> None:
    """Judge and true score per step (mean over seeds, a band of ±1 SE), the block means on top
    (``overoptimisation``'s statistics drawn)."""
    fig = Figure(figsize=(7, 4))  # no pyplot, no backend: savefig renders with Agg
    ax = fig.subplots()
    steps = np.arange(1, judge.shape[1] + 1)
    for values, label, colour in ((judge, "judge's score", "tab:orange"), (true, "true score", "tab:blue")):
        mean = values.mean(axis=0)
        se = values.std(axis=0, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else np.zeros_like(mean)
        ax.plot(steps, mean, color=colour, lw=1, alpha=0.6)
        ax.fill_between(steps, mean - se, mean + se, color=colour, alpha=0.2)
        blocks = block_means(values, block).mean(axis=0)
        centres = np.arange(len(blocks)) * block + (block + 1) / 2
        ax.plot(centres, blocks, "o-", color=colour, lw=2, label=f"{label} ({block}-step means)")
    ax.set(xlabel="training step", ylabel="score of the training samples", title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


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


def evaluation_table(result: dict[str, Any], title: str) -> Table:
    """Per benchmark, per domain and macro true and judge scores of one evaluation."""
    table = Table(title=title)
    for column in ("benchmark", "domain", "true score", "judge score"):
        table.add_column(column, justify="right" if "score" in column else "left")
    for name, row in sorted(result["per_env"].items()):
        table.add_row(name, row["domain"], f"{row['true_score']:.3f} ± {row['true_score_se']:.3f}", f"{row['judge_score']:.3f}")
    for domain, row in result["domains"].items():
        table.add_row(f"[italic]{domain} mean", "", f"{row['true_score']:.3f}", f"{row['judge_score']:.3f}")
    table.add_row("[bold]macro", "", f"[bold]{result['macro_true_score']:.3f} ± {result['macro_true_score_se']:.3f}",
                  f"{result['macro_judge_score']:.3f}")
    return table
