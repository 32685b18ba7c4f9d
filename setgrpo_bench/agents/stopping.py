"""Stopping rules (DESIGN §7): an agent that ends training early from what it may see, never the
true score. A stopped agent asks for nothing more: the run ends at its stop step, so the judge calls
and audits it would have spent afterwards are neither made nor counted.

Two rules wrap any agent:

    audit_gap   each step k groups are also graded by the reference; g_t = mean judge score − mean
                reference score over those responses; m_t = mean of the last W gaps; stop at the first
                step where m_t > min_{s ≤ t} m_s + margin (the judge has begun to run ahead of the
                reference: what over-optimising a biased judge looks like).
    idle        stop once the agent has trained on no group for N consecutive steps (SetGRPO whose gate
                certifies nothing keeps paying for rollouts and audits; stopped, it stops paying).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import Agent, Audits, Decision, Grams, Groups, Needs
from .config import StopSettings


def audit_gap(rewards: np.ndarray, audits: Audits) -> float:
    """Mean judge score − mean reference score over the audited responses both graded (NaN: none)."""
    judge, reference = [], []
    for b, grades in audits.items():
        both = ~np.isnan(rewards[b]) & ~np.isnan(grades)
        judge.append(rewards[b][both])
        reference.append(grades[both])
    if not judge or not sum(len(j) for j in judge):
        return math.nan
    return float(np.concatenate(judge).mean() - np.concatenate(reference).mean())


def gap_stops(gaps: Sequence[float], window: int, margin: float) -> bool:
    """Whether the running mean of the last ``window`` gaps (NaN gaps skipped) has risen more than
    ``margin`` above its running minimum; False until ``window`` gaps are in."""
    seen = [g for g in gaps if not math.isnan(g)]
    if len(seen) < window:
        return False
    means = np.convolve(seen, np.ones(window) / window, mode="valid")
    return bool(means[-1] > means.min() + margin)


class StoppingAgent(Agent):
    """``inner`` with a stopping rule around it; ``stopped`` once the rule has fired (the step it fires
    trains on nothing)."""

    def __init__(self, inner: Agent, params: StopSettings) -> None:
        self.inner, self.params = inner, params
        self.warmup_groups = inner.warmup_groups
        self.grams_cover_accepted = inner.grams_cover_accepted
        self.gaps: list[float] = []
        self.idle = 0
        self.stopped = False

    def needs(self, groups: Groups, rng: np.random.Generator, *, warmup: bool = False) -> Needs:
        """The inner agent's needs, plus (audit_gap, after the warm-up) ``stop_audits`` groups drawn at random."""
        inner = self.inner.needs(groups, rng, warmup=warmup)
        if warmup or self.params.stop != "audit_gap":
            return inner
        n = min(self.params.stop_audits, groups.n_groups)
        own = rng.choice(groups.n_groups, size=n, replace=False).tolist()
        return Needs(inner.grams, tuple(sorted(set(inner.audits) | set(own))))

    def decide(self, groups: Groups, grams: Grams, audits: Audits) -> Decision:
        decision = self.inner.decide(groups, grams, audits)
        gap = audit_gap(groups.rewards, audits) if self.params.stop == "audit_gap" else math.nan
        fires = self._fires(gap, decision)
        stats = {**decision.stats, "stop_gap": gap, "stopped": float(fires)}
        if fires:
            return Decision(np.zeros_like(decision.coefficients), np.zeros_like(decision.accepted), stats, decision.records)
        return Decision(decision.coefficients, decision.accepted, stats, decision.records)

    def update(self, groups: Groups, grams: Grams, audits: Audits) -> None:
        self.inner.update(groups, grams, audits)

    def after_step(self, decision: Decision) -> None:
        """Record the step (its gap, whether it trained) and stop when the rule fires."""
        self.inner.after_step(decision)
        self.gaps.append(decision.stats["stop_gap"])
        self.idle = 0 if decision.accepted.any() else self.idle + 1
        self.stopped = self.stopped or bool(decision.stats["stopped"])

    def _fires(self, gap: float, decision: Decision) -> bool:
        p = self.params
        if p.stop == "audit_gap":
            return gap_stops([*self.gaps, gap], p.stop_window, p.stop_margin)
        return (self.idle + (not decision.accepted.any())) >= p.stop_idle

    def state_dict(self) -> dict[str, Any]:
        return {"inner": self.inner.state_dict(), "gaps": list(self.gaps), "idle": self.idle, "stopped": self.stopped}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.inner.load_state_dict(state["inner"])
        self.gaps = [float(g) for g in state["gaps"]]
        self.idle, self.stopped = int(state["idle"]), bool(state["stopped"])
