"""What an agent sees of a step and what it decides (DESIGN §7).

An agent turns one step's groups into per-response training coefficients and an accept mask; the
shared GRPO objective does the rest. A step talks to an agent in three calls:

    needs = agent.needs(groups, rng)              which groups need a Gram matrix K, which are audited
    decision = agent.decide(groups, grams, audits) pure: coefficients and accept mask
    agent.update(groups, grams, audits)            what the agent learns from the step (its window)
    agent.after_step(decision)                     what it keeps of its decision (a stopping rule)

The harness computes the Gram matrices and the reference audits in between, so an agent never
touches a model or a grader. ``Groups`` holds only test-time information (observed judge scores and
the judge's own spreads): the true rubric score is not part of it, so no agent can train on it (the
oracle baseline is handed true scores *as* its rewards, and is flagged as such).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..tasks.model import TaskInstance
from .coefficients import group_coefficients

if TYPE_CHECKING:
    from ..policy.engine import Rollout


@dataclass
class Groups:
    """B groups of G responses: the rollout (group b is rows b·G … b·G + G − 1) and its grades."""

    rollout: Rollout
    tasks: list[TaskInstance]
    env_indices: list[int]
    rewards: np.ndarray  # (B, G) observed judge scores, NaN where the judge failed
    spreads: np.ndarray  # (B, G) the judge's own standard-deviation estimate of each score
    verdicts: list[np.ndarray] | None = None  # per group (G, J) observed per-criterion verdicts
    rates: list[tuple[np.ndarray, np.ndarray] | None] | None = None  # per group the judge's stated (fp, fn), if any

    @property
    def n_groups(self) -> int:
        return self.rewards.shape[0]

    @property
    def group_size(self) -> int:
        return self.rewards.shape[1]

    def rows(self, b: int) -> np.ndarray:
        """Rollout rows of group b."""
        return np.arange(b * self.group_size, (b + 1) * self.group_size)


@dataclass
class GroupRecord:
    """How a set-valued agent treated one non-constant group, for diagnostics (shapes (G_valid,))."""

    index: int  # the group's position in the step
    valid: np.ndarray  # (G,) bool, responses with a valid grade
    a_hat: np.ndarray
    sigma: np.ndarray  # per-response scales σ
    rho: np.ndarray  # radii q·σ of the set C
    gram: np.ndarray  # (G_valid, G_valid)
    executed: np.ndarray
    score: float
    certifiable: bool
    accepted: bool
    a_ref: np.ndarray | None = None  # reference coefficients when the group was audited


@dataclass
class Decision:
    """Per-response coefficients (B, G) and accept mask (B, G); statistics for ``metrics.jsonl``."""

    coefficients: np.ndarray
    accepted: np.ndarray
    stats: dict[str, float] = field(default_factory=dict)
    records: list[GroupRecord] = field(default_factory=list)


@dataclass(frozen=True)
class Needs:
    """What an agent asks the harness to compute before it decides: the Gram matrix of the responses
    ``grams[b]`` (a (G,) bool mask) of group b, and reference grades of the groups ``audits``."""

    grams: dict[int, np.ndarray] = field(default_factory=dict)
    audits: tuple[int, ...] = ()


Grams = Mapping[int, np.ndarray]
"""Group index → K (G_valid × G_valid) over the responses the agent asked for."""
Audits = Mapping[int, np.ndarray]
"""Group index → the reference grader's scores of the group's G responses (NaN where it failed)."""


class Agent(ABC):
    """Base class. Stateful agents (SetGRPO's calibration window) save and restore their state."""

    warmup_groups: int = 0  # groups of the initial policy to audit before the first update
    stopped: bool = False
    """True once the agent has ended training (a stopping rule, ``agents.stopping``): the run ends."""
    grams_cover_accepted: bool = False
    """True when every response the agent may accept is one it asked a Gram matrix for: the harness
    may then form the update from the geometry's per-response gradients (one backward pass, not two)."""

    def needs(self, groups: Groups, rng: np.random.Generator, *, warmup: bool = False) -> Needs:
        """Gram matrices and audits this agent wants for ``groups`` (``warmup``: a calibration-only
        batch of the initial policy). ``rng`` picks audited groups."""
        return Needs()

    @abstractmethod
    def decide(self, groups: Groups, grams: Grams, audits: Audits) -> Decision:
        """Coefficients and accept mask for one step's groups; changes nothing in the agent."""

    def update(self, groups: Groups, grams: Grams, audits: Audits) -> None:
        """Learn from a step's audits, after its decision (or from the warm-up batch)."""

    def after_step(self, decision: Decision) -> None:
        """What the agent keeps of its own decision once the step is taken (a stopping rule's count)."""

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs to decide as this agent would have, as plain data (dicts, lists,
        numbers, strings, numpy arrays): checkpoints store it without pickle."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


class RuleAgent(Agent):
    """A coefficient rule applied group by group (GRPO and the rule-based baselines).

    Invalid grades get coefficient 0 and are left out; a group whose coefficients are all zero
    (constant rewards) contributes nothing. Rules that work through the criteria (``s_grpo``,
    ``noise_corrected``) get the judge's stated error rates and verdicts of each group.
    """

    def __init__(self, rule: str, **params: Any) -> None:
        self.rule, self.params = rule, params

    def _inputs(self, groups: Groups, b: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if self.rule not in ("s_grpo", "noise_corrected"):
            return {}, {}
        if groups.rates is None or groups.verdicts is None or groups.rates[b] is None:
            raise ConfigError("rule", self.rule, "a judge with stated per-criterion error rates (a noise profile)",
                              "LLM judges state none; use a rule that needs only rewards.")
        fp, fn = groups.rates[b]
        points = groups.tasks[b].points
        if self.rule == "s_grpo":
            weights = np.abs(points) / np.abs(points).sum()
            return {}, {"flip_rate": float(weights @ (0.5 * (fp + fn)))}
        return {"verdicts": groups.verdicts[b]}, {"points": points, "false_positive": fp, "false_negative": fn}

    def decide(self, groups: Groups, grams: Grams, audits: Audits) -> Decision:
        rows = []
        for b, rewards in enumerate(groups.rewards):
            per_response, extra = self._inputs(groups, b)
            rows.append(group_coefficients(self.rule, rewards, per_response, **self.params, **extra))
        coef = np.stack(rows)
        kept = np.isfinite(coef) & ~np.isnan(groups.rewards)
        coef = np.where(np.isfinite(coef), coef, 0.0)
        used = np.abs(coef).sum(axis=1) > 0
        return Decision(coef, used[:, None] & kept, {"accepted_groups": float(used.mean())})
