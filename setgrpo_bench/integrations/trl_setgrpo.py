"""SetGRPO inside TRL (the ``[trl]`` extra; tested with trl 1.16): ``SetGRPOTrainer`` is TRL's
``GRPOTrainer`` with its advantages replaced by SetGRPO's decision, everything else — generation (its
vLLM modes included), logging, checkpointing — left to TRL.

    reward = RubricReward("builtin", seed=0, noise="realistic")          # the training judge
    reference = RubricReward("builtin", seed=1, noise="expert")          # any reward function
    args = SetGRPOConfig(output_dir="runs/trl-setgrpo", num_generations=8, alpha_a_grid="0.5,0.8,0.9", ...)
    SetGRPOTrainer(model=..., reward_funcs=reward, reference_reward=reference, args=args, ...).train()

Per generation batch (each prompt's ``num_generations`` completions form a group): the judge's scores
(and, when the reward function reports them as ``last_spreads``, its own spread of each score, from
which σ comes), reference scores of ``audit_fraction`` of the groups, K of every non-constant group
from the live policy's per-completion gradients (``geometry``: full, last:N, sketch:D, identity), then
``SetGRPOAgent.decide`` — the agent our trainer runs — gives the coefficients: an accepted group's
become its advantages, a rejected group's are zero. The audited groups then join the calibration
window, which is saved with TRL's checkpoints (``setgrpo_window.pt``) and restored on resume. The first
training batch only calibrates (every non-constant group audited, nothing trained on), as our
trainer's warm-up does. TRL's loss then averages over every completion of the batch, rejected ones as
zeros (our ``--normalise-over batch``).

Distributed data parallel (accelerate, several GPUs or nodes): TRL hands each process its slice of the
generation batch, and a group may straddle two processes. Every process gathers the batch (token ids,
texts, dataset columns, the judge's spreads; TRL has gathered the rewards), computes K and the audits of
the groups it owns (group b on process b mod N, on its own replica of the policy), and gathers those;
every process then holds the same groups, K, audits and window and decides the same, and keeps the
coefficients of its own slice. Sharded parameters (FSDP, DeepSpeed ZeRO-3) are refused: each process's
geometry runs its own forward passes, which a sharded model cannot do alone.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import trl
from accelerate.utils import gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOConfig, GRPOTrainer

from ..agents.base import Groups
from ..agents.config import SetGRPOSettings
from ..agents.fields import build_settings
from ..agents.setgrpo import SetGRPOAgent
from ..errors import ConfigError
from ..harness.geometry import GradientGeometry
from ..harness.state_file import load_state, save_state
from ..policy.engine import Rollout

TESTED_TRL = ("1.16.",)
"""TRL versions the trainer is tested on: it overrides four of GRPOTrainer's methods, which TRL may change."""
WINDOW_FILE = "setgrpo_window.pt"
SETTINGS = [name for name in SetGRPOSettings.__pydantic_fields__ if name != "reference"]
"""SetGRPO's settings as TRL config fields (the reference is a reward function given to the trainer)."""
RENAMED = {"delta": "risk_delta"}
"""Our names that TRL's config already uses for something else (its ``delta`` bounds two-sided clipping)."""
LOGGED = ("acceptance_nonconstant", "uncertifiable", "coverage_ref", "reversal_ref", "q", "tau", "alpha_a", "alpha_gate")


def _config_field(name: str) -> tuple[str, type, dataclasses.Field]:
    info = SetGRPOSettings.__pydantic_fields__[name]
    return RENAMED.get(name, name), type(info.default), dataclasses.field(default=info.default,
                                                                         metadata={"help": info.description})


SetGRPOConfig = dataclasses.make_dataclass(
    "SetGRPOConfig",
    [*map(_config_field, SETTINGS),
     ("std_floor", float, dataclasses.field(default=0.05, metadata={"help": "floor of a group's reward std in â and σ"}))],
    bases=(GRPOConfig,),
    namespace={"__doc__": "TRL's ``GRPOConfig`` with SetGRPO's settings, under our names (but ``risk_delta`` for "
                          "LTT's δ: TRL's ``delta`` is its clipping bound) and with our help."},
)
SetGRPOConfig.__module__ = __name__  # TRL pickles its config into each checkpoint


