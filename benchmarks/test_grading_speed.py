"""Grading throughput: criterion checks per second, batched group grading vs one response at a time.

Run: ``pytest benchmarks/test_grading_speed.py --benchmark-only``. The figure of interest is
``checks_per_s`` in the extra info of ``test_batched_group_grading`` (target ≥ 50k on one core).
"""

import numpy as np
import pytest

from setgrpo_bench.envs import load_env_benchmark
from setgrpo_bench.graders import RubricGrader

GROUP_SIZE = 8
N_TASKS = 32


@pytest.fixture(scope="module")
def groups():
    rng = np.random.default_rng(0)
    out = []
    for name in ("MedicationGuide", "EventInvitation", "LabProtocol", "ConceptExplainer"):
        bench = load_env_benchmark(name)
        for i in range(N_TASKS // 4):
            task = bench.instance("train", i)
            out.append((task, bench.examples(task, rng, GROUP_SIZE)))
    return out


def _checks(groups):
    return sum(len(task.rubric) * len(responses) for task, responses in groups)


def test_batched_group_grading(benchmark, groups):
    grader = RubricGrader("realistic")

    def run():
        rng = np.random.default_rng(0)
        for task, responses in groups:
            grader.grade_group(task, responses, rng)

    benchmark.pedantic(run, rounds=20, warmup_rounds=2)
    benchmark.extra_info["checks_per_s"] = _checks(groups) / benchmark.stats.stats.mean


def test_one_by_one_grading(benchmark, groups):
    grader = RubricGrader("realistic")

    def run():
        rng = np.random.default_rng(0)
        for task, responses in groups:
            for response in responses:
                grader.grade(task, response, rng)

    benchmark.pedantic(run, rounds=20, warmup_rounds=2)
    benchmark.extra_info["checks_per_s"] = _checks(groups) / benchmark.stats.stats.mean
