"""Run configuration: one typed dataclass per concern, shared by YAML presets, the CLI and the Python API.

``TrainConfig`` groups the settings of a run by the component they configure (the run itself, the
policy and its rollouts, the grading, the GRPO objective, the coefficient rule, SetGRPO). Each field's
``help`` is its one-line documentation (units, range, why this default) and becomes a flag of
``run``; flag names are the field names, which are unique across groups. Presets in
``agents/*.yaml`` and saved run configs are flat mappings of those names.

Validation happens at construction: every value is checked against its range, and a knob of a
component the config does not select (``--alpha-a`` for GRPO, ``--qae-quantile`` for another rule)
is an error rather than a silent no-op. Values are checked by pydantic
(types, bounds, NaN) with our messages (``build_settings``). Importing this module does not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, field
from dataclasses import dataclass as plain_dataclass
from typing import Annotated, Any

from pydantic import AfterValidator
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo

from ..errors import ConfigError, UnknownNameError
from ..tasks.benchmark import EVAL_PARTS
from .coefficients import coefficient_rules
from .fields import (
    STRICT,
    build_settings,
    check_device,
    field_of,
    known_judge,
    known_reference,
    known_reporters,
    one_of,
    parse_geometry,
    parse_levels,
)
from .plugins import selectors
from .protocol import load_protocol

LOSS_TYPES = ("grpo", "dr_grpo", "dapo")
REWARD_SOURCES = ("judge", "reference")
STOP_RULES = ("none", "audit_gap", "idle")
NORMALISERS = ("accepted", "batch")
EXECUTE = ("recovered", "original")
ENGINES = ("transformers", "generate", "vllm")
DEPLOYMENT_FIELDS = ("device", "engine", "vllm_gpu_memory", "checkpoint_every", "judge_api_key_env", "threads",
                     "update_batch", "report_to")
"""Where and how a run executes, not what it computes: left out of the experiment's identity, so a
run may resume on another device and seeds run on CPU and GPU publish together."""


ADDED_LATER = {"eval_every": 0}
"""Settings added after runs were archived → the value under which such a run was made (runs recorded
before the held-out curve made none)."""


@dataclass(config=STRICT)
class RunSettings:
    """What is trained on, for how long, and how it is evaluated."""

    agent: str = field_of("grpo", "agent preset name (agents/<name>.yaml)")
    envs: str = field_of("builtin", "'builtin' (the whole suite) or comma-separated env ids / benchmark names")
    seed: int = field_of(0, "seed of task sampling, generation, grading noise and evaluation", ge=0)
    steps: int = field_of(32, "training steps (one batch of groups each)", ge=0)
    groups_per_step: int = field_of(16, "prompts per step (B)", ge=1)
    group_size: int = field_of(8, "responses per prompt (G >= 2)", ge=2, fix="GRPO needs at least 2 responses per prompt.")
    eval_instances: int = field_of(64, "instances per env of the evaluated part of the eval split (0: all of it)", ge=0)
    eval_split: Annotated[str, AfterValidator(one_of("eval split", EVAL_PARTS))] = field_of(
        "dev", "the part of each eval split the final evaluation uses: 'dev' (its first 64 instances, on which presets "
               "and defaults may be chosen) or 'test' (the rest, kept for a board's final numbers)")
    eval_every: int = field_of(20, "steps between held-out evaluations of the training policy on the dev split (its "
                                   "curve, stored with the run; 0: none)", ge=0)
    curve_instances: int = field_of(16, "dev instances per env at each point of the held-out curve (16: about 5% of a "
                                        "board run's time)", ge=1)
    checkpoint_every: int = field_of(1, "steps between checkpoints (resume restarts from the last one)", ge=1)
    protocol: str = field_of("", "board protocol (protocols/<name>.yaml) whose budget the run follows, as name@version")
    report_to: Annotated[str, AfterValidator(known_reporters)] = field_of(
        "", "also report each step's metrics to: 'tensorboard', 'wandb' (offline) or both, comma-separated, in the "
            "run folder ('': metrics.jsonl only)")


@dataclass(config=STRICT)
class RolloutSettings:
    """The policy, the device it runs on and how it samples."""

    policy: str = field_of("tiny", "'tiny' (embedded model) or a transformers causal-LM folder")
    device: Annotated[str, AfterValidator(check_device)] = field_of("cpu", "cpu, cuda or cuda:N")
    engine: Annotated[str, AfterValidator(one_of("engine", ENGINES))] = field_of(
        "transformers", "rollout engine: transformers (a sampling loop over the model's forward with its KV cache), "
        "generate (transformers' generate, any model), vllm (GPU, [vllm] extra)")
    vllm_gpu_memory: float = field_of(0.3, "vLLM: share of GPU memory for its weights and KV cache", gt=0, lt=1)
    is_cap: float = field_of(2.0, "vLLM: truncation C of the per-token importance weight π_old/π_vllm", ge=1)
    temperature: float = field_of(1.0, "sampling temperature for rollouts and evaluation", gt=0)
    top_p: float = field_of(1.0, "nucleus sampling mass", gt=0, le=1)
    max_new_tokens: int = field_of(72, "response length cap in tokens", ge=1)
    threads: int = field_of(1, "torch threads: 1 gives the same numbers run after run on one machine (another CPU's kernels "
                               "differ in the last bits) and holds up beside other work "
                               "(2 threads ran 2.5× slower than 1 beside one busy process); 0: OMP_NUM_THREADS, else every "
                               "core; sweep gives each of N parallel runs cores/N", ge=0)
    update_batch: int = field_of(16, "responses per forward/backward of the update (less memory, faster on CPU; the same "
                           "update)", ge=1)

    def __post_init__(self) -> None:
        if self.engine == "vllm" and not self.device.startswith("cuda"):
            raise ConfigError("engine", "vllm", "'transformers' or 'generate' on device cpu", "vLLM runs on CUDA: add --device cuda.")


@dataclass(config=STRICT)
class GradingSettings:
    """Where the training rewards come from: a simulated noisy judge, an LLM judge, or (oracle) the truth."""

    noise: Annotated[str, AfterValidator(lambda v: known_judge(v))] = field_of(
        "realistic", "the training judge: a judge profile, simulated (graders/*.yaml noise profiles) or model-backed "
                     "(learned)")
    judge: str = field_of("", "LLM judge instead of the noise profile: 'tiny' or a local transformers checkpoint")
    judge_url: str = field_of("", "LLM judge at an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1)")
    judge_model: str = field_of("", "model name served at judge_url")
    judge_api_key_env: str = field_of("", "environment variable holding the endpoint's API key (never logged)")
    judge_profile: str = field_of("judge-default", "judge question template and sampling (graders/judge-*.yaml)")
    judge_repeats: float = field_of(1.0, "judge calls per response, averaged (GRPO-Kavg; fractional: met over the run)", ge=1)
    oracle: bool = field_of(False, "train on the true score (an upper bound, flagged on every report)")
    rewards_from: Annotated[str, AfterValidator(one_of("reward source", REWARD_SOURCES))] = field_of(
        "judge", "who grades the training groups: the training 'judge', or the 'reference' (the auditor, at its cost per "
                 "call: the teacher instead of the auditor)")
    reference_groups: int = field_of(0, "with rewards_from 'reference': groups sampled and graded per step (0: "
                                        "groups_per_step; fewer buy the reference at another agent's judge cost)", ge=0)

    def __post_init__(self) -> None:
        if self.judge and self.judge_url:
            raise ConfigError("judge_url", self.judge_url, "empty when judge is set", "Use a local judge or an endpoint, not both.")
        if self.judge_url and not self.judge_model:
            raise ConfigError("judge_model", self.judge_model, "the model name served at judge_url")

    @property
    def uses_llm_judge(self) -> bool:
        return bool(self.judge or self.judge_url)


@dataclass(config=STRICT)
class ObjectiveSettings:
    """The GRPO objective every agent optimises, and its optimiser."""

    lr: float = field_of(5e-4, "AdamW learning rate (1e-3 collapsed a 1M model under heavy noise)", gt=0, lt=1)
    weight_decay: float = field_of(0.0, "AdamW weight decay", ge=0)
    max_grad_norm: float = field_of(1.0, "gradient clipping norm", gt=0)
    mu: int = field_of(1, "inner optimisation passes over each batch (μ)", ge=1)
    loss_type: Annotated[str, AfterValidator(one_of("loss type", LOSS_TYPES))] = field_of(
        "grpo", "loss normalisation: grpo (token mean per sequence), dr_grpo, dapo")
    clip: bool = field_of(True, "PPO ratio clipping (False: RGRA)")
    epsilon_low: float = field_of(0.2, "lower clip range ε_low", ge=0, lt=1)
    epsilon_high: float = field_of(0.2, "upper clip range ε_high (DAPO uses 0.28)", ge=0)
    beta: float = field_of(0.0, "k3 KL coefficient to the initial policy (0: no reference model)", ge=0)
    normalise_over: Annotated[str, AfterValidator(one_of("loss normaliser", NORMALISERS))] = field_of(
        "batch", "loss mean over every response of the 'batch' (TRL's: zero-coefficient and rejected responses count "
        "as zeros, so fewer informative groups make a smaller step) or over the 'accepted' responses only")


@dataclass(config=STRICT)
class CoefficientSettings:
    """The coefficient rule (rewards of a group → training coefficients) and the optional selector."""

    rule: Annotated[str, AfterValidator(one_of("coefficient rule", coefficient_rules))] = field_of(
        "grpo", "coefficient rule: rewards of a group → training coefficients")
    selector: Annotated[str, AfterValidator(one_of("selector", selectors))] = field_of(
        "none", "'none' (the rule's coefficients train as they are) or 'setgrpo' (SetGRPO)")
    std_floor: float = field_of(0.05, "floor of the group std in grpo coefficients (rubric scores are continuous)", ge=0)
    qae_quantile: float = field_of(0.4, "QAE: quantile K of the group used as baseline", ge=0, le=1)
    qae_std: bool = field_of(False, "QAE: also divide by the group std")


@dataclass(config=STRICT)
class SetGRPOSettings:
    """SetGRPO's three modules: (a) the joint coefficient set, (b) safe recovery, (c) the risk gate."""

    alpha_a: float = field_of(0.5, "SetGRPO (a): miscoverage level α_a of the joint coefficient set C (when alpha_a_grid is empty)",
                        gt=0, lt=1)
    alpha_a_grid: Annotated[str, AfterValidator(lambda v: parse_levels(v) is not None and v)] = field_of(
        "", "SetGRPO (a)+(c): set levels α_a tried inside the risk test, comma-separated (e.g. '0.5,0.8,0.9'; "
        "Bonferroni over them keeps LTT's guarantee); empty: α_a is fixed at alpha_a")
    delta_a: float = field_of(0.0, "SetGRPO (a): PAC confidence δ_a of the set's coverage (0: plain split conformal)",
                        ge=0, lt=1, fix="0 selects plain split conformal.")
    alpha: float = field_of(0.2, "SetGRPO (c): risk level α of the conditional direction-reversal risk", gt=0, lt=1)
    delta: float = field_of(0.1, "SetGRPO (c): Learn-then-Test confidence δ", gt=0, lt=1)
    audit_fraction: float = field_of(0.25, "SetGRPO: share of each step's groups also graded by the reference grader",
                               ge=0, le=1)
    window: int = field_of(128, "SetGRPO: audited groups kept for calibration (split into D1 and D2 halves)", ge=4,
                     fix="D1 and D2 each need calibration groups.")
    warmup_groups: int = field_of(48, "SetGRPO: groups of the initial policy audited before the first update", ge=0)
    drift_steps: int = field_of(0, "SetGRPO (c): test the window at α × GRPO's reversal rate in the window / its rate "
                                "among the groups audited in the last drift_steps steps, when that is higher (0: at α)",
                                ge=0)
    reference: Annotated[str, AfterValidator(lambda v: known_reference(v))] = field_of(
        "profile:expert", "reference grader for audits: 'profile:NAME' (an independent judge; default the 10×-cost "
        "'expert') or 'consensus:K' (K more calls of the same judge: shares its biases)")
    geometry: Annotated[str, AfterValidator(lambda v: parse_geometry(v) and v)] = field_of(
        "full", "K from per-response gradients: full, last:N (blocks), sketch:D, identity")
    calibrate: bool = field_of(True, "SetGRPO (a): calibrate q on D1 (False: q = fixed_q, the no-calib ablation)")
    fixed_q: float = field_of(1.0, "q used when calibrate is False", ge=0)
    recovery: bool = field_of(True, "SetGRPO (b): execute c(λ*) (False: execute â, score by certified radius ratio)")
    gate: bool = field_of(True, "SetGRPO (c): gate by the LTT threshold (False: accept every certifiable group)")
    gate_start: float = field_of(0.0, "SetGRPO (c): the LTT walk starts at the first threshold that accepts at least this "
                           "share of D2 (0: at the first testable one)", ge=0, le=1)
    execute: Annotated[str, AfterValidator(one_of("executed coefficients", EXECUTE))] = field_of(
        "recovered", "SetGRPO: what accepted groups train on: 'recovered' (c(λ*)) or 'original' (â; λ* only gates)")
    grid_start: float = field_of(0.10, "SetGRPO (c): strictest acceptance fraction of the threshold grid", gt=0, le=1)
    grid_step: float = field_of(0.05, "SetGRPO (c): acceptance step of the grid (10%, 15%, …, 100%)", gt=0, le=1)
    spread_floor: float = field_of(0.01, "SetGRPO (a): floor of the judge spread in the scales σ", gt=0,
                             fix="σ must be positive.")


