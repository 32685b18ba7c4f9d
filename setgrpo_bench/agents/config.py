"""Run configuration: one typed dataclass per concern, shared by YAML presets, the CLI and the Python API.

``TrainConfig`` groups the settings of a run by the component they configure (the run itself, the
policy and its rollouts, the grading, the GRPO objective, the coefficient rule, SetGRPO). Each field's
``help`` is its one-line documentation (units, range, why this default) and becomes a flag of
``run``; flag names are the field names, which are unique across groups. Presets in
``agents/*.yaml`` and saved run configs are flat mappings of those names.

Validation happens at construction: every value is checked against its range, and a knob of a
component the config does not select (``--alpha-a`` for GRPO, ``--qae-quantile`` for another rule)
is an error rather than a silent no-op. Importing this module does not import torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import Field, asdict, dataclass, field, fields
from typing import Any

from ..errors import ConfigError, UnknownNameError
from ..graders.reference import parse_reference
from .coefficients import COEFFICIENT_RULES
from .protocol import load_protocol

SELECTORS = ("none", "setgrpo")
LOSS_TYPES = ("grpo", "dr_grpo", "dapo")
NORMALISERS = ("accepted", "batch")
ENGINES = ("transformers", "generate", "vllm")
DEPLOYMENT_FIELDS = ("device", "engine", "vllm_gpu_memory", "checkpoint_every", "judge_api_key_env", "threads",
                     "update_batch")
"""Where and how a run executes, not what it computes: left out of the experiment's identity, so a
run may resume on another device and seeds run on CPU and GPU publish together."""


def _f(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


def _check(rows: list[tuple[str, Any, bool, str, str]]) -> None:
    """Raise ``ConfigError`` for the first (name, value, ok, allowed, fix) that is not ok or not finite."""
    for name, value, ok, allowed, fix in rows:
        if not ok or (isinstance(value, float) and not math.isfinite(value)):
            raise ConfigError(name, value, allowed, fix)


def parse_geometry(spec: str) -> tuple[str, int]:
    """``full`` | ``identity`` | ``last:N`` | ``sketch:D`` → (kind, size)."""
    kind, _, arg = str(spec).partition(":")
    if kind in ("full", "identity") and not arg:
        return kind, 0
    if kind in ("last", "sketch") and arg.isdigit() and int(arg) >= 1:
        return kind, int(arg)
    raise ConfigError("geometry", spec, "'full', 'identity', 'last:N' or 'sketch:D' with a positive integer")


@dataclass(frozen=True)
class RunSettings:
    """What is trained on, for how long, and how it is evaluated."""

    agent: str = _f("grpo", "agent preset name (agents/<name>.yaml)")
    envs: str = _f("builtin", "'builtin' (the whole suite) or comma-separated env ids / benchmark names")
    seed: int = _f(0, "seed of task sampling, generation, grading noise and evaluation")
    steps: int = _f(32, "training steps (one batch of groups each)")
    groups_per_step: int = _f(16, "prompts per step (B)")
    group_size: int = _f(8, "responses per prompt (G >= 2)")
    eval_instances: int = _f(64, "eval-split instances per env (0: the whole split)")
    checkpoint_every: int = _f(1, "steps between checkpoints (resume restarts from the last one)")
    protocol: str = _f("", "board protocol (protocols/<name>.yaml) whose budget the run follows, as name@version")

    def __post_init__(self) -> None:
        _check([
            ("seed", self.seed, self.seed >= 0, "an integer >= 0", ""),
            ("steps", self.steps, self.steps >= 0, "an integer >= 0", ""),
            ("groups_per_step", self.groups_per_step, self.groups_per_step >= 1, "an integer >= 1", ""),
            ("group_size", self.group_size, self.group_size >= 2, "an integer >= 2",
             "GRPO needs at least 2 responses per prompt."),
            ("eval_instances", self.eval_instances, self.eval_instances >= 0, "an integer >= 0", ""),
            ("checkpoint_every", self.checkpoint_every, self.checkpoint_every >= 1, "an integer >= 1", ""),
        ])


@dataclass(frozen=True)
class RolloutSettings:
    """The policy, the device it runs on and how it samples."""

    policy: str = _f("tiny", "'tiny' (embedded model) or a transformers causal-LM folder")
    device: str = _f("cpu", "cpu, cuda or cuda:N")
    engine: str = _f("transformers", "rollout engine: transformers (a sampling loop over the model's forward with its "
                     "KV cache), generate (transformers' generate, any model), vllm (GPU, [vllm] extra)")
    vllm_gpu_memory: float = _f(0.3, "vLLM: share of GPU memory for its weights and KV cache")
    is_cap: float = _f(2.0, "vLLM: truncation C of the per-token importance weight π_old/π_vllm")
    temperature: float = _f(1.0, "sampling temperature for rollouts and evaluation")
    top_p: float = _f(1.0, "nucleus sampling mass")
    max_new_tokens: int = _f(72, "response length cap in tokens")
    threads: int = _f(0, "torch threads (0: every core this process may use; sweep gives each of N parallel runs cores/N)")
    update_batch: int = _f(16, "responses per forward/backward of the update (less memory, faster on CPU; the same update)")

    def __post_init__(self) -> None:
        _check([
            ("threads", self.threads, self.threads >= 0, "an integer >= 0", ""),
            ("update_batch", self.update_batch, self.update_batch >= 1, "an integer >= 1", ""),
            ("device", self.device, self.device in ("cpu", "cuda") or self.device.startswith("cuda:"),
             "'cpu', 'cuda' or 'cuda:N'", ""),
            ("vllm_gpu_memory", self.vllm_gpu_memory, 0 < self.vllm_gpu_memory < 1, "a number in (0, 1)", ""),
            ("is_cap", self.is_cap, self.is_cap >= 1, "a number >= 1", ""),
            ("temperature", self.temperature, self.temperature > 0, "a number > 0", ""),
            ("top_p", self.top_p, 0 < self.top_p <= 1, "a number in (0, 1]", ""),
            ("max_new_tokens", self.max_new_tokens, self.max_new_tokens >= 1, "an integer >= 1", ""),
        ])
        if self.engine not in ENGINES:
            raise UnknownNameError("engine", self.engine, ENGINES)
        if self.engine == "vllm" and not self.device.startswith("cuda"):
            raise ConfigError("engine", "vllm", "'transformers' or 'generate' on device cpu", "vLLM runs on CUDA: add --device cuda.")


@dataclass(frozen=True)
class GradingSettings:
    """Where the training rewards come from: a simulated noisy judge, an LLM judge, or (oracle) the truth."""

    noise: str = _f("realistic", "grader noise profile used for training rewards")
    judge: str = _f("", "LLM judge instead of the noise profile: 'tiny' or a local transformers checkpoint")
    judge_url: str = _f("", "LLM judge at an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1)")
    judge_model: str = _f("", "model name served at judge_url")
    judge_api_key_env: str = _f("", "environment variable holding the endpoint's API key (never logged)")
    judge_profile: str = _f("judge-default", "judge question template and sampling (graders/judge-*.yaml)")
    judge_repeats: float = _f(1.0, "judge calls per response, averaged (GRPO-Kavg; fractional: met over the run)")
    oracle: bool = _f(False, "train on the true score (an upper bound, flagged on every report)")

    def __post_init__(self) -> None:
        _check([("judge_repeats", self.judge_repeats, self.judge_repeats >= 1, "a number >= 1", "")])
        if self.judge and self.judge_url:
            raise ConfigError("judge_url", self.judge_url, "empty when judge is set", "Use a local judge or an endpoint, not both.")
        if self.judge_url and not self.judge_model:
            raise ConfigError("judge_model", self.judge_model, "the model name served at judge_url")

    @property
    def uses_llm_judge(self) -> bool:
        return bool(self.judge or self.judge_url)


@dataclass(frozen=True)
class ObjectiveSettings:
    """The GRPO objective every agent optimises, and its optimiser."""

    lr: float = _f(5e-4, "AdamW learning rate (1e-3 collapsed a 1M model under heavy noise)")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    max_grad_norm: float = _f(1.0, "gradient clipping norm")
    mu: int = _f(1, "inner optimisation passes over each batch (μ)")
    loss_type: str = _f("grpo", "loss normalisation: grpo (token mean per sequence), dr_grpo, dapo")
    clip: bool = _f(True, "PPO ratio clipping (False: RGRA)")
    epsilon_low: float = _f(0.2, "lower clip range ε_low")
    epsilon_high: float = _f(0.2, "upper clip range ε_high (DAPO uses 0.28)")
    beta: float = _f(0.0, "k3 KL coefficient to the initial policy (0: no reference model)")
    normalise_over: str = _f("accepted", "loss mean over 'accepted' responses, or the whole 'batch' (rejected "
                             "responses count as zeros: fewer accepted groups, a smaller step)")

    def __post_init__(self) -> None:
        _check([
            ("lr", self.lr, 0 < self.lr < 1, "a number in (0, 1)", ""),
            ("weight_decay", self.weight_decay, self.weight_decay >= 0, "a number >= 0", ""),
            ("max_grad_norm", self.max_grad_norm, self.max_grad_norm > 0, "a number > 0", ""),
            ("mu", self.mu, self.mu >= 1, "an integer >= 1", ""),
            ("epsilon_low", self.epsilon_low, 0 <= self.epsilon_low < 1, "a number in [0, 1)", ""),
            ("epsilon_high", self.epsilon_high, self.epsilon_high >= 0, "a number >= 0", ""),
            ("beta", self.beta, self.beta >= 0, "a number >= 0", ""),
        ])
        if self.loss_type not in LOSS_TYPES:
            raise UnknownNameError("loss type", self.loss_type, LOSS_TYPES)
        if self.normalise_over not in NORMALISERS:
            raise UnknownNameError("loss normaliser", self.normalise_over, NORMALISERS)


@dataclass(frozen=True)
class CoefficientSettings:
    """The coefficient rule (rewards of a group → training coefficients) and the optional selector."""

    rule: str = _f("grpo", "coefficient rule: rewards of a group → training coefficients")
    selector: str = _f("none", "'none' (the rule's coefficients train as they are) or 'setgrpo' (SetGRPO)")
    std_floor: float = _f(0.05, "floor of the group std in grpo coefficients (rubric scores are continuous)")
    qae_quantile: float = _f(0.4, "QAE: quantile K of the group used as baseline")
    qae_std: bool = _f(False, "QAE: also divide by the group std")

    def __post_init__(self) -> None:
        _check([
            ("std_floor", self.std_floor, self.std_floor >= 0, "a number >= 0", ""),
            ("qae_quantile", self.qae_quantile, 0 <= self.qae_quantile <= 1, "a number in [0, 1]", ""),
        ])
        if self.rule not in COEFFICIENT_RULES:
            raise UnknownNameError("coefficient rule", self.rule, COEFFICIENT_RULES)
        if self.selector not in SELECTORS:
            raise UnknownNameError("selector", self.selector, SELECTORS)


@dataclass(frozen=True)
class SetGRPOSettings:
    """SetGRPO's three modules: (a) the joint coefficient set, (b) safe recovery, (c) the risk gate."""

    alpha_a: float = _f(0.5, "SetGRPO (a): miscoverage level α_a of the joint coefficient set C")
    delta_a: float = _f(0.0, "SetGRPO (a): PAC confidence δ_a of the set's coverage (0: plain split conformal)")
    alpha: float = _f(0.2, "SetGRPO (c): risk level α of the conditional direction-reversal risk")
    delta: float = _f(0.1, "SetGRPO (c): Learn-then-Test confidence δ")
    audit_fraction: float = _f(0.25, "SetGRPO: share of each step's groups also graded by the reference grader")
    window: int = _f(128, "SetGRPO: audited groups kept for calibration (split into D1 and D2 halves)")
    warmup_groups: int = _f(48, "SetGRPO: groups of the initial policy audited before the first update")
    reference: str = _f("profile:expert", "reference grader for audits: 'profile:NAME' (an independent judge; "
                        "default the 10×-cost 'expert') or 'consensus:K' (K more calls of the same judge: shares its biases)")
    geometry: str = _f("full", "K from per-response gradients: full, last:N (blocks), sketch:D, identity")
    calibrate: bool = _f(True, "SetGRPO (a): calibrate q on D1 (False: q = fixed_q, the no-calib ablation)")
    fixed_q: float = _f(1.0, "q used when calibrate is False")
    recovery: bool = _f(True, "SetGRPO (b): execute c(λ*) (False: execute â, score by certified radius ratio)")
    gate: bool = _f(True, "SetGRPO (c): gate by the LTT threshold (False: accept every certifiable group)")
    grid_start: float = _f(0.10, "SetGRPO (c): strictest acceptance fraction of the threshold grid")
    grid_step: float = _f(0.05, "SetGRPO (c): acceptance step of the grid (10%, 15%, …, 100%)")
    spread_floor: float = _f(0.01, "SetGRPO (a): floor of the judge spread in the scales σ")

    def __post_init__(self) -> None:
        _check([
            ("alpha_a", self.alpha_a, 0 < self.alpha_a < 1, "a number in (0, 1)", ""),
            ("delta_a", self.delta_a, 0 <= self.delta_a < 1, "a number in [0, 1)", "0 selects plain split conformal."),
            ("alpha", self.alpha, 0 < self.alpha < 1, "a number in (0, 1)", ""),
            ("delta", self.delta, 0 < self.delta < 1, "a number in (0, 1)", ""),
            ("audit_fraction", self.audit_fraction, 0 <= self.audit_fraction <= 1, "a number in [0, 1]", ""),
            ("window", self.window, self.window >= 4, "an integer >= 4", "D1 and D2 each need calibration groups."),
            ("warmup_groups", self.warmup_groups, self.warmup_groups >= 0, "an integer >= 0", ""),
            ("fixed_q", self.fixed_q, self.fixed_q >= 0, "a number >= 0", ""),
            ("grid_start", self.grid_start, 0 < self.grid_start <= 1, "a number in (0, 1]", ""),
            ("grid_step", self.grid_step, 0 < self.grid_step <= 1, "a number in (0, 1]", ""),
            ("spread_floor", self.spread_floor, self.spread_floor > 0, "a number > 0", "σ must be positive."),
        ])
        parse_geometry(self.geometry)
        parse_reference(self.reference)


