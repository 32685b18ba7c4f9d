"""A board as tables: one row per entry (pandas), ranked per judge profile, and the strings the pages
show — scores, rates with their intervals, provenance, the column definitions (DESIGN §10)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .. import __version__
from ..agents.protocol import load_protocol
from ..errors import SetgrpoBenchError
from .aggregate import SEED_LEVEL_SCHEMA
from .audit import describe
from .load import entries_protocol
from .verdicts import BASELINE, noise_order, versus_baseline


def _fmt(value: Any, digits: int = 3) -> str:
    return "—" if value is None or value != value else f"{value:.{digits}f}"  # None or NaN: not measured


RATE_COLUMNS = {"coverage_ref": "coverage_ref", "coverage_true": "coverage_true", "risk_ref": "reversal_ref",
                "risk_true": "reversal_true"}
"""Board column → SetGRPO rate in a submission's diagnostics (with ``_low``/``_high``: its exact interval)."""


def _rate(frame: pd.DataFrame, column: str) -> list[str]:
    """A pooled rate with its Clopper–Pearson interval when the submission has one (schema 2)."""
    return [_fmt(r) if lo is None or lo != lo else f"{_fmt(r)} [{lo:.2f}, {hi:.2f}]"
            for r, lo, hi in zip(frame[column], frame[f"{column}_low"], frame[f"{column}_high"])]


def seed_macros(submission: dict[str, Any]) -> list[float]:
    """Each seed's macro true score: the mean over benchmarks of its per-benchmark scores (none for an
    archived entry that kept only the means)."""
    per_bench = [r.get("per_seed", []) for r in submission["results"].values()]
    return [float(np.mean(scores)) for scores in zip(*per_bench)]


