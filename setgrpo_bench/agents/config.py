"""Agent and run configuration: one typed dataclass shared by YAML presets, the CLI and the Python API.

Each field's ``help`` is its one-line documentation (units, range, why this default) and becomes
``--help`` of ``run``. Presets in ``agents/*.yaml`` set any subset of the fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..catalog import catalog_files
from ..errors import ConfigError, SpecError, UnknownNameError
from ..tasks.yamlio import line_of, load_yaml
from ..graders.reference import parse_reference
from .coefficients import COEFFICIENT_RULES
from .geometry import parse_geometry
from .objective import LOSS_TYPES

SELECTORS = ("none", "setgrpo")


def _f(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run."""

    agent: str = _f("grpo", "agent preset name (agents/<name>.yaml)")
    rule: str = _f("grpo", "coefficient rule: rewards of a group → training coefficients")
    oracle: bool = _f(False, "train on the true score (an upper bound, flagged on every report)")
    envs: str = _f("builtin", "'builtin' (the whole suite) or comma-separated env ids / benchmark names")
    noise: str = _f("realistic", "grader noise profile used for training rewards")
    judge: str = _f("", "LLM judge instead of the noise profile: 'tiny' or a local transformers checkpoint")
    judge_url: str = _f("", "LLM judge at an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1)")
    judge_model: str = _f("", "model name served at judge_url")
    judge_api_key_env: str = _f("", "environment variable holding the endpoint's API key (never logged)")
    judge_profile: str = _f("judge-default", "judge question template and sampling (graders/judge-*.yaml)")
    policy: str = _f("tiny", "'tiny' (embedded model) or a transformers causal-LM folder")
    device: str = _f("cpu", "cpu or cuda")
    engine: str = _f("transformers", "rollout engine: transformers (KV cache, CPU/GPU) or vllm (GPU, [vllm] extra)")
    vllm_gpu_memory: float = _f(0.3, "vLLM: share of GPU memory for its weights and KV cache")
    is_cap: float = _f(2.0, "vLLM: truncation C of the per-token importance weight π_old/π_vllm")
    seed: int = _f(0, "seed of task sampling, generation, grading noise and evaluation")
    steps: int = _f(32, "training steps (one batch of groups each)")
    groups_per_step: int = _f(16, "prompts per step (B)")
    group_size: int = _f(8, "responses per prompt (G >= 2)")
    lr: float = _f(5e-4, "AdamW learning rate (1e-3 collapsed a 1M model under heavy noise)")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    max_grad_norm: float = _f(1.0, "gradient clipping norm")
    mu: int = _f(1, "inner optimisation passes over each batch (μ)")
    loss_type: str = _f("grpo", "loss normalisation: grpo (token mean per sequence), dr_grpo, dapo")
    clip: bool = _f(True, "PPO ratio clipping (False: RGRA)")
    epsilon_low: float = _f(0.2, "lower clip range ε_low")
    epsilon_high: float = _f(0.2, "upper clip range ε_high (DAPO uses 0.28)")
    beta: float = _f(0.0, "k3 KL coefficient to the initial policy (0: no reference model)")
    std_floor: float = _f(0.05, "floor of the group std in grpo coefficients (rubric scores are continuous)")
    temperature: float = _f(1.0, "sampling temperature for rollouts and evaluation")
    top_p: float = _f(1.0, "nucleus sampling mass")
    max_new_tokens: int = _f(72, "response length cap in tokens")
    judge_repeats: float = _f(1.0, "judge calls per response, averaged (GRPO-Kavg; fractional: met over the run)")
    qae_quantile: float = _f(0.4, "QAE: quantile K of the group used as baseline")
    qae_std: bool = _f(False, "QAE: also divide by the group std")
    selector: str = _f("none", "'none' (the rule's coefficients train as they are) or 'setgrpo' (DESIGN §8)")
    alpha_a: float = _f(0.5, "SetGRPO (a): miscoverage level α_a of the joint coefficient set C")
    delta_a: float = _f(0.0, "SetGRPO (a): PAC confidence δ_a of the set's coverage (0: plain split conformal)")
    alpha: float = _f(0.2, "SetGRPO (c): risk level α of the conditional direction-reversal risk")
    delta: float = _f(0.1, "SetGRPO (c): Learn-then-Test confidence δ")
    audit_fraction: float = _f(0.25, "SetGRPO: share of each step's groups also graded by the reference grader")
    window: int = _f(128, "SetGRPO: audited groups kept for calibration (split into D1 and D2 halves)")
    warmup_groups: int = _f(48, "SetGRPO: groups of the initial policy audited before the first update")
    reference: str = _f("consensus:5", "reference grader for audits: 'consensus:K' or 'profile:NAME'")
    geometry: str = _f("full", "K from per-response gradients: full, last:N (blocks), sketch:D, identity")
    calibrate: bool = _f(True, "SetGRPO (a): calibrate q on D1 (False: q = fixed_q, the no-calib ablation)")
    fixed_q: float = _f(1.0, "q used when calibrate is False")
    recovery: bool = _f(True, "SetGRPO (b): execute c(λ*) (False: execute â, score by certified radius ratio)")
    gate: bool = _f(True, "SetGRPO (c): gate by the LTT threshold (False: accept every certifiable group)")
    grid_start: float = _f(0.10, "SetGRPO (c): strictest acceptance fraction of the threshold grid")
    grid_step: float = _f(0.05, "SetGRPO (c): acceptance step of the grid (10%, 15%, …, 100%)")
    spread_floor: float = _f(0.01, "SetGRPO (a): floor of the judge spread in the scales σ")
    eval_instances: int = _f(64, "eval-split instances per env (0: the whole split)")
    checkpoint_every: int = _f(1, "steps between checkpoints (resume restarts from the last one)")

    def __post_init__(self) -> None:
        checks = [
            ("group_size", self.group_size >= 2, "an integer >= 2", "GRPO needs at least 2 responses per prompt."),
            ("groups_per_step", self.groups_per_step >= 1, "an integer >= 1", ""),
            ("steps", self.steps >= 0, "an integer >= 0", ""),
            ("mu", self.mu >= 1, "an integer >= 1", ""),
            ("lr", 0 < self.lr < 1, "a number in (0, 1)", ""),
            ("beta", self.beta >= 0, "a number >= 0", ""),
            ("epsilon_low", 0 <= self.epsilon_low < 1, "a number in [0, 1)", ""),
            ("epsilon_high", self.epsilon_high >= 0, "a number >= 0", ""),
            ("max_grad_norm", self.max_grad_norm > 0, "a number > 0", ""),
            ("temperature", self.temperature > 0, "a number > 0", ""),
            ("top_p", 0 < self.top_p <= 1, "a number in (0, 1]", ""),
            ("max_new_tokens", self.max_new_tokens >= 1, "an integer >= 1", ""),
            ("eval_instances", self.eval_instances >= 0, "an integer >= 0", ""),
            ("checkpoint_every", self.checkpoint_every >= 1, "an integer >= 1", ""),
            ("std_floor", self.std_floor >= 0, "a number >= 0", ""),
            ("judge_repeats", self.judge_repeats >= 1, "a number >= 1", ""),
            ("qae_quantile", 0 <= self.qae_quantile <= 1, "a number in [0, 1]", ""),
            ("alpha_a", 0 < self.alpha_a < 1, "a number in (0, 1)", ""),
            ("delta_a", 0 <= self.delta_a < 1, "a number in [0, 1)", "0 selects plain split conformal."),
            ("alpha", 0 < self.alpha < 1, "a number in (0, 1)", ""),
            ("delta", 0 < self.delta < 1, "a number in (0, 1)", ""),
            ("audit_fraction", 0 <= self.audit_fraction <= 1, "a number in [0, 1]", ""),
            ("window", self.window >= 4, "an integer >= 4", "D1 and D2 each need calibration groups."),
            ("warmup_groups", self.warmup_groups >= 0, "an integer >= 0", ""),
            ("fixed_q", self.fixed_q >= 0, "a number >= 0", ""),
            ("grid_start", 0 < self.grid_start <= 1, "a number in (0, 1]", ""),
            ("grid_step", 0 < self.grid_step <= 1, "a number in (0, 1]", ""),
            ("spread_floor", self.spread_floor > 0, "a number > 0", "σ must be positive."),
        ]
        for name, ok, allowed, fix in checks:
            value = getattr(self, name)
            if not ok or (isinstance(value, float) and not math.isfinite(value)):
                raise ConfigError(name, value, allowed, fix)
        if self.rule not in COEFFICIENT_RULES:
            raise UnknownNameError("coefficient rule", self.rule, COEFFICIENT_RULES)
        if self.loss_type not in LOSS_TYPES:
            raise UnknownNameError("loss type", self.loss_type, LOSS_TYPES)
        if self.engine not in ("transformers", "vllm"):
            raise UnknownNameError("engine", self.engine, ("transformers", "vllm"))
        if self.engine == "vllm" and not self.device.startswith("cuda"):
            raise ConfigError("engine", "vllm", "'transformers' on device cpu", "vLLM runs on CUDA: add --device cuda.")
        if self.judge and self.judge_url:
            raise ConfigError("judge_url", self.judge_url, "empty when judge is set", "Use a local judge or an endpoint, not both.")
        if self.judge_url and not self.judge_model:
            raise ConfigError("judge_model", self.judge_model, "the model name served at judge_url")
        if self.selector not in SELECTORS:
            raise UnknownNameError("selector", self.selector, SELECTORS)
        if self.selector == "setgrpo":
            if self.oracle:
                raise ConfigError("oracle", True, "False with selector 'setgrpo'",
                                  "The oracle trains on true scores; it has nothing to calibrate.")
            if self.rule != "grpo":
                raise ConfigError("rule", self.rule, "'grpo' with selector 'setgrpo'", "SetGRPO's â are GRPO coefficients.")
            if self.warmup_groups == 0 and self.audit_fraction == 0:
                raise ConfigError("audit_fraction", 0, "> 0 or warmup_groups > 0", "SetGRPO needs calibration groups.")
            parse_geometry(self.geometry)
            parse_reference(self.reference)
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ConfigError("device", self.device, "'cpu', 'cuda' or 'cuda:N'")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> TrainConfig:
        return replace(self, **changes)


