"""Calibration from the window (DESIGN §8): which fold sets what, and which setting reaches which
function — pinned without training, so that a mutation of ``calibration.py`` or ``window.py`` is
noticed by tests that run in milliseconds."""

import dataclasses
import math

import numpy as np
import pytest

from setgrpo_bench.agents import setgrpo as sm
from setgrpo_bench.agents.config import SetGRPOSettings
from setgrpo_bench.agents.setgrpo import calibration, risk_gate, window
from setgrpo_bench.errors import ConfigError


def _groups(rng, n, *, reversed_reference=False, spread=1.0):
    """Groups with K = I whose reference is ±â plus noise of size ``spread``: their conformal scores differ
    from group to group, so D1 and D2 give different quantiles."""
    out = []
    for _ in range(n):
        a_hat = rng.normal(size=4)
        a_hat -= a_hat.mean()
        noise = spread * rng.normal(size=4) * 0.05
        a_ref = (-a_hat if reversed_reference else a_hat) + noise - noise.mean()
        out.append(sm.AuditedGroup(a_hat, a_ref, np.full(4, 0.05), np.eye(4)))
    return out


def _scores(groups):
    return np.array([sm.conformal_score(g.a_hat, g.a_ref, g.sigma) for g in groups])


@pytest.fixture
def folds():
    rng = np.random.default_rng(3)
    return _groups(rng, 30), _groups(rng, 24, spread=4.0)


def _same(x, y) -> bool:
    return x.score == y.score and x.certifiable == y.certifiable and np.array_equal(x.coefficients, y.coefficients)


def _spy(monkeypatch, module, name, returns=None):
    """Replace ``module.name`` by a recorder that returns ``returns`` (or calls the original)."""
    calls, original = [], getattr(module, name)

    def record(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs) if returns is None else returns

    monkeypatch.setattr(module, name, record)
    return calls


def test_the_quantile_is_d1s_conformal_quantile_at_the_level_or_the_fixed_q(folds):
    d1, d2 = folds
    plain = SetGRPOSettings()
    assert sm.quantile(plain, d1, 0.5) == sm.conformal_quantile(_scores(d1), 0.5)
    assert sm.quantile(plain, d1, 0.2) == sm.conformal_quantile(_scores(d1), 0.2) > sm.quantile(plain, d1, 0.5)
    assert sm.quantile(plain, d1, 0.5) != sm.conformal_quantile(_scores(d2), 0.5)
    pac = SetGRPOSettings(delta_a=0.2)
    assert sm.quantile(pac, d1, 0.5) == sm.conformal_quantile(_scores(d1), 0.5, delta_a=0.2) > sm.quantile(plain, d1, 0.5)
    assert sm.quantile(SetGRPOSettings(calibrate=False, fixed_q=1.7), d1, 0.5) == 1.7


def test_the_threshold_hands_every_setting_to_the_risk_test(folds, monkeypatch):
    d1, d2 = folds
    p = SetGRPOSettings(alpha=0.3, delta=0.05, grid_start=0.2, grid_step=0.1, recovery=False, gate_start=0.5,
                        execute="original")
    decide = sm.RememberedDecisions()
    calls = _spy(monkeypatch, calibration, "calibrate_threshold", returns=0.123)
    assert sm.threshold(p, d1, d2, 1.5, decide=decide) == 0.123
    (args, kwargs), = calls
    assert args[0] is d1 and args[1] is d2 and args[2] == 1.5
    levels = kwargs.pop("levels")
    assert np.array_equal(levels, sm.acceptance_levels(0.2, 0.1))
    assert kwargs == dict(alpha=0.3, delta=0.05, recovery=False, decide=decide, start=0.5, execute="original")


