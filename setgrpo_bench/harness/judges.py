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
and ``labels``: how the judge's probability of "yes" (``Grade.confidence`` of its verdict) predicts the
checks' verdicts — accuracy of P(yes) > ½, calibration error, AUROC — a learned judge's card's numbers,
here on the given policy's samples (``--policy``: e.g. one trained against that judge);
and, for a judge with an injected bias (``graders/bias.py``):
  feature_rate     share of the responses that show the biased feature
  bias_share       the bias's share of the judge's mean score: mean α·b/(1 + α) over mean score
and its hack table (``graders/hacks.py``): the judge's and the true score of responses written to fool it,
beside a perfect answer's, on the first dev instances of each benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr

from ..agents.config import TrainConfig
from ..graders import make_grader
from ..graders.bias import has_feature
from ..graders.hacks import hack_table, hack_tasks
from ..graders.judge_profiles import judge_profile, judge_profile_names
from ..graders.measure import auroc, label_measures
from ..policy import load_policy
from .engines import make_engine
from .seeds import generator, name_key, torch_seed
from .suite import make_envs


def sample_responses(config: TrainConfig, prompts: int, group_size: int,
                     policies: Sequence[str]) -> list[tuple[Any, list[str]]]:
    """(task, G responses) for ``prompts`` train-split tasks drawn from the suite's mixture, for each of
    ``policies`` in turn: every policy answers the same tasks from the same sampling seed."""
    envs = make_envs(config)
    rng = generator(config.run.seed, "judges", 0)
    tasks = []
    for _ in range(prompts):
        bench = envs[int(rng.integers(len(envs)))].benchmark
        tasks.append(bench.instance("train", int(rng.integers(bench.size("train")))))
    samples = []
    for name in policies:
        engine = make_engine(config, load_policy(name, config.rollout.device))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torch_seed(config.run.seed, "judges"))
            texts = engine.generate([t.prompt_text for t in tasks for _ in range(group_size)]).texts
        samples += [(t, texts[i * group_size : (i + 1) * group_size]) for i, t in enumerate(tasks)]
    return samples


def measure_profile(name: str, samples: Sequence[tuple[Any, list[str]]], *, seed: int,
                    hacks: Sequence[tuple[Any, str, str]] = ()) -> dict[str, Any]:
    """The statistics of the module docstring for one judge profile on ``samples``, and its hack table
    on ``hacks`` ((task, perfect answer, score rule); ``graders/hacks.py``)."""
    graders = cache(lambda rule: make_grader(name, rule))  # one grader per benchmark score rule
    grader, bias = graders("healthbench"), judge_profile(name).bias
    rng, hack_rng = generator(seed, "judges", 1, name_key(name)), generator(seed, "judges", 2, name_key(name))
    spreads, lengths, wrong, confidence, gross, scores, features, p_yes, met = [], [], [], [], [], [], [], [], []
    for task, responses in samples:
        fp, fn = grader.stated_rates(task)
        for text, grade in zip(responses, grader.grade_group(task, responses, rng)):
            if not grade.valid:
                continue
            scores.append((grade.score, grade.true_score))
            features.append(bool(bias) and has_feature(bias, text))
            spreads.append(grade.spread)
            lengths.append(max(len(text.split()), 1))
            miss = grade.verdicts != grade.true_verdicts
            wrong.append(miss)
            confidence.append(grade.confidence if grade.confidence is not None else 1 - np.where(grade.verdicts, fp, fn))
            if grade.confidence is not None:
                p_yes.append(np.where(grade.verdicts, grade.confidence, 1 - grade.confidence))
                met.append(grade.true_verdicts)
            gross.append(miss.mean() > 0.5)
    wrong, confidence, scores = np.concatenate(wrong), np.concatenate(confidence), np.array(scores)
    errors = scores[:, 0] - scores[:, 1]  # judge − true
    slope = float(np.polyfit(np.log2(lengths), errors, 1)[0]) if len(set(lengths)) > 1 else float("nan")
    return {
        "error_rms": float(np.sqrt(np.mean(errors**2))), "error_mean": float(errors.mean()),
        "verdict_error": float(wrong.mean()), "confidence_auroc": auroc(-confidence, wrong),
        "spread_spearman": (float(spearmanr(spreads, np.abs(errors)).statistic)
                            if np.ptp(spreads) > 0 and np.ptp(errors) > 0 else float("nan")),
        "length_effect": slope, "gross_calls": float(np.mean(gross)),
        "true_spearman": float(spearmanr(scores[:, 0], scores[:, 1]).statistic) if np.ptp(scores[:, 0]) > 0 else float("nan"),
        "cost": float(grader.cost_per_call), "graded": len(errors),
        **({"labels": label_measures(np.concatenate(p_yes), np.concatenate(met))} if p_yes else {}),
        **({"hack_table": hack_table(lambda task, texts, rule: _scores(graders(rule), task, texts, hack_rng), hacks,
                                     seed=seed)} if hacks else {}),
        **({"feature_rate": float(np.mean(features)),
            "bias_share": float(bias["strength"] * np.mean(features) / (1 + bias["strength"]) / scores[:, 0].mean())}
           if bias else {}),
    }


def flat_measures(row: Mapping[str, Any]) -> dict[str, Any]:
    """A profile's measurements with its ``labels`` alongside the others, as ``label_accuracy`` and so on
    (one column each in a table)."""
    return {**row, **{f"label_{k}": v for k, v in row.get("labels", {}).items()}}


def _scores(grader: Any, task: Any, texts: list[str], rng: np.random.Generator) -> np.ndarray:
    """The judge's score of each response (NaN for an invalid grade)."""
    return np.array([g.score if g.valid else np.nan for g in grader.grade_group(task, texts, rng)])


def measure_judges(config: TrainConfig, *, profiles: Sequence[str] | None = None, prompts: int = 64,
                   group_size: int = 8) -> dict[str, Any]:
    """Every profile (default: all noise profiles of the catalog) measured on the same responses: those of
    ``config.rollout.policy``, or pooled over its comma-separated policies, ``prompts`` each (the same
    prompts: e.g. the final policies of runs trained against one judge)."""
    samples = sample_responses(config, prompts, group_size, config.rollout.policy.split(","))
    names = list(profiles or judge_profile_names())
    hacks = hack_tasks([env.benchmark.name for env in make_envs(config)], seed=config.run.seed)
    return {"policy": config.rollout.policy, "seed": config.run.seed, "prompts": prompts, "group_size": group_size,
            "profiles": {name: measure_profile(name, samples, seed=config.run.seed, hacks=hacks) for name in names}}