def board_frame(submissions: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per submission, ranked by macro true score; oracle rows unranked at the bottom."""
    rows = []
    for s in submissions:
        d = s["diagnostics"]
        row = {
            "agent": s["agent"], "name": s["name"], "oracle": s["oracle"], "noise": s["suite"]["noise"],
            "seeds": len(s["seeds"]), "verified": bool(s.get("verified")),
            **{domain: g["true_score"] for domain, g in sorted(s["groups"].items())},
            "macro": s["macro"]["true_score"], "macro_se": s["macro"]["true_score_se"], "per_seed": seed_macros(s),
            "ci_low": s["macro"]["true_score_ci"][0], "ci_high": s["macro"]["true_score_ci"][1],
            "initial": s["macro"].get("initial_true_score"), "judge": s["macro"]["judge_score"],
            **{f"{column}{end}": d.get(f"{rate}{end}") for column, rate in RATE_COLUMNS.items() for end in ("", "_low", "_high")},
            "grader_calls_per_step": s["grader_calls_per_step"], "wall_time_s": s["wall_time_s"],
            "grader_cost_per_step": s.get("grader_cost_per_step", s["grader_calls_per_step"]),
            **{f"over_{k}": (s.get("overoptimisation") or {}).get(k) for k in ("drop", "drop_se", "judge_minus_true_end")},
            **{f"held_{k}": (s.get("held_out") or {}).get(k) for k in ("peak_step", "drop", "drop_se")},
            "stops": s.get("stopped_at_step"),
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


def _domains(frame: pd.DataFrame) -> list[str]:
    fixed = {"rank", "agent", "name", "oracle", "noise", "seeds", "verified", "macro", "macro_se", "per_seed", "ci_low", "ci_high",
             "initial",
             "judge", "grader_calls_per_step", "wall_time_s", "grader_cost_per_step", "over_drop", "over_drop_se",
             "over_judge_minus_true_end", "held_peak_step", "held_drop", "held_drop_se", "stops",
             *(f"{c}{end}" for c in RATE_COLUMNS for end in ("", "_low", "_high"))}
    return [c for c in frame.columns if c not in fixed]


COLUMNS = {
    "macro ± SE [95% CI]": "held-out true rubric score, unweighted mean over benchmarks; SE across seeds of the seeds' "
                           "macro scores, sd/√S (a seed's policy moves every benchmark); CI by bootstrap over seeds",
    f"vs {BASELINE}": f"difference to {BASELINE}'s macro under the same judge (whether it is a win: the verdicts)",
    "before training": "the same score of the initial policy",
    "coverage ref / true": "SetGRPO: share of audited (all) groups whose reference (true) coefficients lie in its set C, "
                           "pooled over seeds, exact 95% interval; against 1 − α_a",
    "risk ref / true": "SetGRPO: share of accepted groups whose executed update opposes the reference (true) one; against α",
    "true drop from peak ± SE": "the training batch's true score: its highest 20-step block mean minus its last, mean over "
                                "seeds ± SE (over-optimisation when positive while the judge's score rises)",
    "judge − true at end": "the judge's minus the true score of the training batch in the last 20-step block",
    "held-out drop from peak ± SE": "the held-out curve (the policy's true score on 16 dev instances per benchmark every 20 "
                                    "steps): its peak (mean over seeds, step in brackets) minus its end, mean over seeds ± SE",
    "stopped at": "the step each seed's stopping rule ended training at (— : it ran every step)",
    "judge cost / step": "judge calls per step, a reference call counted at its cost",
    "wall time (s)": "seconds of training per run (sum of step times), mean over seeds",
    "runs": "whether the entry was rebuilt from its runs in runs/<entry name>/seed<k>/ by today's code",
}
"""What each board column means (both pages carry it)."""


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
        "held-out drop from peak ± SE": [_fmt(d) if d is None or d != d else f"{d:+.3f} ± {se:.3f} ({int(k)})"
                                         for d, se, k in zip(frame["held_drop"], frame["held_drop_se"], frame["held_peak_step"])],
        "stopped at": [", ".join("—" if s is None else str(s) for s in stops) if isinstance(stops, list) else "—"
                       for stops in frame["stops"]],
        "judge cost / step": frame["grader_cost_per_step"].map(lambda v: f"{v:,.0f}"),
        "wall time (s)": frame["wall_time_s"].map(lambda v: f"{v:.0f}"),
        "seeds": frame["seeds"].astype(str),
        "runs": ["rebuilt from its runs" if v else "unverified (runs not here)" for v in frame["verified"]],
    })
    return shown


def judge_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One judge profile's table as a page shows it: its entries, then the untrained policy (the floor)."""
    shown = _display(frame)
    return pd.concat([shown, _floor_row(frame, shown.columns)], ignore_index=True)


def _floor_row(frame: pd.DataFrame, columns: pd.Index) -> pd.DataFrame:
    """The untrained policy as the table's last row: the floor every method is read against (its macro
    before training, the mean over the seeds of the baseline's entry, else of the first entry)."""
    base = frame[(frame["agent"] == BASELINE) & ~frame["oracle"].astype(bool)]
    initial = (base if not base.empty else frame)["initial"].iloc[0]
    if initial is None or initial != initial:
        return pd.DataFrame(columns=columns)
    row = dict.fromkeys(columns, "")
    row.update({"rank": "—", "agent": "untrained policy (the floor)", "macro ± SE [95% CI]": f"{initial:.3f}",
                f"vs {BASELINE}": "—" if base.empty else f"{initial - float(base['macro'].iloc[0]):+.3f}"})
    return pd.DataFrame([row], columns=columns)


def summary_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The compact table of one judge profile's rows (``leaderboard show``): rank, agent (``*`` for an
    oracle), macro ± SE, and SetGRPO's coverage and risk w.r.t. the reference / the true score."""
    shown = _display(frame)[["rank", "agent"]]
    shown["agent"] = [f"{a}*" if o else a for a, o in zip(frame["agent"], frame["oracle"])]
    shown["macro ± SE"] = [f"{m:.3f} ± {se:.3f}" for m, se in zip(frame["macro"], frame["macro_se"])]
    shown["cover r/t"] = [f"{_fmt(r, 2)}/{_fmt(t, 2)}" for r, t in zip(frame["coverage_ref"], frame["coverage_true"])]
    shown["risk r/t"] = [f"{_fmt(r, 2)}/{_fmt(t, 2)}" for r, t in zip(frame["risk_ref"], frame["risk_true"])]
    return shown


