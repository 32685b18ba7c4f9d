"""Reference grades of the groups an agent asks to audit (DESIGN §8): the stronger judge, from its own
random stream, so that auditing never shifts the training judge's noise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..agents.base import Audits, Groups, Needs
from ..agents.config import TrainConfig
from ..envs.rubric_env import RubricEnv
from ..graders.reference import make_reference
from .seeds import generator


@dataclass(frozen=True)
class AuditResult:
    """Reference scores of each audited group (NaN where the reference failed), the reference calls
    they took and their cost in training-judge calls (a call of a ``cost: 10`` judge counts 10)."""

    grades: Audits = field(default_factory=dict)
    calls: int = 0
    cost: float = 0.0


class Auditor:
    """One reference grader per benchmark of the suite and the audit stream."""

    def __init__(self, config: TrainConfig, envs: list[RubricEnv]) -> None:
        self.rng = generator(config.run.seed, "audits")
        self.references = [make_reference(config.setgrpo.reference, env.grader) for env in envs]

    def audit(self, groups: Groups, needs: Needs) -> AuditResult:
        """Reference grades of the groups ``needs.audits``, in group order."""
        grades, calls, cost = {}, 0, 0.0
        for b in needs.audits:
            reference = self.references[groups.env_indices[b]]
            texts = [groups.rollout.texts[i] for i in groups.rows(b)]
            graded = reference.grade_group(groups.tasks[b], texts, self.rng)
            grades[b] = np.array([g.score for g in graded])
            spent = sum(g.judge_calls for g in graded)
            calls, cost = calls + spent, cost + spent * reference.cost_per_call
        return AuditResult(grades, calls, cost)

    def state_dict(self) -> dict[str, Any]:
        return {"audit_rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["audit_rng"]