def test_the_threshold_without_a_gate_or_a_bounded_set(folds):
    d1, d2 = folds
    assert sm.threshold(SetGRPOSettings(gate=False), d1, d2, 1.0) == -math.inf
    assert sm.threshold(SetGRPOSettings(), d1, d2, math.inf) == math.inf
    safe, risky = _groups(np.random.default_rng(1), 40), _groups(np.random.default_rng(2), 40, reversed_reference=True)
    assert math.isfinite(sm.threshold(SetGRPOSettings(), risky, safe, 1.0))  # D2 decides: safe D2 certifies
    assert sm.threshold(SetGRPOSettings(), safe, risky, 1.0) == math.inf


def test_calibrate_at_a_fixed_level(folds, monkeypatch):
    d1, d2 = folds
    p = SetGRPOSettings(alpha_a=0.3)
    fixed = sm.calibrate(p, d1, d2)
    q = sm.quantile(p, d1, 0.3)
    assert fixed == sm.Calibration(0.3, q, sm.threshold(p, d1, d2, q), -1)
    assert math.isfinite(fixed.tau)  # the folds are safe: the comparison is not ∞ = ∞
    decide = sm.RememberedDecisions()
    calls = _spy(monkeypatch, calibration, "calibrate_threshold")
    sm.calibrate(p, d1, d2, decide=decide)
    assert calls[0][1]["decide"] is decide
    # a grid needs both a calibration and a risk test to choose by; without either, α_a stays fixed
    no_gate = SetGRPOSettings(alpha_a=0.3, alpha_a_grid="0.5,0.9", gate=False)
    assert sm.calibrate(no_gate, d1, d2) == sm.Calibration(0.3, q, -math.inf, -1)
    no_calib = SetGRPOSettings(alpha_a=0.3, alpha_a_grid="0.5,0.9", calibrate=False, fixed_q=2.5)
    chosen = sm.calibrate(no_calib, d1, d2)
    assert (chosen.alpha_a, chosen.q, chosen.accepted_d2) == (0.3, 2.5, -1)


def test_calibrate_with_a_grid_hands_every_setting_to_the_joint_choice(folds, monkeypatch):
    d1, d2 = folds
    p = SetGRPOSettings(alpha_a_grid="0.5,0.9", alpha=0.3, delta=0.05, delta_a=0.1, grid_start=0.2, grid_step=0.1,
                        recovery=False, gate_start=0.5, execute="original")
    decide = sm.RememberedDecisions()
    sentinel = sm.Calibration(0.9, 1.0, 0.5, 7)
    calls = _spy(monkeypatch, calibration, "calibrate_set_and_threshold", returns=sentinel)
    assert sm.calibrate(p, d1, d2, decide=decide) is sentinel
    (args, kwargs), = calls
    assert args[0] is d1 and args[1] is d2 and tuple(args[2]) == (0.5, 0.9)
    assert np.array_equal(kwargs.pop("levels"), sm.acceptance_levels(0.2, 0.1))
    assert kwargs == dict(alpha=0.3, delta=0.05, delta_a=0.1, recovery=False, decide=decide, start=0.5,
                          execute="original")
    calls.clear()
    sm.calibrate(dataclasses.replace(p, delta_a=0.0), d1, d2)
    assert calls[0][1]["delta_a"] is None  # 0 selects plain split conformal


def test_the_joint_choice_walks_only_levels_with_a_finite_quantile(folds, monkeypatch):
    """With 30 D1 groups q(0.01) = ∞: that level is not tried, and the Bonferroni split counts the levels
    tried over the levels offered (δ·2/3); each tried level's q is D1's quantile at it."""
    d1, d2 = folds
    trials = _spy(monkeypatch, calibration, "gate_trial")
    walks = _spy(monkeypatch, calibration, "select_certified")
    decide = sm.RememberedDecisions()
    levels = sm.acceptance_levels(0.2, 0.1)
    chosen = sm.calibrate_set_and_threshold(d1, d2, [0.01, 0.5, 0.9], alpha=0.3, delta=0.1, levels=levels,
                                            recovery=False, decide=decide, start=0.25, execute="original")
    assert [args[:2] == (d1, d2) for args, _ in trials] == [True, True]
    assert [args[2] for args, _ in trials] == [sm.conformal_quantile(_scores(d1), a) for a in (0.9, 0.5)]
    for _, kwargs in trials:
        assert np.array_equal(kwargs.pop("levels"), levels)
        assert kwargs == dict(recovery=False, decide=decide, execute="original")
    (_, walk), = walks
    assert walk == dict(alpha=0.3, delta=pytest.approx(0.1 * 2 / 3), start=0.25)
    assert chosen.q == sm.conformal_quantile(_scores(d1), chosen.alpha_a) and chosen.alpha_a in (0.5, 0.9)
    assert math.isfinite(chosen.tau) and chosen.accepted_d2 > 0


