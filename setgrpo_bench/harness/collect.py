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
from ..graders.reference import make_reference
from .seeds import generator, name_key


@dataclass
class Batch:
    """One step's groups as the agent sees them, plus what only the harness may see (true scores)."""

    groups: Groups
    judge_calls: int
    judge_cost: float  # in training-judge calls (a reference call costs its profile's ``cost``)
    true_scores: np.ndarray  # (B, G) for diagnostics only; never part of ``groups``


class Collector:
    """Samples and grades groups from the live policy (through ``engine``)."""

    def __init__(self, config: TrainConfig, engine: RolloutEngine, envs: list[RubricEnv]) -> None:
        self.config, self.engine, self.envs = config, engine, envs
        self.references = ([make_reference(config.setgrpo.reference, env.grader) for env in envs]
                           if config.grading.rewards_from == "reference" else None)
        seed = config.run.seed
        self.task_rng = generator(seed, "tasks")
        self.grading_rngs = [generator(seed, "grading", name_key(env.benchmark.name)) for env in envs]
        self.groups_graded = 0

    @property
    def groups_per_step(self) -> int:
        """B: the budget's groups, or the reference-graded groups a step buys (``reference_groups``)."""
        g = self.config.grading
        return g.reference_groups if g.rewards_from == "reference" and g.reference_groups else self.config.run.groups_per_step

    def collect(self, n_groups: int) -> Batch:
        """Draw B tasks from the mixture of train splits, sample G responses each, grade each group
        (``judge_repeats`` times on average, scores averaged over the valid draws) by the training judge,
        or by the reference when the rewards come from it (``rewards_from``)."""
        c, G = self.config, self.config.run.group_size
        env_indices = [int(self.task_rng.integers(len(self.envs))) for _ in range(n_groups)]
        tasks = [self.envs[e].benchmark.instance("train", int(self.task_rng.integers(self.envs[e].benchmark.size("train"))))
                 for e in env_indices]
        rollout = self.engine.generate([t.prompt_text for t in tasks for _ in range(G)])
        rewards = np.empty((n_groups, G))
        spreads, true = np.empty_like(rewards), np.empty_like(rewards)
        verdicts, rates, calls, cost = [], [], 0, 0.0
        for b, (e, task) in enumerate(zip(env_indices, tasks)):
            env = self.envs[e]
            texts = rollout.texts[b * G : (b + 1) * G]
            draws = [self._grade(e, task, texts) for _ in range(self._repeats())]
            scores = np.array([[g.score for g in grades] for grades in draws])
            counts = (~np.isnan(scores)).sum(axis=0)
            rewards[b] = np.where(counts > 0, np.nansum(scores, axis=0) / np.maximum(counts, 1), np.nan)
            spreads[b] = np.array([g.spread for g in draws[0]]) / np.sqrt(np.maximum(counts, 1))
            true[b] = [g.true_score for g in draws[0]]
            verdicts.append(np.stack([g.verdicts for g in draws[0]]))
            rates.append(env.judge_error_rates(task))
            spent = sum(g.judge_calls for grades in draws for g in grades)
            calls, cost = calls + spent, cost + spent * self._cost_per_call(e)
        observed = true if c.grading.oracle else rewards  # the oracle baseline alone trains on true scores
        return Batch(Groups(rollout, tasks, env_indices, observed, spreads, verdicts, rates), calls, cost, true)

    def _grade(self, e: int, task: Any, texts: list[str]) -> list[Any]:
        if self.references is not None:
            return self.references[e].grade_group(task, texts, self.grading_rngs[e])
        return self.envs[e].grade_group(texts, task=task, rng=self.grading_rngs[e])

    def _cost_per_call(self, e: int) -> float:
        return self.references[e].cost_per_call if self.references is not None else 1.0

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
