"""The leaderboard: submissions in ``<board>/results/*.json`` → a ranked table (pandas), Markdown and a
static HTML page with plots that opens from disk (DESIGN §10). Nothing is skipped silently: every
file that cannot go on the board is listed with its reason."""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .. import __version__  # noqa: E402
from ..agents.config import parse_levels  # noqa: E402
from ..agents.presets import preset_paths  # noqa: E402
from ..agents.protocol import Protocol, load_protocol  # noqa: E402
from ..errors import SetgrpoBenchError  # noqa: E402
from ..harness.report import literal_text  # noqa: E402
from ..harness.rundir import write_texts  # noqa: E402
from .aggregate import SEED_LEVEL_SCHEMA  # noqa: E402
from .layout import ARCHIVED, RESULTS, RUNS, archive_note, archived_boards  # noqa: E402,F401 (the board's layout)
from .audit import NOT_REPRODUCED, describe, failure, latest_audit, runs_key  # noqa: E402
from .provenance import preset_problems  # noqa: E402
from .submission import check_submission  # noqa: E402
from .verify import verify_entry  # noqa: E402

def load_board(board: str | Path, runs: str | Path | None = None) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(accepted submissions, [(file, reason) for each rejected file]). Each entry is checked on its own
    (``check_submission``), against its preset when it was made under a protocol, against its runs
    under ``runs`` (default ``<board>/runs``) when they are there, and against its latest audit (an
    entry whose audit failed is rejected). An entry whose runs are absent is accepted with ``verified``
    False (the page lists it apart, unranked); two entries with the same runs are refused. On an
    archived board every entry must be rebuilt from its runs, which stand in for today's suite."""
    archived = archive_note(board) is not None
    runs = Path(board) / RUNS if runs is None else Path(runs)
    accepted, rejected, names = [], [], {}
    for path in sorted((Path(board) / RESULTS).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            rejected.append((path.name, f"not valid JSON, perhaps half-written ({exc})"))
            continue
        problems = check_submission(data, current=not archived)
        if not problems and data["name"] in names:
            problems = [f"duplicate of {names[data['name']]} (same name {data['name']!r})"]
        if not problems and not archived and "protocol" in data:  # a board compares presets, as publish checks
            problems = preset_problems({**data["config"], "seed": data["seeds"][0]})
        verdict = verify_entry(data, runs) if not problems else None
        problems += verdict or []
        if archived and not problems and verdict is None:
            problems = [f"its runs are not under {runs}: an archived board keeps only entries its runs reproduce"]
        audit = latest_audit(data, board) if not problems else None
        if audit is not None and audit["result"] == NOT_REPRODUCED:
            problems = [failure(audit)]
        if problems:
            rejected.append((path.name, "; ".join(problems)))
            continue
        names[data["name"]] = path.name
        accepted.append({**data, "verified": verdict is not None, "audit": audit, "file": path.name})
    return _one_entry_per_runs(accepted, rejected)


def _one_entry_per_runs(accepted: list[dict[str, Any]], rejected: list[tuple[str, str]]
                        ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Two entries with the same runs (their manifests) are one result counted twice: the first published
    of those rebuilt from runs on the board keeps them, every other is refused."""
    owners: dict[str, dict[str, Any]] = {}
    for entry in sorted(accepted, key=lambda e: (not e["verified"], e.get("date", ""), e["file"])):
        if "runs" in entry:
            owners.setdefault(runs_key(entry), entry)
    kept = []
    for entry in accepted:
        owner = owners.get(runs_key(entry)) if "runs" in entry else None
        if owner is not None and owner is not entry:
            rejected.append((entry["file"], f"has the same runs as {owner['file']}: an entry's runs are its own"))
        else:
            kept.append(entry)
    return kept, sorted(rejected)


def missing_cells(frame: pd.DataFrame, presets: Sequence[str], protocol: Protocol) -> list[str]:
    """What a complete board under ``protocol`` lacks (``Protocol.cells``; empty when complete)."""
    have = {(a, n): k for a, n, k in zip(frame["agent"], frame["noise"], frame["seeds"])} if not frame.empty else {}
    return [f"{a} under {n}: {have.get((a, n), 0)} of {k} seeds" for a, n, k in protocol.cells(presets)
            if have.get((a, n), 0) < k]


def still_to_run(frame: pd.DataFrame, submissions: list[dict[str, Any]]) -> list[str]:
    """The cells a live board still lacks under the protocol of its entries (this package's presets)."""
    ids = {s["protocol"]["id"] for s in submissions if "protocol" in s}
    if len(ids) != 1:
        return []
    try:
        protocol = load_protocol(ids.pop())
    except SetgrpoBenchError:
        return []
    return missing_cells(frame, sorted(preset_paths()), protocol)


def _fmt(value: Any, digits: int = 3) -> str:
    return "—" if value is None or value != value else f"{value:.{digits}f}"  # None or NaN: not measured


RATE_COLUMNS = {"coverage_ref": "coverage_ref", "coverage_true": "coverage_true", "risk_ref": "reversal_ref",
                "risk_true": "reversal_true"}
"""Board column → SetGRPO rate in a submission's diagnostics (with ``_low``/``_high``: its exact interval)."""


def _rate(frame: pd.DataFrame, column: str) -> list[str]:
    """A pooled rate with its Clopper–Pearson interval when the submission has one (schema 2)."""
    return [_fmt(r) if lo is None or lo != lo else f"{_fmt(r)} [{lo:.2f}, {hi:.2f}]"
            for r, lo, hi in zip(frame[column], frame[f"{column}_low"], frame[f"{column}_high"])]


def board_frame(submissions: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per submission, ranked by macro true score; oracle rows unranked at the bottom."""
    rows = []
    for s in submissions:
        d = s["diagnostics"]
        row = {
            "agent": s["agent"], "name": s["name"], "oracle": s["oracle"], "noise": s["suite"]["noise"],
            "seeds": len(s["seeds"]), "verified": bool(s.get("verified")),
            **{domain: g["true_score"] for domain, g in sorted(s["groups"].items())},
            "macro": s["macro"]["true_score"], "macro_se": s["macro"]["true_score_se"],
            "ci_low": s["macro"]["true_score_ci"][0], "ci_high": s["macro"]["true_score_ci"][1],
            "initial": s["macro"].get("initial_true_score"), "judge": s["macro"]["judge_score"],
            **{f"{column}{end}": d.get(f"{rate}{end}") for column, rate in RATE_COLUMNS.items() for end in ("", "_low", "_high")},
            "grader_calls_per_step": s["grader_calls_per_step"], "wall_time_s": s["wall_time_s"],
            "grader_cost_per_step": s.get("grader_cost_per_step", s["grader_calls_per_step"]),
            **{f"over_{k}": (s.get("overoptimisation") or {}).get(k) for k in ("drop", "drop_se", "judge_minus_true_end")},
        }
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["noise_order"] = frame["noise"].map(noise_order)
    frame = frame.sort_values(["noise_order", "oracle", "macro"], ascending=[True, True, False]).reset_index(drop=True)
    ranks = frame.groupby("noise_order").cumcount() + 1
    frame.insert(0, "rank", [str(r) if not o else "—" for r, o in zip(ranks, frame["oracle"])])
    return frame.drop(columns="noise_order")


PROFILE_ORDER = ("clean", "mild", "realistic", "harsh", "sparse", "verbose", "learned")
"""Judge profiles from the most to the least reliable; others follow in name order."""


def noise_order(noise: str) -> tuple[int, str]:
    return (PROFILE_ORDER.index(noise), "") if noise in PROFILE_ORDER else (len(PROFILE_ORDER), noise)


def _domains(frame: pd.DataFrame) -> list[str]:
    fixed = {"rank", "agent", "name", "oracle", "noise", "seeds", "verified", "macro", "macro_se", "ci_low", "ci_high", "initial",
             "judge", "grader_calls_per_step", "wall_time_s", "grader_cost_per_step", "over_drop", "over_drop_se",
             "over_judge_minus_true_end",
             *(f"{c}{end}" for c in RATE_COLUMNS for end in ("", "_low", "_high"))}
    return [c for c in frame.columns if c not in fixed]


BASELINE = "grpo"
"""The agent every other is compared with under the same judge profile."""


def versus_baseline(frame: pd.DataFrame) -> list[str]:
    """Each row's macro minus the baseline's (one judge profile's rows), in SEs of the difference
    √(SE² + SE_grpo²): the number that says whether an agent beats GRPO, not only where it ranks."""
    base = frame[(frame["agent"] == BASELINE) & ~frame["oracle"].astype(bool)]
    if base.empty:
        return ["—"] * len(frame)
    m0, se0 = float(base["macro"].iloc[0]), float(base["macro_se"].iloc[0])
    return ["—" if a == BASELINE and not o else f"{m - m0:+.3f}" + (f" ({(m - m0) / np.hypot(se, se0):+.1f} SE)"
                                                                      if np.hypot(se, se0) > 0 else "")
            for a, o, m, se in zip(frame["agent"], frame["oracle"], frame["macro"], frame["macro_se"])]


SEPARATION = 3.0
"""SEs of the difference to GRPO beyond which an agent wins or loses under a judge (within: a tie)."""


VERDICT_RULE = (f"Per judge profile: win / loss when the macro true score is at least {SEPARATION:g} SEs of the difference "
                f"above / below {BASELINE}'s under the same judge, tie within; in brackets the difference in SEs. An SE "
                "across 3 seeds has 2 degrees of freedom: a verdict from 3 seeds is a coarse one.")


def win_tie_loss(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per agent, one column per judge profile: ``win``, ``tie`` or ``loss`` against GRPO under
    that judge (beyond ±3 SEs of the difference √(SE² + SE_grpo²)), with the difference in SEs."""
    profiles = sorted(set(frame["noise"]), key=noise_order)
    cells: dict[str, dict[str, str]] = {}
    for profile in profiles:
        rows = frame[frame["noise"] == profile]
        base = rows[(rows["agent"] == BASELINE) & ~rows["oracle"].astype(bool)]
        for agent, oracle, m, se in zip(rows["agent"], rows["oracle"], rows["macro"], rows["macro_se"]):
            if agent == BASELINE or oracle:
                continue
            if base.empty:
                cells.setdefault(agent, {})[profile] = "no grpo"
                continue
            z = (m - float(base["macro"].iloc[0])) / max(float(np.hypot(se, base["macro_se"].iloc[0])), 1e-12)
            verdict = "win" if z >= SEPARATION else "loss" if z <= -SEPARATION else "tie"
            cells.setdefault(agent, {})[profile] = f"{verdict} ({z:+.1f})"
    return pd.DataFrame([{"agent": a, **{p: row.get(p, "") for p in profiles}} for a, row in sorted(cells.items())])


COLUMNS = {
    "macro ± SE [95% CI]": "held-out true rubric score, unweighted mean over benchmarks; SE across seeds of the seeds' "
                           "macro scores, sd/√S (a seed's policy moves every benchmark); CI by bootstrap over seeds",
    f"vs {BASELINE}": f"difference to {BASELINE} under the same judge, in SEs of the difference √(SE² + SE_{BASELINE}²)",
    "before training": "the same score of the initial policy",
    "coverage ref / true": "SetGRPO: share of audited (all) groups whose reference (true) coefficients lie in its set C, "
                           "pooled over seeds, exact 95% interval; against 1 − α_a",
    "risk ref / true": "SetGRPO: share of accepted groups whose executed update opposes the reference (true) one; against α",
    "true drop from peak ± SE": "the training batch's true score: its highest 20-step block mean minus its last, mean over "
                                "seeds ± SE (over-optimisation when positive while the judge's score rises)",
    "judge − true at end": "the judge's minus the true score of the training batch in the last 20-step block",
    "judge cost / step": "judge calls per step, a reference call counted at its cost",
    "wall time (s)": "seconds of training per run (sum of step times), mean over seeds",
    "runs": "whether the entry was rebuilt from its runs in runs/<entry name>/seed<k>/ by today's code",
}
"""What each board column means (the page and the README carry it)."""
INDEPENDENT_SE = ("held-out true rubric score, unweighted mean over benchmarks; SE across seeds √(Σ se_k²)/K (schema ≤ 4 "
                  "entries: it treats the benchmarks as independent, and so understates the spread a seed's policy "
                  "induces across them); CI by bootstrap over seeds")


def columns(submissions: list[dict[str, Any]]) -> dict[str, str]:
    """The column definitions for these entries: an archived board's older entries state their macro SE as
    √(Σ se_k²)/K, and the page says so."""
    if all(s.get("schema_version", 0) >= SEED_LEVEL_SCHEMA for s in submissions):
        return COLUMNS
    return {**COLUMNS, "macro ± SE [95% CI]": INDEPENDENT_SE}


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as shown (one judge profile's rows): formatted strings, oracle rows marked."""
    shown = pd.DataFrame({
        "rank": frame["rank"],
        "agent": [f"{a} (oracle, unranked)" if o else a for a, o in zip(frame["agent"], frame["oracle"])],
        **{d: frame[d].map(_fmt) for d in _domains(frame)},
        "macro ± SE [95% CI]": [f"{m:.3f} ± {se:.3f} [{lo:.3f}, {hi:.3f}]"
                                for m, se, lo, hi in zip(frame["macro"], frame["macro_se"], frame["ci_low"], frame["ci_high"])],
        f"vs {BASELINE}": versus_baseline(frame),
        "before training": frame["initial"].map(_fmt),
        "coverage ref / true": [f"{r} / {t}" for r, t in zip(_rate(frame, "coverage_ref"), _rate(frame, "coverage_true"))],
        "risk ref / true": [f"{r} / {t}" for r, t in zip(_rate(frame, "risk_ref"), _rate(frame, "risk_true"))],
        "true drop from peak ± SE": [_fmt(d) if se is None or se != se else f"{d:+.3f} ± {se:.3f}"
                                     for d, se in zip(frame["over_drop"], frame["over_drop_se"])],
        "judge − true at end": frame["over_judge_minus_true_end"].map(lambda v: _fmt(v) if v is None or v != v else f"{v:+.3f}"),
        "judge cost / step": frame["grader_cost_per_step"].map(lambda v: f"{v:,.0f}"),
        "wall time (s)": frame["wall_time_s"].map(lambda v: f"{v:.0f}"),
        "seeds": frame["seeds"].astype(str),
        "runs": ["rebuilt from its runs" if v else "unverified (runs not here)" for v in frame["verified"]],
    })
    return shown


def summary_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The compact table of one judge profile's rows (``leaderboard show``): rank, agent (``*`` for an
    oracle), macro ± SE, and SetGRPO's coverage and risk w.r.t. the reference / the true score."""
    shown = _display(frame)[["rank", "agent"]]
    shown["agent"] = [f"{a}*" if o else a for a, o in zip(frame["agent"], frame["oracle"])]
    shown["macro ± SE"] = [f"{m:.3f} ± {se:.3f}" for m, se in zip(frame["macro"], frame["macro_se"])]
    shown["cover r/t"] = [f"{_fmt(r, 2)}/{_fmt(t, 2)}" for r, t in zip(frame["coverage_ref"], frame["coverage_true"])]
    shown["risk r/t"] = [f"{_fmt(r, 2)}/{_fmt(t, 2)}" for r, t in zip(frame["risk_ref"], frame["risk_true"])]
    return shown


def _markdown_table(shown: pd.DataFrame) -> list[str]:
    return (["| " + " | ".join(shown.columns) + " |", "|" + "|".join("---" for _ in shown.columns) + "|"]
            + ["| " + " | ".join(row) + " |" for row in shown.astype(str).values.tolist()])


def protocols_of(submissions: list[dict[str, Any]]) -> list[str]:
    """The protocols the entries were made under, with what each fixes."""
    out = []
    for pid in sorted({s["protocol"]["id"] for s in submissions if "protocol" in s}):
        try:
            protocol = load_protocol(pid)
        except SetgrpoBenchError:
            out.append(f"{pid} (its file is not in this checkout)")
            continue
        settings = ", ".join(f"{k} {v}" for k, v in protocol.settings.items())
        cells = [f"core agents ({', '.join(protocol.core)}) under every profile" if protocol.core else "",
                 f"the other presets under the main profiles with {protocol.preset_seeds or protocol.seeds} seeds"
                 if protocol.core else "",
                 f"once, under {protocol.mains[0]} only (their policy does not depend on the judge): {', '.join(protocol.once)}"
                 if protocol.once else ""]
        out.append(f"{pid}: {settings}; judge profiles {', '.join(protocol.noise)}; main {', '.join(protocol.mains)} "
                   f"({protocol.seeds} seeds), others {protocol.other_seeds} seeds"
                   + "".join(f"; {c}" for c in cells if c) + f" — {protocol.description}")
    return out


def entry_provenance(submissions: list[dict[str, Any]]) -> pd.DataFrame:
    """Each entry's origin: the command, the code (package version, git hash, plugins) and its runs."""
    return pd.DataFrame([{
        "entry": s["name"], "seeds": ", ".join(map(str, s["seeds"])), "package": s["versions"]["package"],
        "git": (s.get("git_hash") or "—")[:10],
        "plugins": ", ".join(f"{p['name']} {p['version']} ({p['source_hash'][:10]})" for p in s.get("plugins", [])) or "—",
        "runs": "rebuilt from its runs" if s.get("verified") else "unverified (runs not here)",
        "audit (re-execution)": describe(s.get("audit")),
        "command": s.get("command", "—"),
    } for s in submissions])


APART = ("Entries whose runs are not on this board: their numbers could not be rebuilt from runs, so they are "
         "not ranked and not in the verdicts.")


def apart_frame(submissions: list[dict[str, Any]]) -> pd.DataFrame:
    """The entries listed apart (no runs on the board): name, judge, seeds and their claimed macro score."""
    return pd.DataFrame([{"entry": s["name"], "agent": s["agent"], "judge": s["suite"]["noise"],
                          "seeds": ", ".join(map(str, s["seeds"])),
                          "claimed macro ± SE": f"{s['macro']['true_score']:.3f} ± {s['macro']['true_score_se']:.3f}"}
                         for s in submissions])


def markdown(frame: pd.DataFrame, rejected: list[tuple[str, str]], submissions: list[dict[str, Any]], *,
             note: str | None = None, earlier: Sequence[str] = (), missing: Sequence[str] = (),
             apart: Sequence[dict[str, Any]] = ()) -> str:
    """The board as Markdown; ``note`` (an archived board's) opens it, ``earlier`` boards are linked. It
    opens with where each method wins, ties or loses against GRPO, then one table per judge profile,
    the column definitions, the protocol with the cells it still lacks, and each entry's provenance."""
    lines = ["# setgrpo_bench leaderboard", ""]
    if note:
        lines += [note, ""]
    if earlier:
        lines += ["Earlier boards: " + ", ".join(f"[{name}]({name}/README.md)" for name in earlier), ""]
    if frame.empty:
        lines.append("No submissions yet.")
    else:
        profiles = sorted(set(frame["noise"]), key=noise_order)
        verdicts = win_tie_loss(frame)
        if not verdicts.empty:
            lines += [f"## Where each method wins, ties or loses against {BASELINE}", "", VERDICT_RULE, "",
                      *_markdown_table(verdicts), ""]
        for profile in profiles:
            lines += [f"## Judge profile `{profile}`", "", *_markdown_table(_display(frame[frame["noise"] == profile])), ""]
        lines += ["## Columns", "", *(f"- **{k}**: {v}" for k, v in columns(submissions).items()),
                  "- the domain columns: the mean true score of the domain's benchmarks", ""]
        if protocols := protocols_of(submissions):
            lines += ["## Protocol", "", *(f"- {p}" for p in protocols), ""]
        if missing:
            lines += [f"Not yet on the board ({len(missing)} cells): " + "; ".join(missing) + ".", ""]
        lines += ["## Provenance", "", *_markdown_table(entry_provenance(submissions))]
        if note := provenance(submissions):
            lines += ["", f"**{note}**"]
    if apart:
        lines += ["", "## Not ranked: runs not on this board", "", APART, "", *_markdown_table(apart_frame(list(apart)))]
    if rejected:
        lines += ["", "## Rejected files", ""] + [f"- `{f}`: {reason}" for f, reason in rejected]
    return "\n".join(lines) + "\n"


def provenance(submissions: list[dict[str, Any]]) -> str | None:
    """A note when results were made by another package version than this one (their numbers
    reproduce seed for seed only with the version that made them); None when all match."""
    made = sorted({s["versions"]["package"] for s in submissions})
    if not made or made == [__version__]:
        return None
    return (f"Results made by setgrpo_bench {', '.join(made)}; this checkout is {__version__}. Numbers reproduce "
            "seed for seed only with the version that made them: rerun the sweep to refresh the board.")


def _png(fig: plt.Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _colours(submissions: list[dict[str, Any]]) -> dict[str, Any]:
    """One colour per agent, the same in every plot: tab20's ten distinct hues first, then their light
    variants (tab20 pairs them, which put two agents of a small board in one hue)."""
    pairs = plt.get_cmap("tab20").colors
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
    """Base64 PNGs: macro with CI bars, learning curves, coverage calibration, risk vs α."""
    out = {}
    colour = _colours(submissions)
    profiles = sorted(set(frame["noise"]), key=noise_order)
    heights = [int((frame["noise"] == p).sum()) for p in profiles]
    fig, axes = plt.subplots(len(profiles), 1, figsize=(7, 0.45 * len(frame) + 1.0 * len(profiles) + 0.4),
                             sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})
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
    out["macro"] = _png(fig)
    columns = min(2, len(profiles))
    grid = -(-len(profiles) // columns)
    fig, axes = plt.subplots(grid, columns, figsize=(6 * columns + 2, 3.6 * grid), sharey=True, squeeze=False)
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
    out["curves"] = _png(fig)
    out["overoptimisation"] = overoptimisation_plot(submissions, profiles, colour)
    calibrated = sorted((s for s in submissions if s["diagnostics"].get("coverage_ref") is not None),
                        key=lambda s: (noise_order(s["suite"]["noise"]), s["agent"]))
    fig, (left, right) = plt.subplots(2, 1, figsize=(max(7.0, 0.55 * len(calibrated) + 3), 7), sharex=True)
    labelled: set[str] = set()

    def once(label: str) -> str | None:
        """A legend label the first time it is drawn, none after."""
        fresh = label not in labelled
        labelled.add(label)
        return label if fresh else None

    for k, s in enumerate(calibrated):  # one column per (agent, profile); its nominal level as a short bar
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
    out["calibration"] = _png(fig)
    if len(profiles) > 1:
        out["robustness"] = robustness_plot(frame, profiles, colour)
    return out


def overoptimisation_plot(submissions: list[dict[str, Any]], profiles: list[str], colour: dict[str, Any]) -> str:
    """Per judge profile, each agent's judge score (dashed) and true score (solid) of its training batch
    per step: 5-step means over seeds, a band of ±1 SE across seeds where the entry has it."""
    columns = min(2, len(profiles))
    rows = -(-len(profiles) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns + 2, 3.6 * rows), squeeze=False)
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
    fig, ax = plt.subplots(figsize=(11, 5))
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


def html_page(frame: pd.DataFrame, rejected: list[tuple[str, str]], submissions: list[dict[str, Any]], *,
              note: str | None = None, earlier: Sequence[str] = (), missing: Sequence[str] = (),
              apart: Sequence[dict[str, Any]] = ()) -> str:
    """A self-contained page: the table and plots inline, no scripts, no network."""
    body = ["<h1>setgrpo_bench leaderboard</h1>"]
    if note:
        body += [f"<p class='archived'>{html.escape(paragraph)}</p>" for paragraph in note.split("\n\n")]
    if earlier:
        body.append("<p>Earlier boards: " + ", ".join(
            f"<a href='{html.escape(name)}/index.html'>{html.escape(name)}</a>" for name in earlier) + "</p>")
    if frame.empty:
        body.append("<p>No submissions yet.</p>")
    else:
        if note := provenance(submissions):
            body.append(f"<p><strong>{html.escape(note)}</strong></p>")
        figures = plots(frame, submissions)
        figure = lambda key: f'<figure><img id="plot-{key}" alt="{key}" src="data:image/png;base64,{figures.pop(key)}"></figure>'  # noqa: E731
        verdicts = win_tie_loss(frame)
        if not verdicts.empty:
            body.append(f"<h2>Where each method wins, ties or loses against {BASELINE}</h2><p>{html.escape(VERDICT_RULE)}</p>"
                        + verdicts.to_html(index=False, escape=True, classes="board", border=0))
        if "robustness" in figures:
            body.append(figure("robustness"))
        profiles = sorted(set(frame["noise"]), key=noise_order)
        for profile in profiles:
            body.append(f"<h2>Judge profile <code>{html.escape(profile)}</code></h2>")
            body.append(_display(frame[frame["noise"] == profile]).to_html(index=False, escape=True, classes="board", border=0))
        body += [figure(key) for key in list(figures)]
        body.append("<h2>Columns</h2><dl>" + "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>"
                                                      for k, v in columns(submissions).items()) + "</dl>")
        if protocols := protocols_of(submissions):
            body.append("<h2>Protocol</h2><ul>" + "".join(f"<li>{html.escape(p)}</li>" for p in protocols) + "</ul>")
        if missing:
            body.append(f"<p id='missing'>Not yet on the board ({len(missing)} cells): {html.escape('; '.join(missing))}.</p>")
        body.append("<h2>Provenance</h2>" + entry_provenance(submissions).to_html(index=False, escape=True, classes="board",
                                                                                 border=0))
    if apart:
        body.append(f"<h2 id='apart'>Not ranked: runs not on this board</h2><p>{html.escape(APART)}</p>"
                    + apart_frame(list(apart)).to_html(index=False, escape=True, classes="board", border=0))
    if rejected:
        body.append("<h2>Rejected files</h2><ul>" + "".join(
            f"<li><code>{html.escape(f)}</code>: {html.escape(r)}</li>" for f, r in rejected) + "</ul>")
    style = ("body{font-family:sans-serif;margin:2em}table.board{border-collapse:collapse;font-size:13px}"
             "table.board td,table.board th{padding:4px 8px;border-bottom:1px solid #ddd;text-align:right}"
             "img{max-width:100%}dt{font-weight:bold}dd{margin:0 0 .5em 1.5em}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>setgrpo_bench leaderboard</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def build_board(board: str | Path, runs: str | Path | None = None) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Write ``README.md`` and ``index.html`` of the board (entries checked against ``runs``, default
    ``<board>/runs``), both or neither; returns (table of the ranked entries, rejected files). Entries
    whose runs are not on the board are listed apart, unranked."""
    board = Path(board)
    submissions, rejected = load_board(board, runs)
    apart = [s for s in submissions if not s["verified"]]
    ranked = [s for s in submissions if s["verified"]]
    frame = board_frame(ranked)
    ordered = sorted(ranked, key=lambda s: list(frame["name"]).index(s["name"])) if ranked else []
    note = archive_note(board)
    context = {"note": note, "earlier": [p.name for p in archived_boards(board)],
               "missing": [] if note else still_to_run(frame, ranked), "apart": apart}
    write_texts({board / "README.md": markdown(frame, rejected, ordered, **context),
                 board / "index.html": html_page(frame, rejected, ordered, **context)})
    return frame, rejected
