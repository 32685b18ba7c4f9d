"""Where each method wins, ties or loses against the baseline under the same judge (DESIGN §10)."""

from __future__ import annotations

import numpy as np
import pandas as pd

PROFILE_ORDER = ("clean", "mild", "realistic", "harsh", "sparse", "verbose", "learned")
"""Judge profiles from the most to the least reliable; others follow in name order."""


def noise_order(noise: str) -> tuple[int, str]:
    return (PROFILE_ORDER.index(noise), "") if noise in PROFILE_ORDER else (len(PROFILE_ORDER), noise)


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
