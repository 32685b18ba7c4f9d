"""The board's figures, drawn on ``matplotlib.figure.Figure`` objects (no pyplot, no backend switched:
importing this changes no global state) and returned as base64 PNGs for a self-contained page."""

from __future__ import annotations

import base64
import io
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..agents.fields import parse_levels
from ..harness.report import literal_text
from .verdicts import noise_order


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode()


def _figure(size: tuple[float, float]) -> Figure:
    """A figure of ``size`` inches, on no backend (``savefig`` renders it with Agg)."""
    return Figure(figsize=size)


def _colours(submissions: list[dict[str, Any]]) -> dict[str, Any]:
    """One colour per agent, the same in every plot: tab20's ten distinct hues first, then their light
    variants (tab20 pairs them, which put two agents of a small board in one hue)."""
    pairs = matplotlib.colormaps["tab20"].colors
    palette = pairs[0::2] + pairs[1::2]
    agents = list(dict.fromkeys(s["agent"] for s in submissions))
    return {agent: palette[i % len(palette)] for i, agent in enumerate(agents)}


def _bars(rows: pd.DataFrame) -> list[np.ndarray]:
    """The CI as error-bar lengths below and above the estimate (a CI of identical seeds, [m, m], can sit a
    rounding error inside its estimate; a length is never negative)."""
    return [np.maximum(0.0, (rows["macro"] - rows["ci_low"]).to_numpy(float)),
            np.maximum(0.0, (rows["ci_high"] - rows["macro"]).to_numpy(float))]


@literal_text
def plots(frame: pd.DataFrame, submissions: list[dict[str, Any]]) -> dict[str, str]:
    """Base64 PNGs: macro with CI bars, learning curves, over-optimisation, coverage and risk against
    their levels, and (with several judges) the robustness plot."""
    colour = _colours(submissions)
    profiles = sorted(set(frame["noise"]), key=noise_order)
    out = {"macro": macro_plot(frame, profiles), "curves": curves_plot(submissions, profiles, colour),
           "overoptimisation": overoptimisation_plot(submissions, profiles, colour),
           "calibration": calibration_plot(submissions)}
    if len(profiles) > 1:
        out["robustness"] = robustness_plot(frame, profiles, colour)
    if any("held_out" in s for s in submissions):
        out["held_out"] = held_out_plot(submissions, profiles, colour)
    return out


def held_out_plot(submissions: list[dict[str, Any]], profiles: list[str], colour: dict[str, Any]) -> str:
    """Per training judge, each agent's held-out curve (dev instances every 20 steps, mean ± SE over seeds)."""
    shown = [p for p in profiles if any("held_out" in s and s["suite"]["noise"] == p for s in submissions)]
    fig = _figure((6 * len(shown) + 2, 4))
    axes = fig.subplots(1, len(shown), sharey=True, squeeze=False)
    for ax, profile in zip(axes.flat, shown):
        for s in submissions:
            if s["suite"]["noise"] == profile and "held_out" in s:
                h = s["held_out"]
                mean, se = np.array(h["true_score"]), np.array(h["true_score_se"])
                ax.plot(h["step"], mean, "o-", label=s["agent"], color=colour[s["agent"]], ms=3)
                ax.fill_between(h["step"], mean - se, mean + se, color=colour[s["agent"]], alpha=0.15)
        ax.set(xlabel="step", ylabel="held-out true score (dev)", title=f"judge profile {profile}")
        ax.tick_params(labelleft=True)
    labels = {label: handle for ax in axes.flat for handle, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(labels.values(), labels.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 0.95))
    fig.suptitle("Held-out curves (mean ± SE over seeds; a stopped run keeps its last point)")
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return _png(fig)