@dataclass(config=STRICT)
class StopSettings:
    """When training ends before its last step, from what the agent sees (never the true score)."""

    stop: Annotated[str, AfterValidator(one_of("stopping rule", STOP_RULES))] = field_of(
        "none", "stop training early: 'audit_gap' (reference audits: the running mean of judge − audit rises "
                "stop_margin above its running minimum) or 'idle' (the agent trained on nothing for stop_idle steps)")
    stop_audits: int = field_of(4, "audit_gap: groups a step graded by the reference", ge=1)
    stop_window: int = field_of(10, "audit_gap: steps in the running mean of judge − audit", ge=1)
    stop_margin: float = field_of(0.10, "audit_gap: rise of that mean over its running minimum that stops training", gt=0)
    stop_idle: int = field_of(10, "idle: consecutive steps with no group trained on that stop training", ge=1)


GROUPS: dict[str, type] = {
    "run": RunSettings, "rollout": RolloutSettings, "grading": GradingSettings, "objective": ObjectiveSettings,
    "coefficients": CoefficientSettings, "setgrpo": SetGRPOSettings, "stopping": StopSettings,
}
FIELDS: dict[str, FieldInfo] = {name: f for group in GROUPS.values() for name, f in group.__pydantic_fields__.items()}
"""Every setting by its flat name (the CLI flag and preset key): ``.default``, ``.description`` (its help)."""
GROUP_OF: dict[str, str] = {name: group_name for group_name, group in GROUPS.items() for name in group.__pydantic_fields__}


