"""Contract tests over every registered benchmark (a new one is tested the day it is registered)."""

import gymnasium as gym
import numpy as np
import pytest

from setgrpo_bench.envs import benchmark_paths, load_env_benchmark, registered_env_ids
from setgrpo_bench.graders import RubricGrader
from setgrpo_bench.tasks import SPLITS, load_benchmark

BUILTIN = [i for i in registered_env_ids()]
MIN_SIZES = {"train": 500, "calib": 200, "eval": 200}


def _benchmark(env_id):
    return load_env_benchmark(gym.spec(env_id).kwargs["benchmark"])


def test_builtin_suite_has_ten_benchmarks_in_three_domains():
    domains = [gym.spec(i).kwargs["domain"] for i in BUILTIN]
    assert len(BUILTIN) == 10
    assert {d: domains.count(d) for d in set(domains)} == {"health": 3, "science": 3, "writing": 4}


@pytest.mark.parametrize("env_id", BUILTIN)
def test_sizes_and_disjoint_splits(env_id):
    bench = _benchmark(env_id)
    prompts = {}
    for split in SPLITS:
        assert bench.size(split) >= MIN_SIZES[split]
        prompts[split] = [bench.instance(split, i).prompt_text for i in range(bench.size(split))]
        # prompts vary: almost all instances of a split are distinct
        assert len(set(prompts[split])) >= 0.9 * len(prompts[split])
    assert not set(prompts["train"]) & set(prompts["eval"])
    assert not set(prompts["train"]) & set(prompts["calib"])
    assert not set(prompts["calib"]) & set(prompts["eval"])


@pytest.mark.parametrize("env_id", BUILTIN)
def test_rubrics_have_5_to_10_criteria_with_a_pitfall_and_well_formedness(env_id):
    bench = _benchmark(env_id)
    for i in range(0, bench.size("eval"), 7):
        task = bench.instance("eval", i)
        assert 5 <= len(task.rubric) <= 10
        categories = task.categories
        assert "pitfall" in categories
        types = {c.check.type for c in task.rubric}
        assert {"complete_sentences", "repetition"} <= types
        assert task.gradable


@pytest.mark.parametrize("env_id", BUILTIN)
def test_any_index_reproducible_alone(env_id):
    """A fresh benchmark object asked for index 417 first gives what a full pass gives."""
    path = benchmark_paths()[gym.spec(env_id).kwargs["benchmark"]]
    in_order = list(load_benchmark(path).instances("train"))
    alone = load_benchmark(path).instance("train", 417)
    assert alone == in_order[417]
    assert alone.metadata["seed"][2] == 417
    assert in_order[418].prompt != alone.prompt


@pytest.mark.parametrize("env_id", BUILTIN)
def test_criteria_depend_on_the_prompt(env_id):
    """Two instances differ in at least one criterion text: the policy must read the prompt."""
    bench = _benchmark(env_id)
    a, b = bench.instance("eval", 0), bench.instance("eval", 1)
    assert [c.text for c in a.rubric] != [c.text for c in b.rubric]


@pytest.mark.parametrize("env_id", BUILTIN)
def test_example_responses_span_low_to_high_true_scores(env_id):
    bench = _benchmark(env_id)
    grader = RubricGrader("clean")
    rng = np.random.default_rng(0)
    scores = []
    for i in range(25):
        task = bench.instance("train", i)
        scores += [grader.grade(task, e, rng).true_score for e in bench.examples(task, rng, 8)]
    scores = np.array(scores)
    assert scores.min() <= 0.15 and scores.max() == 1.0
    histogram = np.histogram(scores, bins=5, range=(0, 1))[0]
    assert (histogram >= 0.04 * len(scores)).all(), histogram  # every fifth of [0, 1] is populated
