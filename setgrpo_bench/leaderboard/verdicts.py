"""Where each method wins, ties or loses against the baseline under the same judge (DESIGN §10).

A verdict is a two-sided test of "same mean macro true score as GRPO under this judge" on the seeds'
macro scores; a method that the board's protocol sets beside its controls (``controls``) is tested against
each of them too, in the same family. Seed variance is pooled over every agent under the judge when Levene's test (median
centred) does not reject equal variances at 5% — three to five seeds a cell give a poor variance each,
the judge's dozens give a good one — and Welch's test is used for that judge otherwise. The p-values of
every verdict on the page are then adjusted together by Holm's step-down method, which keeps the chance
of any false verdict on the page at 5% whatever their dependence; a win or loss needs an adjusted p <
0.05.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np
import pandas as pd
from scipy import stats

PROFILE_ORDER = ("clean", "mild", "realistic", "harsh", "sparse", "verbose", "learned")
"""Judge profiles from the most to the least reliable; others follow in name order."""

BASELINE = "grpo"
"""The agent every other is compared with under the same judge profile."""

FAMILY_LEVEL = 0.05
"""Holm-adjusted p below which a difference is a win or a loss: the page's family-wise error rate."""

HOMOGENEITY_LEVEL = 0.05
"""Levene p below which a judge's seed variances are not pooled (Welch's test instead)."""

VERDICT_RULE = (f"Per judge profile, each agent's seeds against {BASELINE}'s: the difference of mean macro true scores, its "
                "95% CI and a two-sided t-test — on the seed variance pooled over every agent under the judge when "
                f"Levene's test keeps equal variances (p ≥ {HOMOGENEITY_LEVEL:g}), Welch's otherwise. The p-values of the "
                f"whole page are adjusted together (Holm): win / loss when the adjusted p < {FAMILY_LEVEL:g}, tie otherwise.")


def noise_order(noise: str) -> tuple[int, str]:
    return (PROFILE_ORDER.index(noise), "") if noise in PROFILE_ORDER else (len(PROFILE_ORDER), noise)


def versus_baseline(frame: pd.DataFrame) -> list[str]:
    """Each row's macro minus the baseline's (one judge profile's rows): the difference a reader
    compares by eye; whether it is a win is ``verdicts``'s to say."""
    base = frame[(frame["agent"] == BASELINE) & ~frame["oracle"].astype(bool)]
    if base.empty:
        return ["—"] * len(frame)
    m0 = float(base["macro"].iloc[0])
    return ["—" if a == BASELINE and not o else f"{m - m0:+.3f}" for a, o, m in zip(frame["agent"], frame["oracle"], frame["macro"])]


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment: the i-th smallest p times (m − i + 1), made monotone, capped at 1."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    scaled = p[order] * (len(p) - np.arange(len(p)))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return adjusted


def homogeneity(samples: list[np.ndarray]) -> float:
    """Levene's (Brown–Forsythe, median-centred) p of equal variances over the samples with ≥ 2
    values; 1 when fewer than two such samples (nothing to compare)."""
    usable = [s for s in samples if len(s) >= 2]
    if len(usable) < 2 or all(np.ptp(s) == 0 for s in usable):
        return 1.0
    return float(stats.levene(*usable, center="median").pvalue)


def compare(x: np.ndarray, y: np.ndarray, pooled: tuple[float, int] | None) -> dict[str, float]:
    """Mean of ``x`` − mean of ``y``, its 95% CI and two-sided p: with ``pooled`` (variance, df) the
    pooled-variance t-test, else Welch's."""
    diff = float(np.mean(x) - np.mean(y))
    if pooled is not None:
        var, df = pooled
        se = float(np.sqrt(var * (1 / len(x) + 1 / len(y))))
    else:
        vx, vy = np.var(x, ddof=1) / len(x), np.var(y, ddof=1) / len(y)
        se = float(np.sqrt(vx + vy))
        df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1)) if se > 0 else np.inf
    if se == 0:
        return {"diff": diff, "ci_low": diff, "ci_high": diff, "p": 1.0 if diff == 0 else 0.0, "df": float(df)}
    half = float(stats.t.ppf(0.975, df)) * se
    p = float(2 * stats.t.sf(abs(diff) / se, df))
    return {"diff": diff, "ci_low": diff - half, "ci_high": diff + half, "p": p, "df": float(df)}