class SetGRPOTrainer(GRPOTrainer):
    """TRL's GRPO trainer whose advantages are SetGRPO's decision (module docstring)."""

    def __init__(self, *args: Any, reference_reward: Callable[..., Sequence[float | None]], **kwargs: Any) -> None:
        if not trl.__version__.startswith(TESTED_TRL):
            warnings.warn(f"SetGRPOTrainer is tested on trl {', '.join(v + 'x' for v in TESTED_TRL)}, not {trl.__version__}: "
                          "check that its tests pass", stacklevel=2)
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, SetGRPOConfig):
            raise ConfigError("args", type(self.args).__name__, "a SetGRPOConfig")
        if self.args.loss_type not in ("grpo", "dr_grpo", "dapo"):
            raise ConfigError("loss_type", self.args.loss_type, "'grpo', 'dr_grpo' or 'dapo' (the losses K knows)")
        if self.accelerator.num_processes > 1 and self.sharded:
            raise ConfigError("distributed setup", "FSDP or DeepSpeed ZeRO-3",
                              "data parallel (DDP, DeepSpeed ZeRO-1/2): K needs whole per-process replicas of the policy")
        settings = build_settings(SetGRPOSettings, {name: getattr(self.args, RENAMED.get(name, name)) for name in SETTINGS})
        self.agent = SetGRPOAgent(settings, std_floor=self.args.std_floor)
        self.reference_reward = reference_reward
        self.audit_rng = np.random.default_rng(self.args.seed)
        self.last_decision = None  # the latest batch's (groups, grams, audits, decision), for inspection
        self.geometry: GradientGeometry | None = None

    # ---------------------------------------------------------------- TRL hooks
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # noqa: ANN001, ANN202
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._scored = (inputs, prompts, completions, completion_ids_list, rewards)
        return rewards

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return output  # evaluation keeps TRL's advantages
        advantages = self.setgrpo_advantages(output)
        output["advantages"] = advantages.to(output["advantages"].device, output["advantages"].dtype)
        return output

    def _save_checkpoint(self, model, trial):  # noqa: ANN001, ANN202
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
            save_state(os.path.join(folder, WINDOW_FILE),
                       {"agent": self.agent.state_dict(), "audit_rng": self.audit_rng.bit_generator.state})

    def _load_optimizer_and_scheduler(self, checkpoint):  # noqa: ANN001, ANN202
        super()._load_optimizer_and_scheduler(checkpoint)
        path = os.path.join(checkpoint, WINDOW_FILE) if checkpoint is not None else None
        if path is not None and os.path.exists(path):
            state = load_state(path)  # plain data only: a crafted pickle is refused unread
            self.agent.load_state_dict(state["agent"])
            self.audit_rng.bit_generator.state = state["audit_rng"]

    # ---------------------------------------------------------------- SetGRPO
    @property
    def sharded(self) -> bool:
        """Whether the policy's parameters are split over processes (FSDP, DeepSpeed ZeRO-3)."""
        plugin = getattr(self.accelerator.state, "deepspeed_plugin", None)
        return bool(self.is_fsdp_enabled or (self.is_deepspeed_enabled and plugin is not None and plugin.zero_stage == 3))

    def setgrpo_advantages(self, output: dict[str, Any]) -> torch.Tensor:
        """SetGRPO's coefficients of this process's completions of the batch just scored (zero where
        rejected): decided on the whole generation batch, identically on every process."""
        local = len(self._scored[1])  # this process's rows of the generation batch (TRL's process slice)
        tensors, inputs, prompts, completions, completion_ids, spreads = self.generation_batch(output)
        rewards = self._scored[4]
        groups = self.groups(tensors, rewards[:, 0].cpu().numpy(), completions, spreads)
        warmup = len(self.agent.window) == 0 and self.agent.warmup_groups > 0
        needs = self.agent.needs(groups, self.audit_rng, warmup=warmup)
        if self.geometry is None:  # built once: it resolves the parameters and hooks of the live model
            self.geometry = GradientGeometry(self.accelerator.unwrap_model(self.model), self.agent.params.geometry,
                                             temperature=self.args.temperature, loss_type=self.args.loss_type,
                                             max_new_tokens=self.args.max_completion_length)
        grams = self.shared(needs.grams, lambda mine: self.geometry.grams(
            groups.rollout, {b: groups.rows(b)[needs.grams[b]] for b in mine}).grams)
        audits = self.shared(needs.audits, lambda mine: self.audit(mine, inputs, prompts, completions, completion_ids))
        if warmup:
            self.agent.update(groups, grams, audits)
            self._log({"warmup_groups": float(len(audits))})
            return torch.zeros(local)
        decision = self.agent.decide(groups, grams, audits)
        self.agent.update(groups, grams, audits)
        self.last_decision = (groups, grams, audits, decision)
        self._log({k: decision.stats[k] for k in LOGGED if k in decision.stats})
        coefficients = np.where(decision.accepted, decision.coefficients, 0.0).reshape(-1)
        start = self.accelerator.process_index * local
        return torch.tensor(coefficients[start : start + local], dtype=torch.float32)

    def generation_batch(self, output: dict[str, Any]) -> tuple[dict[str, torch.Tensor], list, list, list, list, list]:
        """The whole generation batch, gathered from every process in TRL's order: token tensors (padded
        to a common width), dataset rows, prompts, completions, completion ids and the judge's spreads."""
        inputs, prompts, completions, completion_ids, _ = self._scored
        spreads = list(getattr(self.reward_funcs[0], "last_spreads", None) or [0.0] * len(prompts))
        tensors = {k: output[k] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")}
        if self.accelerator.num_processes == 1:
            return tensors, inputs, prompts, completions, completion_ids, spreads
        tensors = {k: self.accelerator.gather(self.accelerator.pad_across_processes(t, dim=1, pad_first=k.startswith("prompt")))
                   for k, t in tensors.items()}  # prompts are left-padded, completions right-padded
        return (tensors, *(gather_object(list(x)) for x in (inputs, prompts, completions, completion_ids, spreads)))

    def shared(self, keys: Sequence[int] | Mapping[int, Any], compute: Callable[[list[int]], dict[int, Any]]) -> dict[int, Any]:
        """``compute`` (group → result) of the groups ``keys``, each computed by the process that owns it
        (group b on process b mod N) and gathered, in the order of ``keys``, on every process."""
        n, rank = self.accelerator.num_processes, self.accelerator.process_index
        part = compute([b for b in keys if b % n == rank])
        if n == 1:
            return part
        merged = {b: value for piece in gather_object([part]) for b, value in piece.items()}
        return {b: merged[b] for b in keys if b in merged}

    def groups(self, tensors: dict[str, torch.Tensor], rewards: np.ndarray, completions: Sequence[Any],
               spreads: Sequence[float]) -> Groups:
        """The batch as our agents see it: B groups of G completions, their scores and the judge's spreads."""
        G = self.num_generations
        if len(rewards) % G:
            raise ConfigError("generation batch", len(rewards), f"whole groups of num_generations = {G}")
        rollout = Rollout(tensors["prompt_ids"].cpu(), tensors["prompt_mask"].cpu(), tensors["completion_ids"].cpu(),
                          tensors["completion_mask"].cpu(), torch.zeros(tensors["completion_ids"].shape),
                          [str(c) for c in completions])
        spreads = np.nan_to_num(np.asarray(spreads, float), nan=0.0)
        return Groups(rollout, [], [], rewards.reshape(-1, G), spreads.reshape(-1, G))

    def audit(self, audited: Sequence[int], inputs: list[dict[str, Any]], prompts: list[Any], completions: list[Any],
              completion_ids: list[Any]) -> dict[int, np.ndarray]:
        """The reference reward of every completion of the audited groups (NaN where it returned None),
        called as TRL calls a reward function: prompts, completions and every dataset column."""
        G = self.num_generations
        rows = [i for b in audited for i in range(b * G, (b + 1) * G)]
        if not rows:
            return {}
        keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
        scores = self.reference_reward(prompts=[prompts[i] for i in rows], completions=[completions[i] for i in rows],
                                       completion_ids=[completion_ids[i] for i in rows],
                                       **{k: [inputs[i][k] for i in rows] for k in keys})
        scores = np.array([np.nan if s is None else float(s) for s in scores])
        return {b: scores[k * G : (k + 1) * G] for k, b in enumerate(audited)}

    def _log(self, stats: dict[str, float]) -> None:
        for key, value in stats.items():
            if np.isfinite(value):  # a rate with nothing to count (no audit, nothing accepted) is not logged
                self._metrics["train"][f"setgrpo/{key}"].append(float(value))
