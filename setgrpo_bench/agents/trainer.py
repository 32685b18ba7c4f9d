"""One training step of any agent: sample groups, grade them, let the agent turn them into
coefficients and an accept mask, and optimise the shared GRPO objective for μ passes (DESIGN §7)."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..envs.rubric_env import RubricEnv
from ..graders.reference import make_reference
from ..policy.engine import GenerationConfig, Rollout, TransformersEngine, token_logprobs
from ..policy.model import Policy
from .base import Agent, Groups, RuleAgent
from .config import TrainConfig
from .diagnostics import true_score_diagnostics
from .geometry import GradientGeometry
from .objective import grpo_loss
from .setgrpo import Auditor, SetGRPOAgent, SetGRPOParams

AUDIT_STREAM = 7  # seeds the auditor's own random stream: audits never shift the training noise


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; the run stops and keeps its last good checkpoint."""


@dataclass
class Batch:
    """One step's groups as the agent sees them, plus what only the harness may see (true scores)."""

    groups: Groups
    judge_calls: int
    true_scores: np.ndarray  # (B, G) for diagnostics only; never part of ``groups``

    @property
    def rollout(self) -> Rollout:
        return self.groups.rollout


def build_agent(config: TrainConfig, policy: Policy, envs: list[RubricEnv]) -> Agent:
    """The agent of ``config``: a coefficient rule, or SetGRPO around the GRPO rule."""
    if config.selector == "none":
        return RuleAgent(config.rule, std_floor=config.std_floor, qae_quantile=config.qae_quantile,
                         qae_std=config.qae_std)
    geometry = GradientGeometry(policy.model, config.geometry, temperature=config.temperature,
                                loss_type=config.loss_type, max_new_tokens=config.max_new_tokens)
    auditor = Auditor([make_reference(config.reference, env.grader) for env in envs],
                      np.random.default_rng([config.seed, AUDIT_STREAM]))
    params = SetGRPOParams.from_config(config)
    return SetGRPOAgent(params, lambda groups, b, valid: geometry.gram(groups.rollout, groups.rows(b)[valid]), auditor)


