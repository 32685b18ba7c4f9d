"""The held-out curve of a run (DESIGN §9): every ``eval_every`` steps, the training policy sampled on the
first ``curve_instances`` dev instances of each benchmark from its own random stream (training is
unchanged), scored by the rubric's checks and by the training judge, so that over-optimisation, stopping
and reward hacking (``harness/hacking.py``) are measured on instances no update saw."""

from __future__ import annotations

from functools import partial
from typing import Any

from ..agents.config import TrainConfig
from ..graders.bias import has_feature
from ..graders.rubric_grader import injected_bias
from ..policy.engine import RolloutEngine
from .evaluation import evaluate


def curve_due(config: TrainConfig, step: int, stopped: bool) -> bool:
    """A held-out curve point every ``eval_every`` steps, at the last step and at a stop."""
    every = config.run.eval_every
    return bool(every) and (step % every == 0 or step == config.run.steps or stopped)


def curve_point(config: TrainConfig, engine: RolloutEngine, envs: list) -> dict[str, float]:
    """The training policy's macro true score on the first ``curve_instances`` dev instances of each
    benchmark (the ``curve`` random stream: every point samples the same way), and the training judge's
    score of the same responses (its own ``curve_grading`` stream: the policy's streams are untouched),
    so that the curve shows where judge and truth part (``harness/hacking.py``); under a judge with an
    injected bias, the share of the responses that show its feature. An LLM judge (a model or an
    endpoint the user pays for) is not asked: its curve is the true score alone, from the checks."""
    judged = not config.grading.uses_llm_judge
    bias = injected_bias(envs[0].grader) if judged else {}
    result = evaluate(engine, envs, instances=config.run.curve_instances, seed=config.run.seed, split="dev",
                      stream="curve", judged=judged, feature=partial(has_feature, bias) if bias else None)
    if not judged:
        return {"dev_true_score": result["macro_true_score"]}
    return {"dev_true_score": result["macro_true_score"], "dev_true_score_se": result["macro_true_score_se"],
            "dev_judge_score": result["macro_judge_score"], "dev_judge_score_se": result["macro_judge_score_se"],
            **({"dev_feature_rate": result["macro_feature_rate"]} if bias else {})}


def held_out_curve(initial: dict[str, Any], records: list[dict[str, Any]]) -> list[dict[str, float]]:
    """The held-out (dev) curve of a run: the step, true score and judge's score (with their SEs, and the
    feature rate of an injected bias) at step 0 and every curve point."""
    points = [(0, initial["curve"])] + [(r["step"], r) for r in records if "dev_true_score" in r]
    return [{"step": step, **{key.removeprefix("dev_"): value for key, value in p.items() if key.startswith("dev_")}}
            for step, p in points]
