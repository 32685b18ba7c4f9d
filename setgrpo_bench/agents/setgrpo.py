"""The SetGRPO agent (DESIGN §8): audits, calibration window, and the three modules per step.

Each step, before anything of the step is added to the calibration data:
  q  = conformal quantile of the D1 scores                          (a) joint reward set
  τ̂  = Learn-then-Test threshold on D2 under the same q              (c) risk gate
  for every non-constant group: K from the live policy, C = box(â, qσ) ∩ {Σa = 0},
  s = λ*, c = c(λ*)                                                  (b) safe recovery
  accept when the group is certifiable and s ≥ τ̂; accepted groups train on c with the GRPO loss.
Then a fraction of the step's groups is audited by the reference grader and enters the rolling
window, alternately into D1 and D2 (disjoint halves).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..graders.reference import ConsensusReference
from ..graders.rubric_grader import RubricGrader
from ..tasks.model import TaskInstance
from . import setgrpo_math as sm
from .base import Agent, Decision, GroupRecord, Groups
from .coefficients import group_coefficients
from .config import TrainConfig

GramFn = Callable[[Groups, int, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class SetGRPOParams:
    """The knobs of DESIGN §8, taken from a ``TrainConfig`` (where each is documented)."""

    alpha_a: float
    delta_a: float
    alpha: float
    delta: float
    audit_fraction: float
    window: int
    warmup_groups: int
    calibrate: bool
    fixed_q: float
    recovery: bool
    gate: bool
    grid_start: float
    grid_step: float
    std_floor: float
    spread_floor: float

    @classmethod
    def from_config(cls, config: TrainConfig) -> SetGRPOParams:
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})


@dataclass
class AuditRecord:
    """One audited group in the calibration window: â, a*, σ and K at the time of its audit."""

    a_hat: np.ndarray
    a_ref: np.ndarray
    sigma: np.ndarray
    gram: np.ndarray
    fold: int  # 0 → D1 (for q), 1 → D2 (for τ̂)


class Auditor:
    """Grades audited groups with the reference grader of their env, from its own random stream."""

    def __init__(self, references: Sequence[RubricGrader | ConsensusReference], rng: np.random.Generator) -> None:
        self.references, self.rng = list(references), rng

    def rewards(self, env_index: int, task: TaskInstance, responses: Sequence[str]) -> tuple[np.ndarray, int]:
        grades = self.references[env_index].grade_group(task, responses, self.rng)
        return np.array([g.score for g in grades]), sum(g.judge_calls for g in grades)


class SetGRPOAgent(Agent):
    """SetGRPO and its ablations (``calibrate``, ``recovery``, ``gate`` off; K = I via the geometry)."""

    def __init__(self, params: SetGRPOParams, gram: GramFn, auditor: Auditor) -> None:
        self.params, self.gram, self.auditor = params, gram, auditor
        self.warmup_groups = params.warmup_groups
        self.window: deque[AuditRecord] = deque(maxlen=params.window)
        self.audits = 0

    # ---------------------------------------------------------------- calibration
    def fold(self, k: int) -> list[AuditRecord]:
        return [r for r in self.window if r.fold == k]

    def quantile(self) -> float:
        """q from D1 (module a), or the fixed q of the ``no-calib`` ablation."""
        p = self.params
        if not p.calibrate:
            return p.fixed_q
        scores = [sm.conformal_score(r.a_hat, r.a_ref, r.sigma) for r in self.fold(0)]
        return sm.conformal_quantile(np.array(scores), p.alpha_a, delta_a=p.delta_a or None)

    def threshold(self, q: float) -> float:
        """τ̂ by Learn-then-Test on D2 with the grid fixed on D1 (module c); −∞ without the gate."""
        p = self.params
        if not p.gate:
            return -math.inf
        d1 = [sm.decide_group(r.gram, r.a_hat, q * r.sigma, recovery=p.recovery) for r in self.fold(0)]
        grid = sm.threshold_grid(np.array([d.score for d in d1 if d.certifiable]),
                                 sm.acceptance_levels(p.grid_start, p.grid_step))
        d2 = self.fold(1)
        decisions = [sm.decide_group(r.gram, r.a_hat, q * r.sigma, recovery=p.recovery) for r in d2]
        scores = np.array([d.score if d.certifiable else -math.inf for d in decisions])
        events = np.array([sm.reversal(d.coefficients, r.gram, r.a_ref) for d, r in zip(decisions, d2)], dtype=bool)
        return sm.ltt_threshold(grid, scores, events, alpha=p.alpha, delta=p.delta)

    # ---------------------------------------------------------------- per group
    def observe(self, groups: Groups, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(valid mask, â, σ) of group b, or None when it is constant (excluded everywhere)."""
        p = self.params
        rewards = groups.rewards[b]
        valid = ~np.isnan(rewards)
        a_hat = group_coefficients("grpo", rewards, std_floor=p.std_floor)[valid]
        if not np.any(a_hat):
            return None
        sigma = sm.response_scales(rewards[valid], groups.spreads[b][valid], std_floor=p.std_floor,
                                   spread_floor=p.spread_floor)
        return valid, a_hat, sigma

    def audit(self, groups: Groups, b: int, valid: np.ndarray) -> tuple[np.ndarray | None, int]:
        rows = groups.rows(b)
        texts = [groups.rollout.texts[i] for i in rows]
        reference, calls = self.auditor.rewards(groups.env_indices[b], groups.tasks[b], texts)
        if np.isnan(reference[valid]).any():
            return None, calls  # the reference judge failed: the group cannot calibrate
        return group_coefficients("grpo", reference[valid], std_floor=self.params.std_floor), calls

    def _remember(self, a_hat: np.ndarray, a_ref: np.ndarray, sigma: np.ndarray, gram: np.ndarray) -> None:
        self.window.append(AuditRecord(a_hat, a_ref, sigma, gram, fold=self.audits % 2))
        self.audits += 1

    def _audit_choice(self, candidates: list[int], n_groups: int) -> set[int]:
        n = min(len(candidates), math.ceil(self.params.audit_fraction * n_groups))
        return set(self.auditor.rng.choice(candidates, size=n, replace=False).tolist()) if n else set()

    # ---------------------------------------------------------------- the step
    def decide(self, groups: Groups) -> Decision:
        p = self.params
        q = self.quantile()
        tau = self.threshold(q) if math.isfinite(q) else math.inf
        coef = np.zeros_like(groups.rewards)
        accepted = np.zeros(groups.rewards.shape, dtype=bool)
        records: list[GroupRecord] = []
        observed = {b: o for b in range(groups.n_groups) if (o := self.observe(groups, b)) is not None}
        audited = self._audit_choice(sorted(observed), groups.n_groups)
        calls = 0
        for b, (valid, a_hat, sigma) in observed.items():
            gram = self.gram(groups, b, valid)
            rho = q * sigma
            d = sm.decide_group(gram, a_hat, rho, recovery=p.recovery)
            take = d.certifiable and d.score >= tau
            if take:
                coef[b, valid] = d.coefficients
                accepted[b] = valid
            a_ref = None
            if b in audited:
                a_ref, spent = self.audit(groups, b, valid)
                calls += spent
            records.append(GroupRecord(b, valid, a_hat, sigma, rho, gram, d.coefficients, d.score, d.certifiable,
                                       take, a_ref))
        for r in records:  # the step's audits join the window only after its decisions
            if r.a_ref is not None:
                self._remember(r.a_hat, r.a_ref, r.sigma, r.gram)
        return Decision(coef, accepted, self._stats(records, q, tau, groups.n_groups), records, calls)

    def warm_up(self, groups: Groups) -> int:
        """Audit every non-constant group of an initial-policy batch into the window (step 0)."""
        calls = 0
        for b in range(groups.n_groups):
            observed = self.observe(groups, b)
            if observed is None:
                continue
            valid, a_hat, sigma = observed
            a_ref, spent = self.audit(groups, b, valid)
            calls += spent
            if a_ref is not None:
                self._remember(a_hat, a_ref, sigma, self.gram(groups, b, valid))
        return calls

    def _stats(self, records: list[GroupRecord], q: float, tau: float, n_groups: int) -> dict[str, float]:
        """Per-step diagnostics w.r.t. the reference grader; audited groups of this step are out of
        sample for q and τ̂ (they joined the window after the decisions)."""
        audited = [r for r in records if r.a_ref is not None]
        covered = [sm.in_set(r.a_ref, r.a_hat, r.rho) for r in audited]
        reversed_ = [sm.reversal(r.executed, r.gram, r.a_ref) for r in audited if r.accepted]
        n = max(len(records), 1)
        return {
            "q": q, "tau": tau, "window_d1": float(len(self.fold(0))), "window_d2": float(len(self.fold(1))),
            "accepted_groups": sum(r.accepted for r in records) / n_groups,
            "acceptance_nonconstant": sum(r.accepted for r in records) / n,
            "uncertifiable": sum(not r.certifiable for r in records) / n,
            "score_mean": float(np.mean([r.score for r in records if r.certifiable])) if any(r.certifiable for r in records) else math.nan,
            "coverage_ref": float(np.mean(covered)) if covered else math.nan,
            "reversal_ref": float(np.mean(reversed_)) if reversed_ else math.nan,
            "audited_groups": float(len(audited)),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"window": list(self.window), "audits": self.audits, "rng": self.auditor.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.window = deque(state["window"], maxlen=self.params.window)
        self.audits = int(state["audits"])
        self.auditor.rng.bit_generator.state = state["rng"]