@plain_dataclass(frozen=True)
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
    stopping: StopSettings = field(default_factory=StopSettings)

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
        if self.grading.rewards_from == "reference" and (self.grading.oracle or self.coefficients.selector == "setgrpo"):
            raise ConfigError("rewards_from", "reference", "'judge' with oracle or selector 'setgrpo'",
                              "The oracle trains on true scores, SetGRPO audits the judge with the reference.")
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
            out.update(dict.fromkeys(SetGRPOSettings.__pydantic_fields__, "selector 'setgrpo'"))
            if self.uses_reference:
                del out["reference"]
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
        if self.stopping.stop != "audit_gap":
            out.update(dict.fromkeys(("stop_audits", "stop_window", "stop_margin"), "stop 'audit_gap'"))
        if self.stopping.stop != "idle":
            out["stop_idle"] = "stop 'idle'"
        if self.grading.rewards_from != "reference":
            out["reference_groups"] = "rewards_from 'reference'"
        return out

    @property
    def uses_reference(self) -> bool:
        """Whether the run calls the reference grader (SetGRPO's audits, an audit stop, reference rewards)."""
        return (self.coefficients.selector == "setgrpo" or self.stopping.stop == "audit_gap"
                or self.grading.rewards_from == "reference")

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]) -> TrainConfig:
        """A config from flat field names (a preset, CLI overrides, a saved ``config.json``)."""
        unknown = sorted(set(values) - set(FIELDS))
        if unknown:
            raise UnknownNameError("config field", unknown[0], FIELDS)
        parts: dict[str, dict[str, Any]] = {name: {} for name in GROUPS}
        for name, value in values.items():
            parts[GROUP_OF[name]][name] = value
        return cls(**{name: build_settings(GROUPS[name], part) for name, part in parts.items()})

    @classmethod
    def from_record(cls, values: Mapping[str, Any]) -> TrainConfig:
        """The config of a recorded run (``config.json``): a setting added after it was recorded takes
        the value that reproduces it (``ADDED_LATER``), not today's default."""
        return cls.from_flat({**ADDED_LATER, **values})

    def to_dict(self) -> dict[str, Any]:
        """The flat mapping of every setting (what ``config.json`` and submissions record)."""
        return {k: v for group in GROUPS for k, v in asdict(getattr(self, group)).items()}

    def experiment(self) -> dict[str, Any]:
        """The settings that define what a run computes: all but ``DEPLOYMENT_FIELDS``."""
        return {k: v for k, v in self.to_dict().items() if k not in DEPLOYMENT_FIELDS}

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with some flat settings changed."""
        return TrainConfig.from_flat({**self.to_dict(), **changes})