class Trainer:
    """Holds the policy, the agent, the optimiser and (when β > 0) a frozen reference model."""

    def __init__(self, config: TrainConfig, policy: Policy, envs: list[RubricEnv], rng: np.random.Generator) -> None:
        self.config, self.policy, self.envs, self.rng = config, policy, envs, rng
        generation = GenerationConfig(max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                                      top_p=config.top_p)
        if config.engine == "vllm":
            from ..policy.vllm_engine import VLLMEngine

            self.engine = VLLMEngine(policy, generation, gpu_memory_utilization=config.vllm_gpu_memory, seed=config.seed)
        else:
            self.engine = TransformersEngine(policy, generation)
        self.optimizer = torch.optim.AdamW(policy.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.reference = None
        if config.beta > 0:
            self.reference = copy.deepcopy(policy.model).eval().requires_grad_(False)
        self.agent = build_agent(config, policy, envs)
        self.warmed_up = False
        self.groups_graded = 0

    def sample_batch(self, n_groups: int | None = None) -> Batch:
        """Draw B tasks from the mixture of train splits, sample G responses each, grade each group
        (``judge_repeats`` times on average, scores averaged over the valid draws)."""
        c = self.config
        n_groups = n_groups or c.groups_per_step
        env_indices = [int(self.rng.integers(len(self.envs))) for _ in range(n_groups)]
        tasks = []
        for e in env_indices:
            env = self.envs[e]
            env.reset(options={"index": int(self.rng.integers(env.benchmark.size("train"))), "split": "train"})
            tasks.append(env.task)
        rollout = self.engine.generate([t.prompt_text for t in tasks for _ in range(c.group_size)])
        rewards = np.empty((n_groups, c.group_size))
        spreads, true = np.empty_like(rewards), np.empty_like(rewards)
        verdicts, rates, calls = [], [], 0
        for b, (e, task) in enumerate(zip(env_indices, tasks)):
            env = self.envs[e]
            env.task = task
            texts = rollout.texts[b * c.group_size : (b + 1) * c.group_size]
            draws = [env.grade_group(texts) for _ in range(self._repeats())]
            scores = np.array([[g.score for g in grades] for grades in draws])
            counts = (~np.isnan(scores)).sum(axis=0)
            rewards[b] = np.where(counts > 0, np.nansum(scores, axis=0) / np.maximum(counts, 1), np.nan)
            spreads[b] = np.array([g.spread for g in draws[0]]) / np.sqrt(np.maximum(counts, 1))
            true[b] = [g.true_score for g in draws[0]]
            verdicts.append(np.stack([g.verdicts for g in draws[0]]))
            rates.append(env.grader.stated_rates(task))
            calls += sum(g.judge_calls for grades in draws for g in grades)
        observed = true if c.oracle else rewards  # the oracle baseline alone trains on true scores
        return Batch(Groups(rollout, tasks, env_indices, observed, spreads, verdicts, rates), calls, true)

    def _repeats(self) -> int:
        """Judge calls for the next group: ⌊(g + 1)K⌋ − ⌊gK⌋ for the g-th group graded, so that a
        fractional K = ``judge_repeats`` is met within one group over the run (GRPO-Kavg)."""
        k, g = self.config.judge_repeats, self.groups_graded
        self.groups_graded += 1
        return int(np.floor((g + 1) * k + 1e-9) - np.floor(g * k + 1e-9))

    def optimise(self, rollout: Rollout, coefficients: np.ndarray, accepted: np.ndarray) -> dict[str, float]:
        """μ passes of the GRPO objective on the batch."""
        c, model = self.config, self.policy.model
        device = self.policy.device
        rollout = _to(rollout, device)
        coef = torch.tensor(coefficients, dtype=torch.float32, device=device)
        acc = torch.tensor(accepted, dtype=torch.bool, device=device)
        if not acc.any():
            return {"loss": 0.0, "clip_fraction": 0.0, "ratio_mean": 1.0, "kl": 0.0, "grad_norm": 0.0}
        old, is_weights = rollout.logprobs, None
        if getattr(self.engine, "needs_correction", False):  # sampled by vLLM: π_old is the trainer's own
            with torch.no_grad():
                old = token_logprobs(model, rollout, c.temperature) * rollout.response_mask
            is_weights = torch.exp(old - rollout.logprobs).clamp(max=c.is_cap) * rollout.response_mask
        ref = None
        if self.reference is not None:
            with torch.no_grad():
                ref = token_logprobs(self.reference, rollout, c.temperature)
        # The model stays in eval mode: dropout would make log π_θ differ from the sampling policy's
        # log-probabilities even before any update, biasing the ratio (TRL disables it likewise).
        for _ in range(c.mu):
            logprobs = token_logprobs(model, rollout, c.temperature)
            loss, stats = grpo_loss(
                logprobs, old, coef, rollout.response_mask, acc, epsilon_low=c.epsilon_low,
                epsilon_high=c.epsilon_high, clip=c.clip, beta=c.beta, ref_logprobs=ref, loss_type=c.loss_type,
                max_new_tokens=c.max_new_tokens, is_weights=is_weights,
            )
            if not torch.isfinite(loss):
                raise NonFiniteLossError(f"the loss is {loss.item()} (lr={c.lr}); lower the learning rate")
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), c.max_grad_norm)
            self.optimizer.step()
        if hasattr(self.engine, "sync_weights"):
            self.engine.sync_weights()
        return {
            "loss": loss.item(), "clip_fraction": stats.clip_fraction, "ratio_mean": stats.ratio_mean,
            "kl": stats.kl, "grad_norm": float(grad_norm),
        }

    def step(self) -> dict[str, Any]:
        """One training step; returns its metrics. The first step of an agent that calibrates
        starts with its warm-up audit of initial-policy groups."""
        t0 = time.perf_counter()
        warmup_calls = 0
        if not self.warmed_up and self.agent.warmup_groups:
            warm = self.sample_batch(self.agent.warmup_groups)
            warmup_calls = warm.judge_calls + self.agent.warm_up(warm.groups)
        self.warmed_up = True
        t1 = time.perf_counter()
        batch = self.sample_batch()
        t2 = time.perf_counter()
        decision = self.agent.decide(batch.groups)
        t3 = time.perf_counter()
        opt_stats = self.optimise(batch.rollout, decision.coefficients.reshape(-1), decision.accepted.reshape(-1))
        t4 = time.perf_counter()
        lengths = batch.rollout.response_mask.sum(1).float()
        rewards = batch.groups.rewards
        return {
            "reward": float(np.nanmean(rewards)),
            "true_score": float(batch.true_scores.mean()),
            "invalid_rate": float(np.isnan(rewards).mean()),
            "coef_abs_mean": float(np.abs(decision.coefficients).mean()),
            "acceptance": float(decision.accepted.mean()),
            **decision.stats,
            **true_score_diagnostics(decision.records, batch.true_scores, std_floor=self.config.std_floor),
            **opt_stats,
            "response_tokens": float(lengths.mean()),
            "grader_calls": batch.judge_calls + decision.grader_calls + warmup_calls,
            "audit_calls": decision.grader_calls + warmup_calls,
            "time_warmup": t1 - t0,
            "time_rollout_grade": t2 - t1,
            "time_coefficients": t3 - t2,
            "time_update": t4 - t3,
            **({"gpu_peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9} if self.policy.device.type == "cuda" else {}),
        }

    def state_dict(self) -> dict[str, Any]:
        """Agent state, warm-up flag and grading counter, for checkpoints."""
        return {"agent": self.agent.state_dict(), "warmed_up": self.warmed_up, "groups_graded": self.groups_graded}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.warmed_up = bool(state["warmed_up"])
        self.groups_graded = int(state["groups_graded"])


def _to(rollout: Rollout, device: torch.device) -> Rollout:
    return Rollout(*(t.to(device) for t in (
        rollout.prompt_ids, rollout.prompt_mask, rollout.response_ids, rollout.response_mask, rollout.logprobs,
    )), texts=rollout.texts)
