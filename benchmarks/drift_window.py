"""How SetGRPO's gate keeps its certificate while the policy moves: calibration candidates compared on
simulated streams (docs/setgrpo.md, "Calibration under drift"; the default's choice, agents/setgrpo.yaml).

Each step 16 groups arrive; a group's score s (its recovery ratio) is uniform on [0, 1] and it reverses
the reference's update with probability r(t)(1 + κ(1/2 − s)) (κ = 1), so the gate can pick safer groups;
the true risk of the groups a threshold τ accepts is R_t(τ) = r(t)(1 − κτ/2). The preset's budget: 48
warm-up groups, 4 audited groups a step (random) into a window of 256, α = 0.2, δ = 0.1 split over the 3
set levels, the LTT walk from half of D2. The certificate is broken at a step when τ̂ is finite and
R_t(τ̂) > α; Learn-then-Test promises P(broken) ≤ δ at every step. Candidates:

  whole window       the window as it is (board v2's SetGRPO)
  age ≤ W            only the groups audited in the last W steps
  recent if risen    the last 32 steps alone when their reversal rate is above the older groups' (one-sided
                     Fisher test at 0.1), else the whole window
  weighted           weights 0.97^age (mean age ≈ 32 steps, as a 64-step window's), LTT on the Kish effective
                     counts (Barber et al. 2023's weights, for a risk rather than a quantile)
  ACI γ              the level moved by the audited accepted groups' reversals, α_{t+1} = α_t + γ(α − E)
                     (Gibbs & Candès 2021), whole window
  corrected level    the default: α × r̂_window / r̂_last 32 steps when the recent rate is higher
                     (``drift_corrected_level``)

    python benchmarks/drift_window.py [--repeats 200]

prints, per scenario, the share of steps whose certificate is broken in each block of 20 steps (the worst
block with its standard error over streams, against δ) and the mean share of groups accepted.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np
from scipy.stats import binom, fisher_exact

from setgrpo_bench.agents.setgrpo.ltt import min_testable_count
from setgrpo_bench.agents.setgrpo.risk_gate import acceptance_levels, first_testable, threshold_grid
from setgrpo_bench.agents.setgrpo.window import drift_corrected_level

ALPHA, DELTA, FAMILIES, START = 0.2, 0.1, 3, 0.5
STEPS, GROUPS, AUDITED, WARMUP, WINDOW, KAPPA = 120, 16, 4, 48, 256, 1.0
LEVELS = acceptance_levels(0.10, 0.05)


def ltt(grid: np.ndarray, scores: np.ndarray, events: np.ndarray, weights: np.ndarray, alpha: float) -> float:
    """τ̂ by LTT with fixed-sequence testing on (Kish-effective, when weighted) binomial counts."""
    if not len(grid) or not len(scores) or alpha <= 0:
        return math.inf
    kept = scores[None, :] >= grid[:, None]
    total, squares = (kept * weights).sum(1), (kept * weights**2).sum(1)
    n = np.where(squares > 0, total**2 / np.maximum(squares, 1e-300), 0.0)
    k = np.where(total > 0, n * (kept * weights * events).sum(1) / np.maximum(total, 1e-300), 0.0)
    n, k = np.floor(n + 1e-9).astype(int), np.floor(k + 1e-9).astype(int)
    first = first_testable(list(n), max(min_testable_count(min(alpha, 0.999), DELTA / FAMILIES), START * len(scores)))
    p = binom.cdf(k[first:], n[first:], min(alpha, 0.999))
    failed = np.nonzero(p > DELTA / FAMILIES)[0]
    rejected = int(failed[0]) if len(failed) else len(p)
    return float(grid[first + rejected - 1]) if rejected else math.inf


def simulate(rng: np.random.Generator, risk: Callable[[float], float], candidate: str) -> np.ndarray:
    """One stream: per step (broken, share accepted)."""
    steps, scores, events = [0] * WARMUP, list(rng.random(WARMUP)), []
    events = list(rng.random(WARMUP) < risk(0) * (1 + KAPPA * (0.5 - np.array(scores))))
    alpha, out = ALPHA, []
    for t in range(1, STEPS + 1):
        age = t - np.array(steps[-WINDOW:])
        s, e = np.array(scores[-WINDOW:]), np.array(events[-WINDOW:], bool)
        fold = (np.arange(len(steps)) % 2)[-WINDOW:]
        weights, level = np.ones(len(s)), alpha
        if candidate.startswith("age"):
            weights = (age <= int(candidate.split()[-1])).astype(float)
        elif candidate == "recent if risen":
            fresh = age <= 32
            if (~fresh).any() and fisher_exact([[e[fresh].sum(), (~e[fresh]).sum()], [e[~fresh].sum(), (~e[~fresh]).sum()]],
                                               alternative="greater").pvalue < 0.1:
                weights = fresh.astype(float)
        elif candidate == "weighted":
            weights = 0.97**age
        elif candidate == "corrected level":
            level = drift_corrected_level(ALPHA, age, e, recent=32)
        d1, d2 = (fold == 0) & (weights > 0), (fold == 1) & (weights > 0)
        tau = ltt(threshold_grid(s[d1], LEVELS), s[d2], e[d2], weights[d2], level)
        group_scores = rng.random(GROUPS)
        group_events = rng.random(GROUPS) < risk(t) * (1 + KAPPA * (0.5 - group_scores))
        accepted = group_scores >= tau
        tau_in = min(max(tau, 0.0), 1.0)
        out.append((math.isfinite(tau) and risk(t) * (1 - KAPPA * tau_in / 2) > ALPHA, accepted.mean()))
        audited = rng.choice(GROUPS, AUDITED, replace=False)
        if candidate.startswith("ACI"):
            for b in audited[accepted[audited]]:
                alpha += float(candidate.split()[-1]) * (ALPHA - group_events[b])
        steps += [t] * AUDITED
        scores += list(group_scores[audited])
        events += list(group_events[audited])
    return np.array(out, float)


SCENARIOS = {
    "rising as under the learned judge (r 0.13 → 0.45)": lambda t: 0.13 + 0.32 * t / STEPS,
    "rising below α as under realistic (r 0.04 → 0.14)": lambda t: 0.04 + 0.10 * t / STEPS,
    "flat (r = 0.10)": lambda t: 0.10,
}
CANDIDATES = ("whole window", "age ≤ 16", "age ≤ 32", "recent if risen", "weighted", "ACI γ 0.02", "corrected level")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--scenarios", type=int, default=len(SCENARIOS), help="only the first N scenarios")
    args = parser.parse_args()
    for scenario, risk in list(SCENARIOS.items())[:args.scenarios]:
        print(f"\n{scenario}: share of steps broken per 20-step block (δ = {DELTA}), share of groups accepted")
        for candidate in CANDIDATES:
            runs = np.array([simulate(np.random.default_rng(seed), risk, candidate) for seed in range(args.repeats)])
            per_stream = runs[..., 0].reshape(args.repeats, -1, 20).mean(axis=2)  # streams × blocks
            broken, worst = per_stream.mean(axis=0), int(per_stream.mean(axis=0).argmax())
            se = per_stream[:, worst].std(ddof=1) / np.sqrt(args.repeats)  # streams are independent
            print(f"  {candidate:16s} broken {' '.join(f'{b:.3f}' for b in broken)} (worst {broken[worst]:.3f} ± "
                  f"{se:.3f})  accepted {runs[..., 1].mean():.2f}", flush=True)


if __name__ == "__main__":
    main()
