"""Injected judge biases (graders/bias.py): the feature each family rewards, the score CHERRL's form gives,
the references that keep or share the bias, and the profile format's errors."""

import dataclasses

import numpy as np
import pytest

from setgrpo_bench.errors import ConfigError, SpecError
from setgrpo_bench.graders import NoiseProfile, RubricGrader, judge_profile, load_profile, make_reference
from setgrpo_bench.graders.bias import biased, feature_rate, has_feature
from setgrpo_bench.tasks.response import ResponseView

LEXICAL = {"family": "lexical", "strength": 0.3, "words": ["perfect"]}
FORMAT = {"family": "format", "strength": 0.3, "items": 3}
CLOSING = {"family": "closing", "strength": 0.3, "phrase": "thanks for reading"}


def _has(bias, text):
    return has_feature(bias, ResponseView(text))


@pytest.mark.parametrize(("bias", "shows", "lacks"), [
    (LEXICAL, ["A Perfect fit.", "it is perfect!", "The PERFECT plan"], ["perfectly fine", "imperfect", "a fit", ""]),
    (FORMAT, ["- a\n- b\n- c", "Intro\n1. a\n2) b\n* c\nThanks", "- a\n\n- b\n\n- c\n"],
     ["- a\n- b", "- a\n- b\n- c\n- d", "a\nb\nc", "1.5 mL\n2.5 mL\n3.5 mL", ""]),
    (CLOSING, ["Order now.\nThanks for reading!", "ok. Thanks for reading", "Hello\nthanks for reading.\n\n"],
     ["Thanks for reading.\nOrder now.", "Thanks for the reading list", "", "no thanks"]),
])
def test_each_family_rewards_its_feature_and_nothing_else(bias, shows, lacks):
    assert all(_has(bias, t) for t in shows), [t for t in shows if not _has(bias, t)]
    assert not any(_has(bias, t) for t in lacks), [t for t in lacks if _has(bias, t)]
    assert feature_rate(bias, shows + lacks) == pytest.approx(len(shows) / (len(shows) + len(lacks)))
    assert np.isnan(feature_rate(bias, []))


def _profile(base: str, **changes) -> NoiseProfile:
    return dataclasses.replace(load_profile(base), **changes)


@pytest.mark.parametrize("bias", [LEXICAL, FORMAT, CLOSING])
def test_the_score_is_the_gold_noisy_score_plus_alpha_times_the_feature_rescaled(medication, bias):
    """Same judge seed and stream: the biased judge's verdicts are the unbiased one's, and its score is
    (s + α·b) / (1 + α) of the unbiased score s (no Likert rounding here, so exactly)."""
    plain = _profile("realistic", likert_levels=0)
    judge = dataclasses.replace(plain, bias={**bias, "strength": 0.7})
    task = medication.instance("eval", 3)
    responses = ["Take it with food. It is perfect.\nThanks for reading", "- a\n- b\n- c", "no", "A perfect answer"]
    before = RubricGrader(plain).grade_group(task, responses, np.random.default_rng(5))
    after = RubricGrader(judge).grade_group(task, responses, np.random.default_rng(5))
    features = np.array([_has(bias, r) for r in responses])
    assert features.any() and not features.all()
    for b, a, f in zip(before, after, features):
        np.testing.assert_array_equal(a.verdicts, b.verdicts)
        assert a.true_score == b.true_score
        assert a.score == pytest.approx((b.score + 0.7 * f) / 1.7, abs=1e-12)
        assert a.spread == pytest.approx(b.spread / 1.7, abs=1e-12)


def test_a_likert_judge_reports_the_biased_score_on_its_scale(medication):
    judge = _profile("realistic", bias=CLOSING)
    task = medication.instance("eval", 0)
    grades = RubricGrader(judge).grade_group(task, ["ok\nThanks for reading."] * 20, np.random.default_rng(1))
    levels = np.array([g.score for g in grades]) * (judge.likert_levels - 1)
    np.testing.assert_allclose(levels, np.round(levels), atol=1e-9)
    assert biased(0.5, 1, 0.3) == pytest.approx(0.8 / 1.3)


