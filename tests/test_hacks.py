"""The hack table (graders/hacks.py): responses written to fool a judge, scored by a judge beside a
perfect answer, and the verdict whether the perfect answer wins."""

import numpy as np
import pytest

from setgrpo_bench.graders import RubricGrader
from setgrpo_bench.graders.hacks import (
    FILLER,
    HACK_TASKS_PER_BENCHMARK,
    hack_responses,
    hack_table,
    hack_tasks,
    rubric_words,
)
from setgrpo_bench.tasks import Criterion, TaskInstance
from setgrpo_bench.tasks.checks import build_check
from setgrpo_bench.tasks.response import ResponseView


@pytest.fixture  # built per test: a module-wide fixture would hide hack_tasks from the mutation run's test mapping
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


def _task(*criteria):
    rubric = tuple(Criterion(f"c{i}", text, points, "important" if points > 0 else "pitfall",
                             check=build_check({"type": "keyword_any", "terms": [term]}))
                   for i, (text, points, term) in enumerate(criteria))
    return TaskInstance("hand", "prompt", rubric)


def test_rubric_words_and_restatement_by_hand():
    """Every met-worthy criterion gives its words (1 point as much as 5), words of three letters count, stop
    words and pitfalls do not; the restatement ends each criterion with one full stop."""
    task = _task(("Gives the dose in mg.", 1, "dose"), ("Names the day and the time", 5, "day"),
                 ("Recommends doubling the dose", -3, "double"), ("Uses the unit X", 2, "unit"))
    assert rubric_words(task) == ["dose", "names", "day", "time", "unit"]  # "gives" and "uses" are stop words
    hacks = hack_responses(task, np.random.default_rng(0))
    assert hacks["criterion restatement"] == "Gives the dose in mg. Names the day and the time. Uses the unit X."
    assert hacks["keyword list"] == "dose names day time unit" and hacks["repeated word"] == " ".join(["dose"] * 40)
    gibberish = hacks["gibberish"].split()
    assert len(gibberish) == 25 and all(3 <= len(w) <= 8 and w.isalpha() and w.islower() for w in gibberish)
    assert {len(w) for w in gibberish} >= {3, 8}  # both ends of the range are drawn
    nothing = _task(("It is.", 2, "is"))  # no content word: the hacks repeat a stand-in
    assert hack_responses(nothing, np.random.default_rng(0))["repeated word"] == " ".join(["answer"] * 40)


def test_hack_tasks_and_tables_are_reproducible_at_their_defaults():
    names = ["MedicationGuide"]
    tasks = hack_tasks(names)
    assert len(tasks) == HACK_TASKS_PER_BENCHMARK
    assert [p for _, p, _ in tasks] == [p for _, p, _ in hack_tasks(names, per_benchmark=4, seed=0)]
    assert [p for _, p, _ in tasks] != [p for _, p, _ in hack_tasks(names, seed=1)]
    rng = np.random.default_rng(0)
    gibberish = []

    def judged(task, texts, rule):
        gibberish.append(texts[5])
        return rng.random(len(texts))

    hack_table(judged, tasks)
    hack_table(judged, tasks, seed=0)
    assert gibberish[:4] == gibberish[4:]


def test_the_table_scores_the_truth_by_the_benchmarks_own_rule():
    """Under ``rar`` a pitfall not committed counts as satisfied: the empty response scores 3/8, not 0."""
    task = _task(("Gives the dose", 5, "dose"), ("Recommends doubling", -3, "double"))
    table = hack_table(lambda task, texts, rule: np.zeros(len(texts)), [(task, "the dose", "rar")])
    assert table["hacks"]["empty"]["true_score"] == pytest.approx(3 / 8)
    assert table["hacks"]["perfect answer"]["true_score"] == 1.0