def test_the_joint_choice_by_default_walks_from_the_first_testable_threshold_executing_c(folds, monkeypatch):
    d1, d2 = folds
    trials = _spy(monkeypatch, calibration, "gate_trial")
    walks = _spy(monkeypatch, calibration, "select_certified")
    sm.calibrate_set_and_threshold(d1, d2, [0.5], alpha=0.2, delta=0.1, levels=sm.acceptance_levels())
    assert trials[0][1]["execute"] == "recovered" and trials[0][1]["recovery"] is True
    assert walks[0][1]["start"] == 0.0


def test_the_joint_choice_at_its_edges(folds):
    d1, d2 = folds
    kwargs = dict(alpha=0.2, delta=0.1, levels=sm.acceptance_levels(), start=0.5)
    assert sm.calibrate_set_and_threshold(d1, d2, [0.01, 0.02], **kwargs) == sm.Calibration(0.02, math.inf, math.inf, 0)
    risky = _groups(np.random.default_rng(5), 24, reversed_reference=True)
    nothing = sm.calibrate_set_and_threshold(d1, risky, [0.9, 0.5], **kwargs)
    assert nothing == sm.Calibration(0.9, sm.conformal_quantile(_scores(d1), 0.9), math.inf, 0)
    nothing_pac = sm.calibrate_set_and_threshold(d1, risky, [0.9, 0.5], delta_a=0.2, **kwargs)
    assert nothing_pac.q == sm.conformal_quantile(_scores(d1), 0.9, delta_a=0.2) > nothing.q
    pac = sm.calibrate_set_and_threshold(d1, d2, [0.5], delta_a=0.2, **kwargs)
    assert pac.q == sm.conformal_quantile(_scores(d1), 0.5, delta_a=0.2) != sm.conformal_quantile(_scores(d1), 0.5)


def test_remembered_decisions_decide_each_group_and_radius_once(monkeypatch):
    calls = _spy(monkeypatch, window, "decide_group")
    rng = np.random.default_rng(0)
    g1, g2 = _groups(rng, 2)
    remember = sm.RememberedDecisions()
    rho = np.full(4, 0.3)
    first = remember(g1.gram, g1.a_hat, rho, recovery=True)
    assert remember(g1.gram, g1.a_hat, rho.copy(), recovery=True) is first and len(calls) == 1
    assert _same(first, sm.decide_group(g1.gram, g1.a_hat, rho, recovery=True))
    without = remember(g1.gram, g1.a_hat, rho, recovery=False)
    assert _same(without, sm.decide_group(g1.gram, g1.a_hat, rho, recovery=False)) and without.score != first.score
    remember(g1.gram, g1.a_hat, 2 * rho, recovery=True)
    remember(g2.gram, g2.a_hat, rho, recovery=True)
    remember(g2.gram.copy(), g2.a_hat, rho, recovery=True)  # an equal matrix is another group
    assert len(calls) == len(remember) == 5
    remember.keep([g1.gram])
    assert len(remember) == 3
    assert remember(g1.gram, g1.a_hat, rho, recovery=True) is first and len(calls) == 5
    remember(g2.gram, g2.a_hat, rho, recovery=True)
    assert len(calls) == 6


