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


@pytest.mark.parametrize("newlines", [1_000, 16_000])
def test_grading_is_linear_in_the_response(benchmark, newlines):
    """A response of blank lines graded on every built-in benchmark's first eval task. Linear grading
    takes 16× as long for 16,000 newlines as for 1,000; before the regex checks were kept to their line
    (``tasks.response.line_local``), EventInvitation's greeting alone took 6.3 s at 16,000. Compare the two means
    (``--benchmark-only``): their ratio should be near 16, the 16,000 case well under 0.1 s."""
    from setgrpo_bench.policy.embedded import builtin_names

    grader = RubricGrader("realistic")
    tasks = [load_env_benchmark(name).instance("eval", 0) for name in builtin_names()]
    response = "\n" * newlines

    def run():
        rng = np.random.default_rng(0)
        for task in tasks:
            grader.grade_group(task, [response], rng)

    benchmark.pedantic(run, rounds=5, warmup_rounds=1)
