"""One training step of any agent, top to bottom (DESIGN §7, §8).

    warm_up()                                       once, before step 1: the agent's calibration-only
                                                    audit of initial-policy groups (SetGRPO's window)
    batch     = collector.collect(B)                sample B tasks, G responses each, grade every group
    needs     = agent.needs(groups, audit stream)   which groups need K, which are audited
    geometry  = K of those groups                   per-response gradient geometry of the live policy
    audits    = auditor.audit(groups, needs)        the stronger judge, from its own random stream
    decision  = agent.decide(groups, grams, audits) coefficients and accept mask (pure)
    update(decision)                                the optimiser step (``harness.update``)
    agent.update(groups, grams, audits)             the calibration window changes only now
    agent.after_step(decision)                      a stopping rule counts the step; once it has
                                                    fired the run ends (``agent.stopped``)

The trainer composes the parts — ``Collector`` (rollouts and grades), ``Auditor`` (reference grades),
``GradientGeometry`` (K), ``PolicyUpdate`` (optimiser and update paths) — and saves and restores all
of their state (``state_dict``), so a resumed run repeats no step and loses none. The true score is
kept beside the groups (``Batch.true_scores``) for diagnostics only.
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

import numpy as np
import torch

from ..agents.base import Decision, Groups, Needs
from ..agents.build import build_agent
from ..agents.config import TrainConfig
from ..envs.rubric_env import RubricEnv
from ..graders.bias import feature_rate
from ..graders.rubric_grader import injected_bias
from ..policy.engine import RolloutEngine
from ..policy.model import Policy
from .audit import Auditor
from .collect import Batch, Collector
from .diagnostics import true_score_diagnostics
from .engines import make_engine
from .geometry import Geometry, GradientGeometry
from .seeds import torch_seed
from .update import PolicyUpdate, updates_from_gradients


class Trainer:
    """Policy, engine, agent, optimiser and every random stream of a run."""

    def __init__(self, config: TrainConfig, policy: Policy, envs: list[RubricEnv], *,
                 engine: RolloutEngine | None = None) -> None:
        """``engine``: the rollout engine (default: the config's, ``make_engine``)."""
        self.config, self.policy, self.envs = config, policy, envs
        self.bias = injected_bias(envs[0].grader) if envs else {}
        torch.manual_seed(torch_seed(config.run.seed, "sampling"))
        self.engine = engine if engine is not None else make_engine(config, policy)
        self.collector = Collector(config, self.engine, envs)
        self.auditor = Auditor(config, envs)
        self.agent = build_agent(config)
        o, r = config.objective, config.rollout
        self.geometry = GradientGeometry(policy.model, config.setgrpo.geometry, temperature=r.temperature,
                                         loss_type=o.loss_type, max_new_tokens=r.max_new_tokens)
        self.update = PolicyUpdate(config, policy, self.engine, self.geometry)
        self.update_from_gradients = updates_from_gradients(config, self.agent, self.geometry, self.engine)
        self.warmed_up = False

    # ---------------------------------------------------------------- the phases
    def warm_up(self) -> dict[str, float]:
        """Audit a batch of the initial policy into the agent's window (once, before step 1); returns
        its judge calls, audit calls, their cost in training-judge calls and its time."""
        t0 = time.perf_counter()
        self.warmed_up = True
        if not self.agent.warmup_groups:
            return {"grader_calls": 0, "audit_calls": 0, "grader_cost": 0.0, "time_warmup": time.perf_counter() - t0}
        warm = self.collector.collect(self.agent.warmup_groups)
        needs = self.agent.needs(warm.groups, self.auditor.rng, warmup=True)
        audited = self.auditor.audit(warm.groups, needs)
        self.agent.update(warm.groups, self.geometry_of(warm.groups, needs).grams, audited.grades)
        return {"grader_calls": warm.judge_calls + audited.calls, "audit_calls": audited.calls,
                "grader_cost": warm.judge_cost + audited.cost, "time_warmup": time.perf_counter() - t0}

    def step(self) -> dict[str, Any]:
        """One training step (after ``warm_up``); returns its metrics."""
        if not self.warmed_up:
            raise RuntimeError("Trainer.step before Trainer.warm_up: the agent's window would start empty")
        t1 = time.perf_counter()
        batch = self.collector.collect(self.collector.groups_per_step)
        t2 = time.perf_counter()
        needs = self.agent.needs(batch.groups, self.auditor.rng)
        geometry = self.geometry_of(batch.groups, needs, keep_gradients=self.update_from_gradients)
        audited = self.auditor.audit(batch.groups, needs)
        decision = self.agent.decide(batch.groups, geometry.grams, audited.grades)
        t3 = time.perf_counter()
        optimised = self.update(batch.groups.rollout, decision, geometry)
        t4 = time.perf_counter()
        self.agent.update(batch.groups, geometry.grams, audited.grades)
        self.agent.after_step(decision)
        return {
            **self.step_metrics(batch, decision),
            **optimised,
            "groups_executed": int(decision.accepted.any(axis=1).sum()) if optimised["stepped"] else 0,
            "stopped": self.agent.stopped,
            "grader_calls": batch.judge_calls + audited.calls,
            "audit_calls": audited.calls,
            "grader_cost": batch.judge_cost + audited.cost,  # a reference call costs its profile's ``cost``
            "time_warmup": 0.0,  # the warm-up's time is charged to step 1 (``charge_warmup``)
            "time_rollout_grade": t2 - t1,
            "time_coefficients": t3 - t2,
            "time_update": t4 - t3,
        }

    def geometry_of(self, groups: Groups, needs: Needs, *, keep_gradients: bool = False) -> Geometry:
        """K of the requested responses of each requested group, from the live policy (and their
        per-response gradients when the update will be formed from them)."""
        rows = {b: groups.rows(b)[valid] for b, valid in needs.grams.items()}
        return self.geometry.grams(groups.rollout, rows, keep_gradients=keep_gradients)

    def step_metrics(self, batch: Batch, decision: Decision) -> dict[str, Any]:
        """Rewards, true scores (diagnostics only), coefficient statistics, lengths, memory, and the share
        of the batch's responses that show the training judge's injected bias (if it has one)."""
        rewards = batch.groups.rewards
        lengths = batch.groups.rollout.response_mask.sum(1).float()
        return {
            "reward": float(np.nanmean(rewards)),
            "true_score": float(batch.true_scores.mean()),
            "invalid_rate": float(np.isnan(rewards).mean()),
            "coef_abs_mean": float(np.abs(decision.coefficients).mean()),
            "acceptance": float(decision.accepted.mean()),
            **decision.stats,
            **true_score_diagnostics(decision.records, batch.true_scores, std_floor=self.config.coefficients.std_floor),
            "response_tokens": float(lengths.mean()),
            **({"feature_rate": feature_rate(self.bias, batch.groups.rollout.texts)} if self.bias else {}),
            "peak_rss_mb": peak_rss_mb(),
            **({"gpu_peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9} if self.policy.device.type == "cuda" else {}),
        }

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs besides the weights: optimiser, every random stream, the
        agent's state, the warm-up flag and the grading counter."""
        return {
            "optimizer": self.update.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            **self.collector.state_dict(),
            **self.auditor.state_dict(),
            "agent": self.agent.state_dict(),
            "warmed_up": self.warmed_up,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.update.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.collector.load_state_dict(state)
        self.auditor.load_state_dict(state)
        self.agent.load_state_dict(state["agent"])
        self.warmed_up = bool(state["warmed_up"])


def charge_warmup(metrics: dict[str, Any], warmup: dict[str, float]) -> dict[str, Any]:
    """The first step's metrics with the warm-up's calls, cost and time added (the warm-up is part of
    the run's budget and of its first step's wall time)."""
    out = dict(metrics)
    for key in ("grader_calls", "audit_calls", "grader_cost"):
        out[key] = out[key] + warmup[key]
    out["time_warmup"] = warmup["time_warmup"]
    out["time_step"] = out["time_step"] + warmup["time_warmup"]
    return out


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024