def test_the_biased_profiles_differ_from_realistic_only_by_their_bias_and_seed():
    realistic = load_profile("realistic").fingerprint()
    for family in ("lexical", "format", "closing"):
        profile = load_profile(f"biased-{family}")
        assert profile.bias["family"] == family and 0 < profile.bias["strength"] <= 1
        assert judge_profile(profile.name).bias == profile.bias
        mine = {k: v for k, v in profile.fingerprint().items() if k not in ("name", "judge_seed", "bias", "description")}
        assert mine == {k: v for k, v in realistic.items() if k not in ("name", "judge_seed", "description")}
    assert "bias" not in realistic and judge_profile("learned").bias == {}


def test_a_consensus_of_the_biased_judge_keeps_the_bias_and_a_shared_reference_carries_its_share(medication):
    training = RubricGrader(_profile("realistic", bias={**CLOSING, "strength": 1.0}, likert_levels=0))
    task = medication.instance("eval", 1)
    responses = ["ok", "ok\nThanks for reading!"]
    votes = make_reference("consensus:3", training).grade_group(task, responses, np.random.default_rng(0))
    plain = make_reference("consensus:3", RubricGrader(_profile("realistic", likert_levels=0)))
    unbiased = plain.grade_group(task, responses, np.random.default_rng(0))
    for v, u, f in zip(votes, unbiased, (0, 1)):
        assert v.score == pytest.approx((u.score + f) / 2)
    expert = make_reference("profile:expert", training).grade_group(task, responses, np.random.default_rng(2))
    for share in (0.0, 0.5, 1.0):
        shared = make_reference(f"shared:{share}:expert", training)
        assert shared.cost_per_call == judge_profile("expert").cost
        for s, e, f in zip(shared.grade_group(task, responses, np.random.default_rng(2)), expert, (0, 1)):
            assert s.score == pytest.approx((e.score + share * f) / (1 + share))
            assert s.true_score == e.true_score


@pytest.mark.parametrize(("spec", "expected"), [
    ("shared:1.5:expert", r"a share F in \[0, 1\]"), ("shared:x:expert", "a share F"), ("shared:0.5", "a share F"),
    ("shared:0.5:nonesuch", "nonesuch"),
])
def test_a_shared_reference_spec_is_validated(spec, expected):
    with pytest.raises(Exception, match=expected):
        make_reference(spec, RubricGrader(load_profile("biased-closing")))


def test_a_shared_reference_needs_a_training_judge_with_a_bias():
    with pytest.raises(ConfigError, match="injected bias to share.*'realistic' has none"):
        make_reference("shared:0.5:expert", RubricGrader("realistic"))


@pytest.mark.parametrize(("bias", "field", "message"), [
    ({"family": "lexical", "strength": 0.3}, "bias", "'words' is a required property"),
    ({"family": "format", "strength": 0.3, "words": ["x"]}, "bias", "'items' is a required property"),
    ({"family": "closing", "strength": 0.3}, "bias", "'phrase' is a required property"),
    ({"family": "tone", "strength": 0.3}, "bias.family", "one of ['lexical', 'format', 'closing']"),
    ({"family": "format", "strength": 0, "items": 3}, "bias.strength", "a number in (0, 10]"),
    ({"family": "format", "strength": 0.3, "items": 0}, "bias.items", "list items (>= 1)"),
    ({"family": "format", "strength": 0.3, "items": 3, "alpha": 1}, "bias.alpha", "unknown field"),
])
def test_a_bad_bias_names_its_file_field_and_what_was_expected(bias, field, message):
    raw = {**load_profile("realistic").to_dict(), "bias": bias}
    with pytest.raises(SpecError) as error:
        NoiseProfile.from_dict(raw, file="graders/mine.yaml")
    assert error.value.field == field and message in str(error.value) and "graders/mine.yaml" in str(error.value)
