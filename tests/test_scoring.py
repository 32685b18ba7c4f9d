import numpy as np
import pytest

from setgrpo_bench.errors import SpecError, UnknownNameError
from setgrpo_bench.tasks import Criterion, TaskInstance, rubric_score

POINTS = np.array([3.0, 2.0, 1.0, -2.0])


@pytest.mark.parametrize(
    "met, clipped, raw",
    [
        ([1, 1, 1, 0], 1.0, 1.0),
        ([1, 0, 0, 0], 0.5, 0.5),
        ([1, 0, 1, 1], 2 / 6, 2 / 6),
        ([0, 0, 1, 1], 0.0, -1 / 6),  # pitfall outweighs: negative raw, clipped to 0
        ([0, 0, 0, 0], 0.0, 0.0),
    ],
)
def test_healthbench_rule_by_hand(met, clipped, raw):
    got_clipped, got_raw = rubric_score(POINTS, np.array(met, bool))
    assert got_clipped == pytest.approx(clipped) and got_raw == pytest.approx(raw)


def test_rar_rule_by_hand():
    # weights |points| = 3, 2, 1, 2 (sum 8); satisfied: met positives, pitfall satisfied when not met
    clipped, raw = rubric_score(POINTS, np.array([1, 0, 1, 1], bool), rule="rar")
    assert clipped == pytest.approx((3 + 1) / 8) and raw == clipped
    assert rubric_score(POINTS, np.array([1, 1, 1, 0], bool), rule="rar")[0] == pytest.approx(1.0)


def test_scores_are_vectorised_over_responses():
    met = np.array([[1, 1, 1, 0], [0, 0, 1, 1]], bool)
    clipped, raw = rubric_score(POINTS, met)
    assert clipped.shape == (2,) and raw[1] < 0 <= clipped[1]


def test_unknown_rule_suggests():
    with pytest.raises(UnknownNameError, match="Did you mean 'rar'"):
        rubric_score(POINTS, np.ones(4, bool), rule="ra")


def _criterion(**kw):
    base = {"id": "c", "text": "t", "points": 1, "category": "important"}
    return Criterion.from_dict({**base, **kw})


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"points": -1}, r"points: .*pitfalls and only pitfalls"),
        ({"category": "pitfall"}, r"points: .*pitfalls and only pitfalls"),
        ({"category": "crucial"}, r"category: expected one of"),
        ({"points": 0}, r"points: expected non-zero numeric points"),
        ({"check": {"type": "regex", "pattern": "("}}, r"check.pattern: invalid regular expression"),
    ],
)
def test_bad_criteria(kw, match):
    with pytest.raises(SpecError, match=match):
        _criterion(**kw)


def test_rubric_without_positive_points_is_refused():
    pitfall = _criterion(points=-2, category="pitfall")
    with pytest.raises(SpecError, match="rubric: a rubric needs at least one criterion with positive points"):
        TaskInstance(id="t", prompt="p", rubric=(pitfall,))


def test_entity_must_appear_in_prompt():
    c = _criterion(check={"type": "entity", "value": "Zoë"})
    TaskInstance(id="t", prompt="Write to Zoe.", rubric=(c,))  # diacritic-insensitive
    with pytest.raises(SpecError, match=r"rubric\[0\].check.value: entity 'Zoë' does not appear in the prompt"):
        TaskInstance(id="t", prompt="Write to Ana.", rubric=(c,))
