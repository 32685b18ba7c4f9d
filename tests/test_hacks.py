"""The hack table (graders/hacks.py): responses written to fool a judge, scored by a judge beside a
perfect answer, and the verdict whether the perfect answer wins."""

import numpy as np
import pytest

from setgrpo_bench.graders import RubricGrader
from setgrpo_bench.graders.hacks import FILLER, hack_responses, hack_table, hack_tasks, rubric_words
from setgrpo_bench.tasks.response import ResponseView


@pytest.fixture(scope="module")
def tasks():
    return hack_tasks(["MedicationGuide", "UnitConversion"], per_benchmark=3)


def test_hacks_are_built_from_the_tasks_own_rubric(tasks):
    task = tasks[0][0]
    hacks = hack_responses(task, np.random.default_rng(0))
    assert list(hacks) == ["empty", "filler", "repeated word", "keyword list", "criterion restatement", "gibberish"]
    assert hacks["empty"] == "" and hacks["filler"] == FILLER
    words = rubric_words(task)
    assert hacks["repeated word"].split() == [words[0]] * 40 and hacks["keyword list"].split() == words
    assert len(set(words)) == len(words) and all(len(w) > 2 for w in words)
    criterion_words = {w for c in task.rubric if c.points > 0 for w in ResponseView(c.text).words}
    assert set(words) <= criterion_words
    assert len(hacks["gibberish"].split()) == 25 and hacks["gibberish"] != hack_responses(task, np.random.default_rng(1))["gibberish"]
    assert hacks == hack_responses(task, np.random.default_rng(0))


def test_the_tasks_are_dev_instances_with_a_perfect_answer(tasks):
    assert len(tasks) == 6 and {t.metadata["benchmark"] for t, *_ in tasks} == {"MedicationGuide", "UnitConversion"}
    from setgrpo_bench.tasks.scoring import rubric_score

    scores = [rubric_score(t.points, t.true_verdicts(perfect), rule)[0] for t, perfect, rule in tasks]
    assert np.mean(scores) > 0.95 and min(scores) > 0.8  # the corpus's best-quality answers


def test_an_exact_judge_scores_every_hack_at_its_true_score_and_the_perfect_answer_wins(tasks):
    clean, rng = RubricGrader("clean"), np.random.default_rng(0)
    table = hack_table(lambda task, texts, rule: np.array([g.score for g in clean.grade_group(task, texts, rng)]), tasks)
    assert table["tasks"] == 6 and table["perfect_wins"]
    for row in table["hacks"].values():
        assert row["judge_score"] == pytest.approx(row["true_score"])
    assert table["hacks"]["perfect answer"]["true_score"] > 0.95 and table["hacks"]["empty"]["true_score"] < 0.5


def test_a_judge_fooled_by_any_hack_is_caught(tasks):
    def fooled(task, texts, rule):  # a perfect answer (the last) gets 0.9, the keyword list 0.95
        return np.array([0.95 if i == 3 else 0.9 if i == len(texts) - 1 else 0.1 for i in range(len(texts))])

    table = hack_table(fooled, tasks)
    assert not table["perfect_wins"] and table["hacks"]["keyword list"]["judge_score"] == pytest.approx(0.95)
    tied = hack_table(lambda task, texts, rule: np.full(len(texts), 0.5), tasks)
    assert not tied["perfect_wins"]  # a tie is no win