def test_an_audited_group_is_frozen():
    g = _groups(np.random.default_rng(0), 1)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.a_ref = g.a_hat


# ---------------------------------------------------------------- the risk gate's edges
def test_the_p_value_of_one_accepted_group():
    assert sm.binomial_p_value(0, 1, 0.2) == pytest.approx(0.8) and sm.binomial_p_value(1, 1, 0.2) == 1.0
    assert sm.binomial_p_value(0, 0, 0.2) == 1.0


def test_the_threshold_grid_by_hand_and_at_its_edges():
    scores = np.arange(10.0)  # sorted strict to permissive: 9, 8, …, 0
    assert sm.threshold_grid(scores, np.array([0.1, 0.5, 1.0])).tolist() == [9.0, 5.0, 0.0]
    assert sm.threshold_grid(scores, np.array([0.0])).tolist() == [9.0]  # at least one group is accepted
    assert sm.threshold_grid(scores, np.array([1.5])).tolist() == [0.0]  # at most all of them
    assert sm.threshold_grid(np.array([0.7]), sm.acceptance_levels()).tolist() == [0.7]
    assert sm.threshold_grid(np.array([]), sm.acceptance_levels()).size == 0


def test_the_walk_starts_at_the_first_threshold_accepting_the_floor():
    assert sm.first_testable([3, 10, 12], 10) == 1  # reaching the floor is enough
    assert sm.first_testable([3, 5], 10) == 2  # none: past the end, nothing is tested


@pytest.mark.parametrize("setting, value", [("alpha", 1.5), ("delta", 0.0)])
def test_the_risk_test_names_a_level_out_of_range(setting, value):
    kwargs = {"alpha": 0.2, "delta": 0.1, setting: value}
    with pytest.raises(ConfigError, match=rf"^{setting}={value!r} is not allowed"):
        sm.ltt_threshold(np.array([1.0]), np.array([1.0]), np.array([False]), **kwargs)


def test_a_trial_by_default_recovers_and_its_events_are_booleans(folds):
    d1, d2 = folds
    levels = sm.acceptance_levels()
    default = sm.gate_trial(d1, d2, 1.0, levels=levels)
    explicit = sm.gate_trial(d1, d2, 1.0, levels=levels, recovery=True)
    ablation = sm.gate_trial(d1, d2, 1.0, levels=levels, recovery=False)
    assert all(np.array_equal(a, b) for a, b in zip(default, explicit))
    assert not np.array_equal(default[1], ablation[1])
    assert sm.gate_trial(d1, [], 1.0, levels=levels)[2].dtype == bool


def test_calibrate_threshold_hands_its_settings_on(folds, monkeypatch):
    d1, d2 = folds
    trials = _spy(monkeypatch, risk_gate, "gate_trial")
    walks = _spy(monkeypatch, risk_gate, "ltt_threshold")
    decide = sm.RememberedDecisions()
    sm.calibrate_threshold(d1, d2, 1.0, alpha=0.3, delta=0.05, levels=sm.acceptance_levels(), recovery=False,
                           decide=decide, start=0.5, execute="original")
    assert {k: v for k, v in trials[0][1].items() if k != "levels"} == dict(recovery=False, decide=decide,
                                                                            execute="original")
    assert walks[0][1] == dict(alpha=0.3, delta=0.05, start=0.5)


def test_selecting_among_no_certified_family(monkeypatch):
    assert sm.select_certified([], alpha=0.2, delta=0.1) == (-1, math.inf, 0)
    walks = _spy(monkeypatch, risk_gate, "ltt_threshold")
    risky = (np.array([1.0, 0.5]), np.ones(40), np.ones(40, bool))  # every accepted group reverses
    assert sm.select_certified([risky, risky], alpha=0.2, delta=0.1) == (-1, math.inf, 0)
    assert [w[1]["start"] for w in walks] == [0.0, 0.0] and [w[1]["delta"] for w in walks] == [0.05, 0.05]
