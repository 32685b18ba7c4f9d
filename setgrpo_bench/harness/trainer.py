"""One training step of any agent, top to bottom (DESIGN §7, §8).

    batch     = collect(B)                          sample B tasks, G responses each, grade every group
    needs     = agent.needs(groups, audit_rng)      which groups need K, which are audited
    geometry  = K of those groups                   per-response gradient geometry of the live policy
    audits    = reference grades of those groups    the stronger judge, from its own random stream
    decision  = agent.decide(groups, grams, audits) coefficients and accept mask (pure)
    optimise(decision)                              μ passes of the GRPO objective (or, at μ = 1,
                                                    one step Σ_i κ_i φ_i from the geometry's gradients)
    agent.update(groups, grams, audits)             the calibration window changes only now

The trainer owns every piece of state of a run — weights, optimiser, each random stream, the agent's
window — and saves and restores all of it (``state_dict``), so a resumed run repeats no step and
loses none. The true score is kept beside the groups (``Batch.true_scores``) for diagnostics only.
"""

from __future__ import annotations

import copy
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..agents.base import Audits, Decision, Groups, Needs
from ..agents.build import build_agent
from ..agents.config import TrainConfig
from ..agents.diagnostics import true_score_diagnostics
from ..agents.geometry import Geometry, GradientGeometry, sequence_weights
from ..agents.objective import grpo_loss, loss_totals
from ..envs.rubric_env import RubricEnv
from ..graders.reference import make_reference
from ..policy.engine import (
    GenerateEngine, GenerationConfig, Rollout, RolloutEngine, TransformersEngine, token_logprobs,
)
from ..policy.model import Policy
from ..policy.vllm_engine import VLLMEngine
from .seeds import generator, name_key, torch_seed

class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; the run stops and keeps its last good checkpoint."""


@dataclass
class Batch:
    """One step's groups as the agent sees them, plus what only the harness may see (true scores)."""

    groups: Groups
    judge_calls: int
    true_scores: np.ndarray  # (B, G) for diagnostics only; never part of ``groups``


def make_engine(config: TrainConfig, policy: Policy) -> RolloutEngine:
    r = config.rollout
    generation = GenerationConfig(max_new_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p)
    if r.engine == "vllm":
        return VLLMEngine(policy, generation, gpu_memory_utilization=r.vllm_gpu_memory, seed=config.run.seed)
    return GenerateEngine(policy, generation) if r.engine == "generate" else TransformersEngine(policy, generation)


def gradient_outside(per_token: torch.Tensor, rows: torch.Tensor) -> bool:
    """Whether any response outside ``rows`` has a non-zero loss gradient. Exact: comparing a sum over
    every row with a sum over ``rows`` flags a difference of rounding (1 step in 7 on random
    gradients), which stopped runs whose groups had invalid grades."""
    outside = torch.ones(len(per_token), dtype=torch.bool, device=per_token.device)
    outside[rows] = False
    return bool(per_token[outside].any())


