"""Every coefficient rule (DESIGN §7) at its edges and against its formula by hand to round-off: the
constants a rule adds for stability (ε, floors) are part of what a board number is computed with."""

import numpy as np
import pytest

from setgrpo_bench.agents.coefficients import (
    COEFFICIENT_RULES,
    corrected_scores,
    gapo_coefficients,
    grpo_coefficients,
    group_coefficients,
    mc_grpo_coefficients,
    noise_corrected_coefficients,
    qae_coefficients,
    s_grpo_coefficients,
)

REWARD_ONLY = sorted(set(COEFFICIENT_RULES) - {"noise_corrected"})


@pytest.mark.parametrize("rule", REWARD_ONLY)
@pytest.mark.parametrize("rewards", [[1, 1, 1, 1], [0.5], [0, 0, 0]])
def test_a_group_without_spread_trains_on_nothing_in_floats(rule, rewards):
    a = COEFFICIENT_RULES[rule](np.array(rewards))
    assert a.shape == (len(rewards),) and a.dtype == float and not a.any()


@pytest.mark.parametrize("rule", REWARD_ONLY)
def test_integer_rewards_give_the_coefficients_of_their_floats(rule):
    ints = np.array([1, 0, 0, 1, 1])
    assert np.array_equal(COEFFICIENT_RULES[rule](ints), COEFFICIENT_RULES[rule](ints.astype(float)), equal_nan=True)
    out = group_coefficients(rule, ints)
    assert out.dtype == float and np.array_equal(out, COEFFICIENT_RULES[rule](ints.astype(float)), equal_nan=True)


def test_mc_grpo_on_two_responses():
    """G = 2 is a group: median 0.5, MAD 0.5, a = ±0.5 / 0.501, no median rollout to leave out."""
    assert np.allclose(mc_grpo_coefficients(np.array([0.0, 1.0])), [-0.5 / 0.501, 0.5 / 0.501], rtol=1e-12)


def test_qae_by_hand_with_and_without_the_std():
    r = np.array([0.0, 0.1, 0.2, 0.3])
    baseline = np.quantile(r, 0.4)
    assert np.allclose(qae_coefficients(r), r - baseline, rtol=1e-12)
    assert np.allclose(qae_coefficients(r, qae_std=True), (r - baseline) / (r.std(ddof=1) + 1e-4), rtol=1e-12)
    tight = np.array([0.50, 0.51, 0.52])  # std 0.01: the floor 0.05 applies
    assert np.allclose(qae_coefficients(tight, qae_std=True), (tight - np.quantile(tight, 0.4)) / (0.05 + 1e-4),
                       rtol=1e-12)


def test_gapo_by_hand():
    """G = 5: the shortest window of 3 sorted rewards is (0.2, 0.25, 0.3), Q = 0.25; a spread of exactly 1
    is an ordinary group."""
    r = np.array([0.3, 0.2, 0.25, 0.9, 0.0])
    scale = np.sqrt(((r - 0.25) ** 2).sum() / 4)
    assert np.allclose(gapo_coefficients(r), (r - 0.25) / (scale + 1e-4), rtol=1e-12)
    unit = np.array([0.0, 1.0, 0.0, 1.0])
    assert np.abs(gapo_coefficients(unit)).max() > 1  # Q = 0 (the window (0, 0)), scale √(2/3)


def test_s_grpo_by_hand():
    r, p, eps = np.array([0.2, 0.4, 0.9, 0.7]), 0.1, 1e-6
    mean = r.mean()
    t = (mean - p) / (1 - 2 * p)
    weight = (1 - 2 * p) * t * (1 - t) / (np.sqrt(mean * (1 - mean) + eps) * np.sqrt(t * (1 - t) + eps))
    assert np.allclose(s_grpo_coefficients(r, flip_rate=p), weight * (r - mean) / (r.std(ddof=1) + 1e-8), rtol=1e-12)


def test_s_grpo_damps_groups_whose_denoised_rate_leaves_the_unit_interval():
    """r̄ = 0.95 > 1 − p at p = 0.1: the de-noised success rate t is 1, the group gets weight 0 (not NaN);
    so do scores outside [0, 1], whose mean is clipped first."""
    assert not s_grpo_coefficients(np.array([0.9, 1.0]), flip_rate=0.1).any()
    assert not s_grpo_coefficients(np.array([0.05, 0.1]), flip_rate=0.1).any()  # t = 0
    for outside in ([1.5, 2.0], [-1.0, -0.5]):
        a = s_grpo_coefficients(np.array(outside))
        assert np.all(np.isfinite(a)) and not a.any()


@pytest.mark.parametrize("flip_rate", [-0.1, 0.5, 0.7])
def test_s_grpo_refuses_a_flip_rate_outside_zero_to_a_half(flip_rate):
    with pytest.raises(ValueError, match="flip_rate"):
        s_grpo_coefficients(np.array([0.0, 1.0]), flip_rate=flip_rate)


def test_the_noise_corrected_rule_passes_grpos_parameters_on():
    verdicts = np.array([[1, 0], [0, 0], [1, 1]])
    points, fp, fn = np.array([2.0, 1.0]), np.array([0.1, 0.2]), np.array([0.05, 0.1])
    kwargs = dict(verdicts=verdicts, points=points, false_positive=fp, false_negative=fn)
    scores = corrected_scores(verdicts, points, fp, fn)
    raw = grpo_coefficients(scores, std_floor=0.0, eps=0.0)
    assert np.allclose(noise_corrected_coefficients(np.zeros(3), std_floor=0.0, eps=0.0, **kwargs), raw, rtol=1e-12)
    assert not np.allclose(grpo_coefficients(scores), raw, rtol=1e-6)  # the defaults differ: the pass-on is seen


def test_a_plugins_rule_joins_the_built_in_ones_and_cannot_replace_one(monkeypatch):
    from setgrpo_bench.agents import coefficients, plugins

    def mine(rewards, **_):
        return rewards - rewards.min()

    monkeypatch.setattr(plugins, "plugin_rules", lambda: {"mine": ("dist-a", mine), "grpo": ("dist-b", mine)})
    coefficients._warn_once.cache_clear()
    with pytest.warns(UserWarning, match="plugin dist-b: its coefficient rule 'grpo' is not loaded"):
        rules = coefficients.coefficient_rules()
    assert rules["mine"] is mine and rules["grpo"] is grpo_coefficients
    assert set(rules) == {*COEFFICIENT_RULES, "mine"}
