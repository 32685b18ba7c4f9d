"""The suite a run trains and is evaluated on: its environments and its hash (DESIGN §9, §10).

The suite hash names everything that defines what a score means — every benchmark's instances and
rubrics, their score rules, the judge and the evaluation size — and is computed from the config
alone, without building environments or loading a judge model.
"""

from __future__ import annotations

from typing import Any

from ..agents.config import TrainConfig
from ..catalog import builtin_root
from ..envs import benchmark_paths, load_env_benchmark
from ..envs.rubric_env import RubricEnv
from ..graders.endpoint import EndpointJudge, endpoint_base
from ..graders.judge_profiles import judge_profile
from ..graders.llm_judge import LLMJudgeGrader, load_judge_profile
from ..hashing import stable_hash


def env_names(spec: str) -> list[str]:
    """Benchmark names from ``builtin`` or a comma-separated list of env ids / names."""
    if spec == "builtin":
        envs_dir = builtin_root() / "envs"
        return sorted(n for n, p in benchmark_paths().items() if p.is_relative_to(envs_dir))
    names = []
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        name = item.removeprefix("setgrpo/").rsplit("-v", 1)[0] if item.startswith("setgrpo/") else item
        load_env_benchmark(name)  # raises with a suggestion when unknown
        names.append(name)
    return names


def make_judge(config: TrainConfig) -> Any:
    """The LLM judge backend of ``config`` (local model or endpoint), or None for a noise profile."""
    g = config.grading
    if g.judge:
        from ..judges import (
            TransformersJudge,  # loads a model: imported only for a local judge
        )

        return TransformersJudge(g.judge, config.rollout.device)
    if g.judge_url:
        profile = load_judge_profile(g.judge_profile)
        return EndpointJudge(g.judge_url, g.judge_model, api_key_env=g.judge_api_key_env or None,
                             concurrency=profile.concurrency, timeout_s=profile.timeout_s, backoff_s=profile.backoff_s)
    return None


def make_envs(config: TrainConfig) -> list[RubricEnv]:
    """One train-split env per benchmark of the config's suite, graded by its judge."""
    backend = make_judge(config)
    profile = load_judge_profile(config.grading.judge_profile) if backend is not None else None
    envs = []
    for name in env_names(config.run.envs):
        grader = None
        if backend is not None:
            grader = LLMJudgeGrader(backend, profile, load_env_benchmark(name).score_rule)
        envs.append(RubricEnv(name, split="train", noise=config.grading.noise, grader=grader))
    return envs


def judge_fingerprint(config: TrainConfig) -> dict[str, Any]:
    """What defines the judge's behaviour: the noise profile, or the LLM judge's prompt profile and
    model identity (an endpoint by URL and model name, a local model by the hash of its files)."""
    g = config.grading
    if not g.uses_llm_judge:
        return judge_profile(g.noise).fingerprint()
    from ..judges import judge_identity  # the judges layer imports torch
    backend = judge_identity(g.judge) if g.judge else {"kind": "endpoint", "url": endpoint_base(g.judge_url),
                                                       "model": g.judge_model}
    return {"kind": "judge", **load_judge_profile(g.judge_profile).to_dict(), "backend": backend}


SUITE_FIELDS = ("envs", "noise", "judge", "judge_url", "judge_model", "judge_profile", "eval_instances")
"""The settings a suite hash depends on."""


def suite_fingerprint(config: TrainConfig) -> str:
    """Hash of everything that defines what a score means: every benchmark's instances and rubrics,
    the judge, the score rules and the evaluation size."""
    benchmarks = {name: load_env_benchmark(name) for name in env_names(config.run.envs)}
    return stable_hash({
        "benchmarks": {name: b.content_hash() for name, b in benchmarks.items()},
        "score_rules": {name: b.score_rule for name, b in benchmarks.items()},
        "noise": judge_fingerprint(config) if benchmarks else None,
        "eval_instances": config.run.eval_instances,
    })


def suite_parts(config: TrainConfig) -> dict[str, Any]:
    """The hashes the suite hash is made of, by part — each benchmark's content, the judge, the eval
    size — so that a result made on another suite can say which part changed."""
    return {"benchmarks": {name: load_env_benchmark(name).content_hash() for name in env_names(config.run.envs)},
            "judge": stable_hash(judge_fingerprint(config)), "eval_instances": config.run.eval_instances}


def changed_parts(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between two ``suite_parts``, in words."""
    out = []
    old, new = before.get("benchmarks", {}), now.get("benchmarks", {})
    out += [f"benchmark {b} was edited" for b in sorted(set(old) & set(new)) if old[b] != new[b]]
    out += [f"benchmark {b} was added" for b in sorted(set(new) - set(old))]
    out += [f"benchmark {b} was removed" for b in sorted(set(old) - set(new))]
    if before.get("judge") != now.get("judge"):
        out.append("the judge profile changed")
    if before.get("eval_instances") != now.get("eval_instances"):
        out.append(f"eval instances per benchmark changed ({before.get('eval_instances')} → {now.get('eval_instances')})")
    return out