FIELDS = {f.name: f for f in fields(TrainConfig)}


def coerce(name: str, value: Any, source: str = "override") -> Any:
    """Convert ``value`` (e.g. a CLI string) to the type of field ``name``; clear error otherwise."""
    if name not in FIELDS:
        raise UnknownNameError("config field", name, FIELDS)
    default = FIELDS[name].default
    kind = type(default) if default is not MISSING else str
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "1", "yes"):
                return True
            if str(value).lower() in ("false", "0", "no"):
                return False
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(name, value, f"a {kind.__name__} ({source})") from None


def preset_paths() -> dict[str, Path]:
    return {path.stem: path for path in catalog_files("agents", "*.yaml")}


def load_preset(name: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields set by preset ``name`` (``agents/<name>.yaml`` in the catalog search path).

    ``extends: OTHER`` starts from preset OTHER's fields, so an ablation states only what it changes.
    """
    paths = preset_paths()
    if name not in paths:
        raise UnknownNameError("agent", name, paths)
    path = paths[name]
    data, lines = load_yaml(path)
    if not isinstance(data, Mapping):
        raise SpecError("expected a mapping of config fields", file=str(path), line=1)
    out: dict[str, Any] = {}
    if "extends" in data:
        base = str(data["extends"])
        if base in (*_seen, name):
            raise SpecError(f"presets extend each other in a cycle: {' -> '.join((*_seen, name, base))}",
                            file=str(path), line=line_of(lines, "extends"), field="extends")
        try:
            out.update(load_preset(base, (*_seen, name)))
        except UnknownNameError as exc:
            raise SpecError(str(exc), file=str(path), line=line_of(lines, "extends"), field="extends") from None
    out["agent"] = name
    for key, value in data.items():
        if key == "extends":
            continue
        try:
            out[key] = coerce(key, value, source=str(path))
        except (ConfigError, UnknownNameError) as exc:
            raise SpecError(str(exc), file=str(path), line=line_of(lines, key), field=key) from None
    return out


def budget_matched_repeats(setgrpo: TrainConfig) -> float:
    """K for GRPO-Kavg so that its judge calls match SetGRPO's over the same run: SetGRPO grades
    steps·B groups for training, the warm-up batch once plus K_ref times (its audit), and
    ⌈f·B⌉ audited groups per step K_ref times (K_ref = consensus size, 1 for a profile reference);
    constant groups are not audited, so the measured ratio is slightly lower."""
    kind, arg = parse_reference(setgrpo.reference)
    k_ref = int(arg) if kind == "consensus" else 1
    training = setgrpo.steps * setgrpo.groups_per_step
    audits = setgrpo.warmup_groups * (1 + k_ref) + setgrpo.steps * math.ceil(setgrpo.audit_fraction * setgrpo.groups_per_step) * k_ref
    return (training + audits) / training


def resolve_config(agent: str, overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """Defaults ← preset ``agent`` ← ``overrides`` (CLI values as strings or typed values)."""
    values = load_preset(agent)
    for key, value in (overrides or {}).items():
        values[key] = coerce(key, value)
    return TrainConfig(**values)