class Trainer:
    """Policy, engine, agent, optimiser, the frozen KL model (β > 0) and every random stream of a run."""

    def __init__(self, config: TrainConfig, policy: Policy, envs: list[RubricEnv]) -> None:
        self.config, self.policy, self.envs = config, policy, envs
        seed = config.run.seed
        torch.manual_seed(torch_seed(seed, "sampling"))
        self.task_rng = generator(seed, "tasks")
        self.audit_rng = generator(seed, "audits")  # audits never shift the training noise
        self.grading_rngs = [generator(seed, "grading", name_key(env.benchmark.name)) for env in envs]
        self.engine = make_engine(config, policy)
        o = config.objective
        self.optimizer = torch.optim.AdamW(policy.model.parameters(), lr=o.lr, weight_decay=o.weight_decay)
        self.kl_model = copy.deepcopy(policy.model).eval().requires_grad_(False) if o.beta > 0 else None
        self.agent = build_agent(config)
        self.references = [make_reference(config.setgrpo.reference, env.grader) for env in envs]
        s, r = config.setgrpo, config.rollout
        self.geometry = GradientGeometry(policy.model, s.geometry, temperature=r.temperature,
                                         loss_type=o.loss_type, max_new_tokens=r.max_new_tokens)
        self.warmed_up = False
        self.groups_graded = 0

    # ---------------------------------------------------------------- the step
    def step(self) -> dict[str, Any]:
        """One training step; returns its metrics. The first step of an agent that calibrates
        starts with its warm-up audit of initial-policy groups."""
        t0 = time.perf_counter()
        warmup_calls = self.warm_up() if not self.warmed_up else (0, 0, 0.0)
        t1 = time.perf_counter()
        batch = self.collect(self.config.run.groups_per_step)
        t2 = time.perf_counter()
        needs = self.agent.needs(batch.groups, self.audit_rng)
        geometry = self.geometry_of(batch.groups, needs, keep_gradients=self.update_from_gradients)
        audits, audit_calls, audit_cost = self.audit(batch.groups, needs)
        decision = self.agent.decide(batch.groups, geometry.grams, audits)
        t3 = time.perf_counter()
        optimised = self.optimise(batch.groups.rollout, decision, geometry)
        t4 = time.perf_counter()
        self.agent.update(batch.groups, geometry.grams, audits)
        return {
            **self.step_metrics(batch, decision),
            **optimised,
            "grader_calls": batch.judge_calls + audit_calls + warmup_calls[0],
            "audit_calls": audit_calls + warmup_calls[1],
            # in calls of the training judge: a reference call costs its profile's ``cost``
            "grader_cost": batch.judge_calls + audit_cost + warmup_calls[2],
            "time_warmup": t1 - t0,
            "time_rollout_grade": t2 - t1,
            "time_coefficients": t3 - t2,
            "time_update": t4 - t3,
        }

    def warm_up(self) -> tuple[int, int, float]:
        """Audit a batch of the initial policy into the agent's window (step 0); returns (all judge
        calls, audit calls, their cost in training-judge calls)."""
        self.warmed_up = True
        if not self.agent.warmup_groups:
            return 0, 0, 0.0
        warm = self.collect(self.agent.warmup_groups)
        needs = self.agent.needs(warm.groups, self.audit_rng, warmup=True)
        audits, calls, cost = self.audit(warm.groups, needs)
        self.agent.update(warm.groups, self.geometry_of(warm.groups, needs).grams, audits)
        return warm.judge_calls + calls, calls, warm.judge_calls + cost

    # ---------------------------------------------------------------- 1. rollouts and grades
    def collect(self, n_groups: int) -> Batch:
        """Draw B tasks from the mixture of train splits, sample G responses each, grade each group
        (``judge_repeats`` times on average, scores averaged over the valid draws)."""
        c, G = self.config, self.config.run.group_size
        env_indices = [int(self.task_rng.integers(len(self.envs))) for _ in range(n_groups)]
        tasks = [self.envs[e].benchmark.instance("train", int(self.task_rng.integers(self.envs[e].benchmark.size("train"))))
                 for e in env_indices]
        rollout = self.engine.generate([t.prompt_text for t in tasks for _ in range(G)])
        rewards = np.empty((n_groups, G))
        spreads, true = np.empty_like(rewards), np.empty_like(rewards)
        verdicts, rates, calls = [], [], 0
        for b, (e, task) in enumerate(zip(env_indices, tasks)):
            env = self.envs[e]
            texts = rollout.texts[b * G : (b + 1) * G]
            draws = [env.grade_group(texts, task=task, rng=self.grading_rngs[e]) for _ in range(self._repeats())]
            scores = np.array([[g.score for g in grades] for grades in draws])
            counts = (~np.isnan(scores)).sum(axis=0)
            rewards[b] = np.where(counts > 0, np.nansum(scores, axis=0) / np.maximum(counts, 1), np.nan)
            spreads[b] = np.array([g.spread for g in draws[0]]) / np.sqrt(np.maximum(counts, 1))
            true[b] = [g.true_score for g in draws[0]]
            verdicts.append(np.stack([g.verdicts for g in draws[0]]))
            rates.append(env.judge_error_rates(task))
            calls += sum(g.judge_calls for grades in draws for g in grades)
        observed = true if c.grading.oracle else rewards  # the oracle baseline alone trains on true scores
        return Batch(Groups(rollout, tasks, env_indices, observed, spreads, verdicts, rates), calls, true)

    def _repeats(self) -> int:
        """Judge calls for the next group: ⌊(g + 1)K⌋ − ⌊gK⌋ for the g-th group graded, so that a
        fractional K = ``judge_repeats`` is met within one group over the run (GRPO-Kavg)."""
        k, g = self.config.grading.judge_repeats, self.groups_graded
        self.groups_graded += 1
        return int(np.floor((g + 1) * k + 1e-9) - np.floor(g * k + 1e-9))

    # ---------------------------------------------------------------- 2. what the agent asked for
    def geometry_of(self, groups: Groups, needs: Needs, *, keep_gradients: bool = False) -> Geometry:
        """K of the requested responses of each requested group, from the live policy (and their
        per-response gradients when the update will be formed from them)."""
        rows = {b: groups.rows(b)[valid] for b, valid in needs.grams.items()}
        return self.geometry.grams(groups.rollout, rows, keep_gradients=keep_gradients)

    @property
    def update_from_gradients(self) -> bool:
        """With one pass at ratio 1, no KL term and the trainer's own samples, the GRPO gradient is
        Σ_i κ_i φ_i over the per-response gradients the geometry already formed: no second backward."""
        o = self.config.objective
        return (self.geometry.can_keep_gradients and o.mu == 1 and o.beta == 0
                and not self.engine.needs_correction and self.config.coefficients.selector == "setgrpo")

    def audit(self, groups: Groups, needs: Needs) -> tuple[Audits, int, float]:
        """Reference grades of the requested groups (in group order, from the audit stream), the
        reference calls they took and their cost in training-judge calls."""
        audits, calls, cost = {}, 0, 0.0
        for b in needs.audits:
            reference = self.references[groups.env_indices[b]]
            texts = [groups.rollout.texts[i] for i in groups.rows(b)]
            grades = reference.grade_group(groups.tasks[b], texts, self.audit_rng)
            audits[b] = np.array([g.score for g in grades])
            spent = sum(g.judge_calls for g in grades)
            calls, cost = calls + spent, cost + spent * reference.cost_per_call
        return audits, calls, cost

    # ---------------------------------------------------------------- 3. the update
    def optimise(self, rollout: Rollout, decision: Decision, geometry: Geometry | None = None) -> dict[str, float]:
        """μ passes of the GRPO objective on the batch, with the decision's coefficients (one step
        from the geometry's per-response gradients when it kept them)."""
        o, r, model = self.config.objective, self.config.rollout, self.policy.model
        device = self.policy.device
        rollout = _to(rollout, device)
        coef = torch.tensor(decision.coefficients.reshape(-1), dtype=torch.float32, device=device)
        acc = torch.tensor(decision.accepted.reshape(-1), dtype=torch.bool, device=device)
        if not acc.any():
            return {"loss": 0.0, "clip_fraction": 0.0, "ratio_mean": 1.0, "kl": 0.0, "grad_norm": 0.0}
        if geometry is not None and geometry.gradients is not None:
            return self._step_from_gradients(rollout, coef, acc, geometry)
        totals = loss_totals(rollout.response_mask, acc, o.normalise_over)  # the whole batch's denominators
        # only accepted responses enter the forward passes (the others add zeros), in micro-batches of
        # similar length with their padding trimmed; their losses sum to the batch's loss
        order = acc.nonzero()[:, 0]
        order = order[torch.argsort((rollout.prompt_mask.sum(1) + rollout.response_mask.sum(1))[order])]
        size = r.update_batch
        rows = [order[i : i + size] for i in range(0, len(order), size)]
        micro = [rollout.select(part) for part in rows]
        fixed = [self._fixed_logprobs(part) for part in micro]  # π_old (and π_ref, IS weights) per part
        # The model stays in eval mode: dropout would make log π_θ differ from the sampling policy's
        # log-probabilities even before any update, biasing the ratio (TRL disables it likewise).
        for _ in range(o.mu):
            self.optimizer.zero_grad(set_to_none=True)
            loss, stats, tokens = 0.0, np.zeros(3), 0.0
            for part, index, (old, ref, is_weights) in zip(micro, rows, fixed):
                logprobs = token_logprobs(model, part, r.temperature)
                part_loss, part_stats = grpo_loss(
                    logprobs, old, coef[index], part.response_mask, acc[index], epsilon_low=o.epsilon_low,
                    epsilon_high=o.epsilon_high, clip=o.clip, beta=o.beta, ref_logprobs=ref, loss_type=o.loss_type,
                    max_new_tokens=r.max_new_tokens, is_weights=is_weights, totals=totals,
                )
                if not torch.isfinite(part_loss):
                    raise NonFiniteLossError(f"the loss is {part_loss.item()} (lr={o.lr}); lower the learning rate")
                part_loss.backward()
                weight = float(part.response_mask.sum())
                loss, tokens = loss + part_loss.item(), tokens + weight
                stats += weight * np.array([part_stats.clip_fraction, part_stats.ratio_mean, part_stats.kl])
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), o.max_grad_norm)
            self.optimizer.step()
        self.engine.sync_weights()
        clip_fraction, ratio_mean, kl = stats / max(tokens, 1.0)
        return {"loss": loss, "clip_fraction": clip_fraction, "ratio_mean": ratio_mean, "kl": kl,
                "grad_norm": float(grad_norm)}

    def _fixed_logprobs(self, part: Rollout) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """(π_old, π_ref or None, truncated importance weights or None) of a part of the batch: the
        sampling log-probabilities, or the trainer's own when another engine sampled (vLLM)."""
        r, mask = self.config.rollout, part.response_mask
        old, is_weights, ref = part.logprobs, None, None
        with torch.no_grad():
            if self.engine.needs_correction:
                old = token_logprobs(self.policy.model, part, r.temperature) * mask
                is_weights = torch.exp(old - part.logprobs).clamp(max=r.is_cap) * mask
            if self.kl_model is not None:
                ref = token_logprobs(self.kl_model, part, r.temperature)
        return old, ref, is_weights

    def _step_from_gradients(self, rollout: Rollout, coef: torch.Tensor, acc: torch.Tensor, geometry: Geometry
                             ) -> dict[str, float]:
        """One optimiser step with ∇L = Σ_i κ_i φ_i. κ_i w_i = ∂L/∂log π(o_it), read off the GRPO loss
        itself at ratio 1 (it is constant over a response's tokens), and φ_i = w_i Σ_t ∇log π(o_it)
        are the geometry's per-response gradients at the same parameters."""
        o, r, model = self.config.objective, self.config.rollout, self.policy.model
        mask = rollout.response_mask
        logprobs = rollout.logprobs.clone().requires_grad_(True)
        loss, stats = grpo_loss(logprobs, rollout.logprobs, coef, mask, acc, epsilon_low=o.epsilon_low,
                                epsilon_high=o.epsilon_high, clip=o.clip, loss_type=o.loss_type,
                                max_new_tokens=r.max_new_tokens, normalise_over=o.normalise_over)
        loss.backward()
        per_token = logprobs.grad * mask
        rows = geometry.gradients.rows.to(per_token.device)
        if gradient_outside(per_token, rows):
            raise RuntimeError("an accepted response has no per-response gradient (no Gram matrix was asked for it)")
        weights = sequence_weights(mask, o.loss_type, r.max_new_tokens)[rows]
        kappa = per_token[rows].sum(dim=1) / mask[rows].sum(dim=1).clamp(min=1) / weights
        for k, param in enumerate(self.geometry.params.values()):
            param.grad = geometry.gradients.combine(k, kappa).view_as(param)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), o.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.engine.sync_weights()
        return {"loss": loss.item(), "clip_fraction": stats.clip_fraction, "ratio_mean": stats.ratio_mean,
                "kl": stats.kl, "grad_norm": float(grad_norm)}

    # ---------------------------------------------------------------- 4. what the step did
    def step_metrics(self, batch: Batch, decision: Decision) -> dict[str, Any]:
        """Rewards, true scores (diagnostics only), coefficient statistics, lengths, memory."""
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
            "peak_rss_mb": peak_rss_mb(),
            **({"gpu_peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9} if self.policy.device.type == "cuda" else {}),
        }

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs besides the weights: optimiser, every random stream, the
        agent's state, the warm-up flag and the grading counter."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "task_rng": self.task_rng.bit_generator.state,
            "audit_rng": self.audit_rng.bit_generator.state,
            "grading_rngs": [rng.bit_generator.state for rng in self.grading_rngs],
            "agent": self.agent.state_dict(),
            "warmed_up": self.warmed_up,
            "groups_graded": self.groups_graded,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.task_rng.bit_generator.state = state["task_rng"]
        self.audit_rng.bit_generator.state = state["audit_rng"]
        for rng, rng_state in zip(self.grading_rngs, state["grading_rngs"]):
            rng.bit_generator.state = rng_state
        self.agent.load_state_dict(state["agent"])
        self.warmed_up = bool(state["warmed_up"])
        self.groups_graded = int(state["groups_graded"])


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def _to(rollout: Rollout, device: torch.device) -> Rollout:
    return Rollout(*(t.to(device) for t in (
        rollout.prompt_ids, rollout.prompt_mask, rollout.response_ids, rollout.response_mask, rollout.logprobs,
    )), texts=rollout.texts)
