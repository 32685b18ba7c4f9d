"""How often SetGRPO's risk gate certifies nothing (a stalled step), by where its Learn-then-Test walk
starts and how large D2 is: a simulation of the calibration alone, at flat per-group reversal rates (this
suite measures 0.02–0.12 w.r.t. the reference) and at a reversal risk that grows with acceptance and
crosses α.

    python benchmarks/gate_power.py [--reps 2000]

Scores are U(0, 1) on D1 and D2; the grid is the package's (acceptance levels 10%, 15%, …, 100% of D1);
α = 0.2 and δ = 0.1 as in the `setgrpo` preset. For each setting it prints the share of calibrations
with τ̂ = ∞, the mean share of D2 accepted, and the share whose τ̂ has true risk above α (≤ δ)."""

import argparse
import math

import numpy as np

from setgrpo_bench.agents import setgrpo as sm

ALPHA, DELTA = 0.2, 0.1
RISKS = {  # reversal probability p(s) of a group with score s, and the conditional risk R(τ) = E[p(s) | s ≥ τ]
    "flat 0.03": (lambda s: np.full_like(s, 0.03), lambda tau: 0.03),
    "flat 0.06": (lambda s: np.full_like(s, 0.06), lambda tau: 0.06),
    "flat 0.10": (lambda s: np.full_like(s, 0.10), lambda tau: 0.10),
    "0.6(1 − s)": (lambda s: 0.6 * (1 - s), lambda tau: 0.3 * (1 - tau)),
}


def simulate(size: int, start: float, risk: str, reps: int, rng: np.random.Generator) -> tuple[float, float, float]:
    probability, conditional = RISKS[risk]
    stalled, accepted, violated = 0, [], 0
    for _ in range(reps):
        grid = sm.threshold_grid(rng.random(size), sm.acceptance_levels())
        scores = rng.random(size)
        tau = sm.ltt_threshold(grid, scores, rng.random(size) < probability(scores), alpha=ALPHA, delta=DELTA, start=start)
        stalled += math.isinf(tau)
        accepted.append(float((scores >= tau).mean()))
        violated += math.isfinite(tau) and conditional(max(tau, 0.0)) > ALPHA
    return stalled / reps, float(np.mean(accepted)), violated / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    reps = parser.parse_args().reps
    rng = np.random.default_rng(0)
    print(f"{'D2':>4} {'walk starts':>18} {'risk':>11} {'stalled':>8} {'accepted':>9} {'R(τ̂) > α':>10}")
    for size in (24, 64, 128):
        for start, label in ((0.0, "first testable"), (0.5, "half of D2")):
            for risk in RISKS:
                stalled, accepted, violated = simulate(size, start, risk, reps, rng)
                print(f"{size:>4} {label:>18} {risk:>11} {stalled:>8.2f} {accepted:>9.2f} {violated:>10.3f}")


if __name__ == "__main__":
    main()