def macro_plot(frame: pd.DataFrame, profiles: list[str]) -> str:
    """One panel per training judge, each agent's macro true score with its 95% CI."""
    heights = [int((frame["noise"] == p).sum()) for p in profiles]
    fig = _figure((7, 0.45 * len(frame) + 1.0 * len(profiles) + 0.4))
    axes = fig.subplots(len(profiles), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax, profile in zip(axes[:, 0], profiles):  # one panel per training judge: an agent appears once in each
        rows = frame[frame["noise"] == profile]
        y = list(range(len(rows)))[::-1]
        ax.errorbar(rows["macro"], y, xerr=_bars(rows),
                    fmt="o", capsize=3)
        ax.set_yticks(y, [f"{a}{' (oracle)' if o else ''}" for a, o in zip(rows["agent"], rows["oracle"])])
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_title(f"judge profile {profile}", fontsize=10)
    for ax in axes[:, 0]:  # every panel keeps its own score axis, not only the bottom one
        ax.tick_params(labelbottom=True)
        ax.set_xlabel("macro true score (95% CI)", fontsize=8)
    fig.suptitle("Macro true score by agent")
    fig.tight_layout(rect=(0, 0, 1, 0.97))  # the title above the first panel's
    return _png(fig)


def curves_plot(submissions: list[dict[str, Any]], profiles: list[str], colour: dict[str, Any]) -> str:
    """Per training judge, each agent's true score of its training batch per step (5-step means)."""
    columns = min(2, len(profiles))
    grid = -(-len(profiles) // columns)
    fig = _figure((6 * columns + 2, 3.6 * grid))
    axes = fig.subplots(grid, columns, sharey=True, squeeze=False)
    for ax, profile in zip(axes.flat, profiles):
        for s in submissions:  # moving mean over 5 steps: one step's batch is 16 prompts
            if s["suite"]["noise"] == profile:
                values = pd.Series(s["curves"]["true_score"]).rolling(5, min_periods=1).mean()
                ax.plot(s["curves"]["step"], values, label=s["agent"], color=colour[s["agent"]], alpha=0.9)
        ax.set(xlabel="step", ylabel="train true score (5-step mean)", title=f"judge profile {profile}")
        ax.tick_params(labelleft=True)
    for ax in axes.flat[len(profiles):]:
        ax.set_visible(False)
    labels = {label: handle for ax in axes.flat for handle, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(labels.values(), labels.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 0.95))
    fig.suptitle("Learning curves (mean over seeds)")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return _png(fig)


def calibration_plot(submissions: list[dict[str, Any]]) -> str:
    """SetGRPO's pooled coverage of C and reversal risk of accepted groups, with their exact intervals,
    one column per (agent, judge), against the levels it promised."""
    calibrated = sorted((s for s in submissions if s["diagnostics"].get("coverage_ref") is not None),
                        key=lambda s: (noise_order(s["suite"]["noise"]), s["agent"]))
    fig = _figure((max(7.0, 0.55 * len(calibrated) + 3), 7))
    left, right = fig.subplots(2, 1, sharex=True)
    labelled: set[str] = set()

    def once(label: str) -> str | None:
        """A legend label the first time it is drawn, none after."""
        fresh = label not in labelled
        labelled.add(label)
        return label if fresh else None

    for k, s in enumerate(calibrated):  # one column per (agent, profile); its nominal level as a short bar
        _calibration_column(left, right, k, s, once)
    left.set(ylabel="coverage of C", title="Coverage of C (pooled over seeds, 95% Clopper–Pearson)", ylim=(0, 1))
    right.set(ylabel="reversal rate of accepted groups",
              title="Reversal risk of accepted groups (pooled, 95% Clopper–Pearson)", ylim=(0, 0.5))
    right.set_xticks(range(len(calibrated)), [f"{s['agent']} ({s['suite']['noise']})" for s in calibrated],
                     rotation=40, ha="right", fontsize=7)
    if calibrated:  # one legend for both panels: the same markers
        handles = [h for ax in (left, right) for h in zip(*ax.get_legend_handles_labels())]
        left.legend([h for h, _ in handles], [label for _, label in handles], fontsize=7, loc="upper left",
                    bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _png(fig)


def _calibration_column(left: Any, right: Any, k: int, s: dict[str, Any], once: Any) -> None:
    """Column ``k`` of the calibration plot: one entry's coverage (left) and risk (right)."""
    d = s["diagnostics"]
    levels = parse_levels(s["config"].get("alpha_a_grid") or "")
    if levels:  # α_a chosen per step inside the risk test: the levels it chooses from, dotted
        left.hlines([1 - a for a in levels], k - 0.4, k + 0.4, colors="grey", linestyles=":", lw=1,
                    label=once("1 − α_a it may choose"))
    for ax, nominal, rates in ((left, None if levels else 1 - s["config"]["alpha_a"], ("coverage_ref", "coverage_true")),
                               (right, s["config"]["alpha"], ("reversal_ref", "reversal_true"))):
        if nominal is not None:
            ax.hlines(nominal, k - 0.4, k + 0.4, colors="k", linestyles="--", lw=1,
                      label=once("nominal (1 − α_a, α)"))
        for rate, marker, shift, seen in ((rates[0], "o", -0.12, "w.r.t. reference"), (rates[1], "x", 0.12, "w.r.t. true score")):
            value, low, high = d.get(rate), d.get(f"{rate}_low"), d.get(f"{rate}_high")
            if value is None:
                continue
            bars = None if low is None else [[value - low], [high - value]]  # Clopper–Pearson 95% (schema 2)
            ax.errorbar([k + shift], [value], yerr=bars, fmt=marker, color="C0" if marker == "o" else "C3",
                        capsize=2, label=once(seen))


def overoptimisation_plot(submissions: list[dict[str, Any]], profiles: list[str], colour: dict[str, Any]) -> str:
    """Per judge profile, each agent's judge score (dashed) and true score (solid) of its training batch
    per step: 5-step means over seeds, a band of ±1 SE across seeds where the entry has it."""
    columns = min(2, len(profiles))
    rows = -(-len(profiles) // columns)
    fig = _figure((6 * columns + 2, 3.6 * rows))
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax, profile in zip(axes.flat, profiles):
        for s in (s for s in submissions if s["suite"]["noise"] == profile):
            curves, steps = s["curves"], s["curves"]["step"]
            for key, style in (("true_score", "-"), ("reward", "--")):
                mean = pd.Series(curves[key]).rolling(5, min_periods=1).mean()
                ax.plot(steps, mean, style, color=colour[s["agent"]], lw=1.2,
                        label=s["agent"] if key == "true_score" else None)
                if f"{key}_se" in curves:
                    se = pd.Series(curves[f"{key}_se"]).rolling(5, min_periods=1).mean()
                    ax.fill_between(steps, mean - se, mean + se, color=colour[s["agent"]], alpha=0.12, lw=0)
        ax.set(xlabel="step", ylabel="score of the training batch", title=f"judge profile {profile}")
        ax.tick_params(labelbottom=True, labelleft=True)
    for ax in axes.flat[len(profiles):]:
        ax.set_visible(False)
    labels = {label: handle for ax in axes.flat for handle, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(labels.values(), labels.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 0.95),
               title="solid: true score\ndashed: judge's score", title_fontsize=7)
    fig.suptitle("Over-optimisation: the judge's and the true score per step (mean over seeds, ±1 SE)")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return _png(fig)


def robustness_plot(frame: pd.DataFrame, profiles: list[str], colour: dict[str, Any]) -> str:
    """Macro true score against the training judge's profile, one line per agent, 95% CI bars."""
    fig = _figure((11, 5))
    ax = fig.subplots()
    x = {p: i for i, p in enumerate(profiles)}
    trained = sorted(frame.loc[~frame["oracle"].astype(bool), "agent"].unique())
    for agent, rows in frame.groupby("agent", sort=True):
        rows = rows.sort_values("noise", key=lambda n: n.map(noise_order))
        if rows["oracle"].all():  # trained on the true score: one policy whatever the judge, a ceiling line
            top = rows.iloc[0]
            ax.axhline(top["macro"], color=colour.get(agent), ls="--", lw=1, label=f"{agent} (oracle, any judge)")
            ax.axhspan(top["ci_low"], top["ci_high"], color=colour.get(agent), alpha=0.15, lw=0)
            continue
        # every profile on the axis, NaN where the agent has no entry: a line never bridges a missing cell
        rows = rows.set_index("noise").reindex(profiles)
        shift = 0.5 * (trained.index(agent) / max(len(trained) - 1, 1) - 0.5)  # agents side by side, ±0.25
        xs = [x[n] + shift for n in profiles]
        ax.errorbar(xs, rows["macro"], yerr=_bars(rows),
                    fmt="o-", ms=4, capsize=2, color=colour.get(agent),
                    label=f"{agent}{' (oracle)' if rows['oracle'].any() else ''}")
    ax.set_xticks(range(len(profiles)), profiles)
    ax.set(xlabel="training judge profile (more reliable → less)", ylabel="macro true score (95% CI)",
           title="Robustness to judge noise")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _png(fig)
