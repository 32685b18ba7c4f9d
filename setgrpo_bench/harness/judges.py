"""``judges measure``: how each judge errs, measured on responses of a policy (DESIGN §4).

Every noise profile grades the same responses — the policy's samples on train-split prompts of the
suite — and is described by what robust methods depend on:
  error_rms        √mean (judge score − true score)² over valid grades
  verdict_error    share of per-criterion verdicts that differ from the check's
  confidence_auroc how well the judge's confidence in a verdict separates its wrong verdicts from its
                   right ones (AUROC; 0.5: no information). The confidence of a verdict is the
                   judge's probability of it (``Grade.confidence``): for a noise profile, one minus
                   its stated rate of the error that would have produced it; for the learned judge,
                   its own P(yes) or P(no)
  spread_spearman  Spearman correlation of the judge's stated score spread with |score − true|
  length_effect    judge − true per doubling of the response's length (slope on log2 words)
  gross_calls      share of calls that get more than half of their verdicts wrong
  true_spearman    Spearman correlation of the judge's score with the true score
  cost             the price of a call relative to the training judge
and, for a judge with an injected bias (``graders/bias.py``):
  feature_rate     share of the responses that show the biased feature
  bias_share       the bias's share of the judge's mean score: mean α·b/(1 + α) over mean score
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy.stats import rankdata, spearmanr

from ..agents.config import TrainConfig
from ..graders import make_grader
from ..graders.bias import has_feature
from ..graders.judge_profiles import judge_profile, judge_profile_names
from ..policy import load_policy
from ..tasks.response import ResponseView
from .engines import make_engine
from .seeds import generator, name_key, torch_seed
from .suite import make_envs


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties counted half (the Mann–Whitney statistic)."""
    scores, positive = np.asarray(scores, float), np.asarray(positive, bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return float("nan")
    ranks = rankdata(scores)  # ties get their average rank
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def sample_responses(config: TrainConfig, prompts: int, group_size: int) -> list[tuple[Any, list[str]]]:
    """(task, G responses) for ``prompts`` train-split tasks drawn from the suite's mixture."""
    envs = make_envs(config)
    policy = load_policy(config.rollout.policy, config.rollout.device)
    engine = make_engine(config, policy)
    rng = generator(config.run.seed, "judges", 0)
    tasks = []
    for _ in range(prompts):
        bench = envs[int(rng.integers(len(envs)))].benchmark
        tasks.append(bench.instance("train", int(rng.integers(bench.size("train")))))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(torch_seed(config.run.seed, "judges"))
        texts = engine.generate([t.prompt_text for t in tasks for _ in range(group_size)]).texts
    return [(t, texts[i * group_size : (i + 1) * group_size]) for i, t in enumerate(tasks)]


def measure_profile(name: str, samples: Sequence[tuple[Any, list[str]]], *, seed: int) -> dict[str, float]:
    """The statistics of the module docstring for one noise profile on ``samples``."""
    grader, bias = make_grader(name), judge_profile(name).bias
    rng = generator(seed, "judges", 1, name_key(name))
    errors, spreads, lengths, wrong, confidence, gross, scores, features = [], [], [], [], [], [], [], []
    for task, responses in samples:
        fp, fn = grader.stated_rates(task)
        for text, grade in zip(responses, grader.grade_group(task, responses, rng)):
            if not grade.valid:
                continue
            errors.append(grade.score - grade.true_score)
            scores.append((grade.score, grade.true_score))
            features.append(bool(bias) and has_feature(bias, ResponseView(text)))
            spreads.append(grade.spread)
            lengths.append(max(len(text.split()), 1))
            miss = grade.verdicts != grade.true_verdicts
            wrong.append(miss)
            confidence.append(grade.confidence if grade.confidence is not None else 1 - np.where(grade.verdicts, fp, fn))
            gross.append(miss.mean() > 0.5)
    errors, wrong, confidence, scores = np.array(errors), np.concatenate(wrong), np.concatenate(confidence), np.array(scores)
    slope = float(np.polyfit(np.log2(lengths), errors, 1)[0]) if len(set(lengths)) > 1 else float("nan")
    return {
        "error_rms": float(np.sqrt(np.mean(errors**2))), "error_mean": float(errors.mean()),
        "verdict_error": float(wrong.mean()), "confidence_auroc": auroc(-confidence, wrong),
        "spread_spearman": (float(spearmanr(spreads, np.abs(errors)).statistic)
                            if np.ptp(spreads) > 0 and np.ptp(errors) > 0 else float("nan")),
        "length_effect": slope, "gross_calls": float(np.mean(gross)),
        "true_spearman": float(spearmanr(scores[:, 0], scores[:, 1]).statistic) if np.ptp(scores[:, 0]) > 0 else float("nan"),
        "cost": float(grader.cost_per_call), "graded": len(errors),
        **({"feature_rate": float(np.mean(features)),
            "bias_share": float(bias["strength"] * np.mean(features) / (1 + bias["strength"]) / scores[:, 0].mean())}
           if bias else {}),
    }


def measure_judges(config: TrainConfig, *, profiles: Sequence[str] | None = None, prompts: int = 64,
                   group_size: int = 8) -> dict[str, Any]:
    """Every profile (default: all noise profiles of the catalog) measured on the same responses."""
    samples = sample_responses(config, prompts, group_size)
    names = list(profiles or judge_profile_names())
    return {"policy": config.rollout.policy, "seed": config.run.seed, "prompts": prompts, "group_size": group_size,
            "profiles": {name: measure_profile(name, samples, seed=config.run.seed) for name in names}}