GROUPS: dict[str, type] = {
    "run": RunSettings, "rollout": RolloutSettings, "grading": GradingSettings, "objective": ObjectiveSettings,
    "coefficients": CoefficientSettings, "setgrpo": SetGRPOSettings,
}
FIELDS: dict[str, Field] = {f.name: f for group in GROUPS.values() for f in fields(group)}
"""Every setting by its flat name (the CLI flag and preset key)."""
GROUP_OF: dict[str, str] = {f.name: name for name, group in GROUPS.items() for f in fields(group)}


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run, grouped by component.

    >>> config = TrainConfig.from_flat({"agent": "setgrpo", "selector": "setgrpo", "alpha_a": 0.3})
    >>> config.setgrpo.alpha_a, config.to_dict()["alpha_a"]
    (0.3, 0.3)
    """

    run: RunSettings = field(default_factory=RunSettings)
    rollout: RolloutSettings = field(default_factory=RolloutSettings)
    grading: GradingSettings = field(default_factory=GradingSettings)
    objective: ObjectiveSettings = field(default_factory=ObjectiveSettings)
    coefficients: CoefficientSettings = field(default_factory=CoefficientSettings)
    setgrpo: SetGRPOSettings = field(default_factory=SetGRPOSettings)

    def __post_init__(self) -> None:
        if self.run.protocol:  # the one place a protocol's budget is enforced
            load_protocol(self.run.protocol).check(self.to_dict())
        if self.coefficients.selector == "setgrpo":
            if self.grading.oracle:
                raise ConfigError("oracle", True, "False with selector 'setgrpo'",
                                  "The oracle trains on true scores; it has nothing to calibrate.")
            if self.coefficients.rule != "grpo":
                raise ConfigError("rule", self.coefficients.rule, "'grpo' with selector 'setgrpo'",
                                  "SetGRPO's â are GRPO coefficients.")
            if self.setgrpo.warmup_groups == 0 and self.setgrpo.audit_fraction == 0:
                raise ConfigError("audit_fraction", 0, "> 0 or warmup_groups > 0", "SetGRPO needs calibration groups.")
        flat = self.to_dict()
        for name, needs in self.unused_knobs().items():
            default = FIELDS[name].default
            if flat[name] != default:
                raise ConfigError(
                    name, flat[name], f"its default {default!r}: agent '{self.run.agent}' does not use it "
                    f"(it applies only with {needs})", f"Remove --{name.replace('_', '-')} or choose a config with {needs}.")

    def unused_knobs(self) -> dict[str, str]:
        """Knobs of components this config does not select → the selection that would use them."""
        out: dict[str, str] = {}
        s = self.setgrpo
        if self.coefficients.selector != "setgrpo":
            out.update(dict.fromkeys((f.name for f in fields(SetGRPOSettings)), "selector 'setgrpo'"))
        else:
            out.update({"fixed_q": "calibrate false"} if s.calibrate else {"delta_a": "calibrate true"})
            if not s.gate:
                out.update(dict.fromkeys(("alpha", "delta", "grid_start", "grid_step"), "gate true"))
        if self.coefficients.rule != "qae":
            out.update(dict.fromkeys(("qae_quantile", "qae_std"), "rule 'qae'"))
        if self.rollout.engine != "vllm":
            out.update(dict.fromkeys(("vllm_gpu_memory", "is_cap"), "engine 'vllm'"))
        if not self.grading.judge_url:
            out.update(dict.fromkeys(("judge_model", "judge_api_key_env"), "judge_url"))
        if self.grading.uses_llm_judge:
            out["noise"] = "no LLM judge (noise profiles simulate one)"
        else:
            out["judge_profile"] = "judge or judge_url"
        if not self.objective.clip:
            out.update(dict.fromkeys(("epsilon_low", "epsilon_high"), "clip true"))
        return out

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]) -> TrainConfig:
        """A config from flat field names (a preset, CLI overrides, a saved ``config.json``)."""
        unknown = sorted(set(values) - set(FIELDS))
        if unknown:
            raise UnknownNameError("config field", unknown[0], FIELDS)
        parts: dict[str, dict[str, Any]] = {name: {} for name in GROUPS}
        for name, value in values.items():
            parts[GROUP_OF[name]][name] = value
        return cls(**{name: GROUPS[name](**part) for name, part in parts.items()})

    def to_dict(self) -> dict[str, Any]:
        """The flat mapping of every setting (what ``config.json`` and submissions record)."""
        return {k: v for group in GROUPS for k, v in asdict(getattr(self, group)).items()}

    def experiment(self) -> dict[str, Any]:
        """The settings that define what a run computes: all but ``DEPLOYMENT_FIELDS``."""
        return {k: v for k, v in self.to_dict().items() if k not in DEPLOYMENT_FIELDS}

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with some flat settings changed."""
        return TrainConfig.from_flat({**self.to_dict(), **changes})