def judge_tests(seeds: dict[str, np.ndarray], controls: Mapping[str, Sequence[str]] = MappingProxyType({})
                ) -> tuple[list[dict[str, object]], dict[str, object]]:
    """Every agent against the baseline under one judge (``seeds``: agent → its seeds' macro scores), and
    each agent of ``controls`` against each of its controls; and the judge's homogeneity check (Levene p,
    pooled or Welch, pooled df). A pair lacking either side, or with a one-seed side, is not tested."""
    levene = homogeneity(list(seeds.values()))
    usable = [s for s in seeds.values() if len(s) >= 2]
    df = sum(len(s) - 1 for s in usable)
    pooled = (sum(float(np.var(s, ddof=1)) * (len(s) - 1) for s in usable) / df, df) if levene >= HOMOGENEITY_LEVEL and df else None
    check = {"levene_p": levene, "test": "pooled" if pooled else "Welch", "pooled_df": df if pooled else None}
    pairs = [(a, BASELINE) for a in seeds if a != BASELINE] + [(a, c) for a, cs in controls.items() for c in cs]
    rows: list[dict[str, object]] = []
    for agent, against in pairs:
        x, y = seeds.get(agent), seeds.get(against)
        if x is None or y is None or len(x) < 2 or len(y) < 2:
            continue
        rows.append({"agent": agent, "against": against, "n": len(x), "n_baseline": len(y), **compare(x, y, pooled),
                     "test": check["test"]})
    return rows, check


def verdicts(frame: pd.DataFrame, controls: Mapping[str, Sequence[str]] = MappingProxyType({})
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every verdict on the page (per judge: each agent against the baseline, each agent of ``controls``
    against its controls; oracle rows left out) with Holm-adjusted p-values over all of them, and each
    judge's homogeneity check. ``frame`` has one row per entry with ``agent``, ``noise``, ``oracle`` and
    ``per_seed`` (its seeds' macro true scores)."""
    rows, checks = [], []
    for profile in sorted(set(frame["noise"]), key=noise_order):
        under = frame[(frame["noise"] == profile) & ~frame["oracle"].astype(bool)]
        tests, check = judge_tests({a: np.asarray(s, dtype=float) for a, s in zip(under["agent"], under["per_seed"])}, controls)
        rows += [{"judge": profile, **t} for t in tests]
        checks.append({"judge": profile, **check})
    table = pd.DataFrame(rows)
    if table.empty:
        return table, pd.DataFrame(checks)
    table["p_adjusted"] = holm(table["p"].to_numpy())
    significant = table["p_adjusted"] < FAMILY_LEVEL
    table["verdict"] = np.where(significant & (table["diff"] > 0), "win", np.where(significant, "loss", "tie"))
    return table, pd.DataFrame(checks)


def verdict_heading(table: pd.DataFrame) -> str:
    """The verdict section's title: against the baseline, and the methods tested against their controls."""
    controlled = sorted(set(table["agent"][table["against"] != BASELINE]))
    return f"Where each method wins, ties or loses against {BASELINE}" + (
        f", and {', '.join(controlled)} against {'its' if len(controlled) == 1 else 'their'} controls" if controlled else "")


def verdict_display(table: pd.DataFrame) -> pd.DataFrame:
    """The page's verdict table: difference, 95% CI, p, adjusted p, test and verdict per agent and judge (and
    the agent it is compared with, when a page compares some with controls besides the baseline)."""
    against = {"against": table["against"]} if (table["against"] != BASELINE).any() else {}
    return pd.DataFrame({
        "judge": table["judge"], "agent": table["agent"], **against,
        "seeds": [f"{n} v {m}" for n, m in zip(table["n"], table["n_baseline"])],
        ("Δ" if against else f"Δ vs {BASELINE}"): [f"{d:+.3f}" for d in table["diff"]],
        "95% CI": [f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in zip(table["ci_low"], table["ci_high"])],
        "p": [f"{p:.3g}" for p in table["p"]], "Holm p": [f"{p:.3g}" for p in table["p_adjusted"]],
        "test": table["test"], "verdict": table["verdict"],
    })


def checks_display(checks: pd.DataFrame) -> pd.DataFrame:
    """Each judge's homogeneity check, as the page shows it."""
    return pd.DataFrame({"judge": checks["judge"], "Levene p": [f"{p:.3g}" for p in checks["levene_p"]],
                         "seed variance": [f"pooled ({int(df)} df)" if t == "pooled" else "Welch (not pooled)"
                                           for t, df in zip(checks["test"], checks["pooled_df"])]})


def certificate_by_block(blocks: list[dict], *, alpha: float, min_groups: int = 25) -> list[dict]:
    """Whether SetGRPO's certificate held in each block of steps (``harness.pooled.reversal_by_block``,
    pooled over seeds): a one-sided exact binomial test of "reversal of accepted groups > α" on every
    block with at least ``min_groups`` audited accepted groups, Holm-adjusted over those blocks.
    ``held`` is False where the adjusted p < 0.05 (the rate is above α beyond chance)."""
    tested = [b for b in blocks if b["n_audited_accepted"] >= min_groups]
    p = np.array([stats.binomtest(b["n_reversed_ref"], b["n_audited_accepted"], alpha, alternative="greater").pvalue
                  for b in tested])
    return [{**b, "p_above_alpha": float(q), "p_adjusted": float(a), "held": bool(a >= FAMILY_LEVEL)}
            for b, q, a in zip(tested, p, holm(p))]
