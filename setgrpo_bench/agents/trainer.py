"""One training step of any agent: sample groups, grade them, turn rewards into coefficients with the
agent's rule, and optimise the shared GRPO objective for μ passes (DESIGN §7)."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..envs.rubric_env import RubricEnv
from ..policy.engine import GenerationConfig, Rollout, TransformersEngine, token_logprobs
from ..policy.model import Policy
from .coefficients import group_coefficients
from .config import TrainConfig
from .objective import grpo_loss


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; the run stops and keeps its last good checkpoint."""


@dataclass
class Batch:
    """B groups of G responses: the rollout, what the agent may use (observed rewards, judge
    spreads) and, kept apart for the harness, the true scores."""

    rollout: Rollout
    env_indices: list[int]
    task_ids: list[str]
    rewards: np.ndarray  # (B, G) observed judge scores, NaN where the judge failed
    spreads: np.ndarray  # (B, G) judge's own score spread estimates
    judge_calls: int
    true_scores: np.ndarray  # (B, G) for diagnostics only; never passed to a coefficient rule


class Trainer:
    """Holds the policy, optimiser and (when β > 0) a frozen reference model."""

    def __init__(self, config: TrainConfig, policy: Policy, envs: list[RubricEnv], rng: np.random.Generator) -> None:
        self.config, self.policy, self.envs, self.rng = config, policy, envs, rng
        self.engine = TransformersEngine(policy, GenerationConfig(
            max_new_tokens=config.max_new_tokens, temperature=config.temperature, top_p=config.top_p,
        ))
        self.optimizer = torch.optim.AdamW(policy.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.reference = None
        if config.beta > 0:
            self.reference = copy.deepcopy(policy.model).eval().requires_grad_(False)

    def sample_batch(self) -> Batch:
        """Draw B tasks from the mixture of train splits, sample G responses each, grade each group."""
        c = self.config
        picks = [(int(self.rng.integers(len(self.envs))), None) for _ in range(c.groups_per_step)]
        tasks = []
        for k, (e, _) in enumerate(picks):
            env = self.envs[e]
            env.reset(options={"index": int(self.rng.integers(env.benchmark.size("train"))), "split": "train"})
            tasks.append(env.task)
        rollout = self.engine.generate([t.prompt_text for t in tasks for _ in range(c.group_size)])
        rewards = np.empty((c.groups_per_step, c.group_size))
        spreads, true = np.empty_like(rewards), np.empty_like(rewards)
        calls = 0
        for b, ((e, _), task) in enumerate(zip(picks, tasks)):
            env = self.envs[e]
            env.task = task
            grades = env.grade_group(rollout.texts[b * c.group_size : (b + 1) * c.group_size])
            rewards[b] = [g.score for g in grades]
            spreads[b] = [g.spread for g in grades]
            true[b] = [g.true_score for g in grades]
            calls += sum(g.judge_calls for g in grades)
        return Batch(rollout, [e for e, _ in picks], [t.id for t in tasks], rewards, spreads, calls, true)

    def coefficients(self, batch: Batch) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """Per-response coefficients (B·G,) and accept mask from the agent's rule. The oracle agent
        alone uses the true scores."""
        c = self.config
        rewards = batch.true_scores if c.oracle else batch.rewards
        coef = np.stack([group_coefficients(c.rule, r, std_floor=c.std_floor) for r in rewards])
        group_used = np.abs(coef).sum(axis=1) > 0
        accepted = np.repeat(group_used, c.group_size) & (coef.reshape(-1) != 0)
        return coef.reshape(-1), accepted, {"accepted_groups": float(group_used.mean())}

    def optimise(self, rollout: Rollout, coefficients: np.ndarray, accepted: np.ndarray) -> dict[str, float]:
        """μ passes of the GRPO objective on the batch."""
        c, model = self.config, self.policy.model
        device = self.policy.device
        rollout = _to(rollout, device)
        coef = torch.tensor(coefficients, dtype=torch.float32, device=device)
        acc = torch.tensor(accepted, dtype=torch.bool, device=device)
        if not acc.any():
            return {"loss": 0.0, "clip_fraction": 0.0, "kl": 0.0, "grad_norm": 0.0}
        old = rollout.logprobs
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
                max_new_tokens=c.max_new_tokens,
            )
            if not torch.isfinite(loss):
                raise NonFiniteLossError(f"the loss is {loss.item()} (lr={c.lr}); lower the learning rate")
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), c.max_grad_norm)
            self.optimizer.step()
        return {
            "loss": loss.item(), "clip_fraction": stats.clip_fraction, "ratio_mean": stats.ratio_mean,
            "kl": stats.kl, "grad_norm": float(grad_norm),
        }

    def step(self) -> dict[str, Any]:
        """One training step; returns its metrics."""
        t0 = time.perf_counter()
        batch = self.sample_batch()
        t1 = time.perf_counter()
        coef, accepted, rule_stats = self.coefficients(batch)
        t2 = time.perf_counter()
        opt_stats = self.optimise(batch.rollout, coef, accepted)
        t3 = time.perf_counter()
        lengths = batch.rollout.response_mask.sum(1).float()
        return {
            "reward": float(np.nanmean(batch.rewards)),
            "true_score": float(batch.true_scores.mean()),
            "invalid_rate": float(np.isnan(batch.rewards).mean()),
            "coef_abs_mean": float(np.abs(coef).mean()),
            "acceptance": float(accepted.mean()),
            **rule_stats,
            **opt_stats,
            "response_tokens": float(lengths.mean()),
            "grader_calls": batch.judge_calls,
            "time_rollout_grade": t1 - t0,
            "time_coefficients": t2 - t1,
            "time_update": t3 - t2,
        }


def _to(rollout: Rollout, device: torch.device) -> Rollout:
    return Rollout(*(t.to(device) for t in (
        rollout.prompt_ids, rollout.prompt_mask, rollout.response_ids, rollout.response_mask, rollout.logprobs,
    )), texts=rollout.texts)
