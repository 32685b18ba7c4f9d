"""Rollouts and grades of one step (DESIGN §7): B tasks from the mixture of the suite's train splits,
G responses each, every group graded by the training judge.

The collector owns the task stream and one grading stream per benchmark, so a group's grades do not
depend on which other benchmarks were drawn. True scores travel beside the groups
(``Batch.true_scores``), never inside them: an agent cannot read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..agents.base import Groups
from ..agents.config import TrainConfig
from ..envs.rubric_env import RubricEnv
from ..policy.engine import RolloutEngine
from .seeds import generator, name_key


@dataclass
class Batch:
    """One step's groups as the agent sees them, plus what only the harness may see (true scores)."""

    groups: Groups
    judge_calls: int
    true_scores: np.ndarray  # (B, G) for diagnostics only; never part of ``groups``


class Collector:
    """Samples and grades groups from the live policy (through ``engine``)."""

    def __init__(self, config: TrainConfig, engine: RolloutEngine, envs: list[RubricEnv]) -> None:
        self.config, self.engine, self.envs = config, engine, envs
        seed = config.run.seed
        self.task_rng = generator(seed, "tasks")
        self.grading_rngs = [generator(seed, "grading", name_key(env.benchmark.name)) for env in envs]
        self.groups_graded = 0

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

    def state_dict(self) -> dict[str, Any]:
        return {"task_rng": self.task_rng.bit_generator.state, "groups_graded": self.groups_graded,
                "grading_rngs": [rng.bit_generator.state for rng in self.grading_rngs]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.task_rng.bit_generator.state = state["task_rng"]
        for rng, rng_state in zip(self.grading_rngs, state["grading_rngs"]):
            rng.bit_generator.state = rng_state
        self.groups_graded = int(state["groups_graded"])