def controls_of(submissions: list[dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """The methods the entries' protocol sets beside its controls (none when the entries follow several
    protocols, or one whose file is not in this checkout)."""
    protocol = entries_protocol(submissions)
    return {} if protocol is None else dict(protocol.controls)


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
        outside = {*protocol.core, *protocol.once, *(a for agents, _ in protocol.extra for a in agents)}
        others = bool(protocol.core) and (not protocol.presets or bool(set(protocol.presets) - outside))
        cells = [f"core agents ({', '.join(protocol.core)}) under every profile" if protocol.core else "",
                 f"the other presets under the main profiles with {protocol.preset_seeds or protocol.seeds} seeds"
                 if others else "",
                 f"once, under {protocol.mains[0]} only (their policy does not depend on the judge): {', '.join(protocol.once)}"
                 if protocol.once else "",
                 *(f"{', '.join(agents)} under {', '.join(profiles)} only" for agents, profiles in protocol.extra),
                 *(f"{agent}'s verdicts against {', '.join(against)} too" for agent, against in protocol.controls.items())]
        exceptions = ("; instead " + ", ".join(f"{k} seeds under {n}" for n, k in protocol.judge_seeds.items())
                      if protocol.judge_seeds else "")
        out.append(f"{pid}: {settings}; judge profiles {', '.join(protocol.noise)}; main {', '.join(protocol.mains)} "
                   f"({protocol.seeds} seeds), others {protocol.other_seeds} seeds{exceptions}"
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


DRIFT = ("SetGRPO's certificate as the policy moves: the reversal of audited accepted groups against the reference "
         "per block of steps, pooled over the entry's seeds, with its exact 95% interval and the count of groups (entries "
         "whose runs logged it).")


def drift_frame(submissions: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per entry that holds SetGRPO's reversal by block of steps (``drift``), a column per block."""
    rows = []
    for s in submissions:
        if not s.get("drift"):
            continue
        row = {"entry": s["name"], "judge": s["suite"]["noise"]}
        for b in s["drift"]["blocks"]:
            rate = "—" if b["reversal_ref"] is None else (
                f"{b['reversal_ref']:.3f} [{b['reversal_ref_low']:.2f}, {b['reversal_ref_high']:.2f}]")
            row[f"steps {b['first_step']}–{b['last_step']}"] = f"{rate} ({b['n_audited_accepted']})"
        rows.append(row)
    return pd.DataFrame(rows).fillna("—")


HELD_OUT = ("The held-out curves: each entry's true score on the dev instances at each evaluated step, mean over its "
            "seeds (a stopped run keeps its last point; the HTML page draws them with their SEs). The judge tables' "
            "scores are on the protocol's evaluation split.")


def held_out_frame(submissions: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per entry whose runs logged a held-out curve (``held_out``), a column per evaluated step."""
    return pd.DataFrame([{"entry": s["name"], "judge": s["suite"]["noise"],
                          **{f"step {step}": _fmt(score) for step, score in zip(s["held_out"]["step"], s["held_out"]["true_score"])}}
                         for s in submissions if s.get("held_out")]).fillna("—")


HACKING = ("Reward hacking per entry (harness/hacking.py): the runs whose held-out curve shows an onset — judge − true "
           "leaves its early band while the true score stops rising — and the median step; judge − true at the curve's "
           "start and end (means over seeds); under an injected bias, the rate of its feature at the start and end of "
           "training, the runs that discovered it (its rate above 2× its initial rate), the median step, and the rate "
           "gained per 10 steps after (exploitability).")


def hacking_frame(submissions: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per entry whose runs read their hacking anatomy (``hacking``)."""
    def number(value: float | None, spec: str) -> str:
        return "—" if value is None else format(value, spec)

    rows = []
    for s in submissions:
        if not (h := s.get("hacking")):
            continue
        row = {"entry": s["name"], "judge": s["suite"]["noise"]}
        if "onsets" in h:
            row["onset (runs, median step)"] = f"{h['onsets']}/{h['runs']}, {number(h['onset_step_median'], '.0f')}"
            row["judge − true (start → end)"] = f"{h['gap_start']:+.3f} → {h['gap_end']:+.3f}"
        if "discoveries" in h:
            row["feature rate (start → end)"] = f"{h['initial_rate']:.3f} → {h['final_rate']:.3f}"
            row["discovered (runs, median step)"] = f"{h['discoveries']}/{h['runs']}, {number(h['discovery_step_median'], '.0f')}"
            row["exploitability (/10 steps)"] = number(h["exploitability"], "+.3f")
        rows.append(row)
    return pd.DataFrame(rows).fillna("—")


APART = ("Entries whose runs are not on this board: their numbers could not be rebuilt from runs, so they are "
         "not ranked and not in the verdicts.")


def apart_frame(submissions: list[dict[str, Any]]) -> pd.DataFrame:
    """The entries listed apart (no runs on the board): name, judge, seeds and their claimed macro score."""
    return pd.DataFrame([{"entry": s["name"], "agent": s["agent"], "judge": s["suite"]["noise"],
                          "seeds": ", ".join(map(str, s["seeds"])),
                          "claimed macro ± SE": f"{s['macro']['true_score']:.3f} ± {s['macro']['true_score_se']:.3f}"}
                         for s in submissions])


def provenance(submissions: list[dict[str, Any]]) -> str | None:
    """A note when results were made by another package version than this one (their numbers
    reproduce seed for seed only with the version that made them); None when all match."""
    made = sorted({s["versions"]["package"] for s in submissions})
    if not made or made == [__version__]:
        return None
    return (f"Results made by setgrpo_bench {', '.join(made)}; this checkout is {__version__}. Numbers reproduce "
            "seed for seed only with the version that made them: rerun the sweep to refresh the board.")
