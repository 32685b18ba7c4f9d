"""``diagnose --compare-geometry``: a candidate geometry's decisions against the exact K's on the same
groups — agreement, |Δλ*|, acceptance, and the reversal of what it accepts measured under the exact K."""

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
from test_setgrpo_agent import _synthetic_samples

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.agents import setgrpo as sm
from setgrpo_bench.errors import ConfigError
from setgrpo_bench.harness import geometry_compare
from setgrpo_bench.harness.geometry_compare import compare_geometries

SETTINGS = dataclasses.replace(resolve_config("setgrpo").setgrpo, window=64)


def _with(samples, **candidates):
    return [dataclasses.replace(s, alternatives={name: make(s.gram) for name, make in candidates.items()}) for s in samples]


def test_the_exact_k_itself_or_rescaled_decides_the_same_and_the_identity_does_not():
    """λ* and the certificate depend on K's directions only: 3K agrees on every decision; K = I, on
    anisotropic Grams, changes some decisions and some λ*."""
    samples = _with(_synthetic_samples(np.random.default_rng(3), 160, noise=3.0),
                    same=lambda k: k.copy(), scaled=lambda k: 3.0 * k, identity=lambda k: np.eye(len(k)))
    rows = {r["geometry"]: r for r in compare_geometries(samples, SETTINGS, repeats=8, seed=0)}
    assert list(rows) == ["exact", "same", "scaled", "identity"]
    assert rows["exact"]["agreement"] == 1.0 and rows["exact"]["lambda_delta"] == 0.0
    for name in ("same", "scaled"):
        assert rows[name]["agreement"] == 1.0 and rows[name]["lambda_delta"] == pytest.approx(0.0, abs=1e-9)
        assert rows[name]["acceptance"] == rows["exact"]["acceptance"] and rows[name]["reversal"] == rows["exact"]["reversal"]
    assert rows["identity"]["agreement"] < 1.0 and rows["identity"]["lambda_delta"] > 0.01
    assert rows["exact"]["decisions"] == 8 * (160 - 64) and 0 < rows["exact"]["acceptance"] < 1


def test_what_a_candidate_accepts_is_judged_under_the_exact_k(monkeypatch):
    """The certificate's reversal rate asks whether c' opposes the reference update in the policy's real
    geometry: every reversal is evaluated with an exact Gram, never the candidate's."""
    samples = _with(_synthetic_samples(np.random.default_rng(4), 120, noise=3.0), identity=lambda k: np.eye(len(k)))
    exact = {id(s.gram) for s in samples}
    seen, reversal = [], sm.reversal
    monkeypatch.setattr(geometry_compare.sm, "reversal", lambda c, K, a: seen.append(id(K) in exact) or reversal(c, K, a))
    rows = compare_geometries(samples, SETTINGS, repeats=4, seed=1)
    assert seen and all(seen) and rows[1]["acceptance"] > 0


def test_a_sample_no_larger_than_the_window_is_refused():
    samples = _with(_synthetic_samples(np.random.default_rng(5), 64), identity=lambda k: np.eye(len(k)))
    with pytest.raises(ConfigError, match="more than the window"):
        compare_geometries(samples, SETTINGS, repeats=1, seed=0)


def test_diagnose_compares_geometries_on_the_sampled_groups(small_policy, tmp_path):
    from setgrpo_bench.cli import main

    args = ["diagnose", "--policy", small_policy, "--envs", "MedicationGuide,UnitConversion", "--groups", "20",
            "--group-size", "4", "--groups-per-step", "8", "--max-new-tokens", "12", "--repeats", "3", "--window", "8",
            "--alphas-a", "0.5", "--alphas", "0.2", "--compare-geometry", "identity,last:1", "--out", str(tmp_path / "d")]
    assert main(args) == 0
    result = json.loads((tmp_path / "d" / "diagnose.json").read_text())["geometry"]
    assert result["exact"] == "full" and [r["geometry"] for r in result["rows"]] == ["exact", "identity", "last:1"]
    assert all(0 <= r["agreement"] <= 1 and r["decisions"] == 3 * 12 for r in result["rows"])
    assert main(args[:5] + ["--groups", "8"] + args[7:]) == 2  # no group left out of the window: named, before sampling


class _ScoreFromGram:
    """A decider whose decision is written in K: λ* = K[0, 0], certifiable when K[0, 1] ≥ 0, executed
    coefficients K[1, 1] · â; with recovery off it certifies nothing."""

    def __call__(self, gram, a_hat, rho, *, recovery):
        return sm.GroupDecision(float(gram[0, 0]) if recovery else 0.0, gram[1, 1] * np.asarray(a_hat), bool(gram[0, 1] >= 0))


def _by_hand(monkeypatch, window=1):
    """Four groups decided at τ̂ = 0.5 (the calibration is stubbed: it checks its folds and its decider)."""
    from setgrpo_bench.harness.diagnose import GroupSample

    half = window // 2

    def calibrate(settings, d1, d2, *, decide):
        assert len(d1) == len(d2) == half and isinstance(decide, _ScoreFromGram)
        return sm.Calibration(0.5, 1.0, 0.5, -1)

    monkeypatch.setattr(geometry_compare.sm, "RememberedDecisions", _ScoreFromGram)
    monkeypatch.setattr(geometry_compare.sm, "calibrate", calibrate)
    a_hat, a_ref, a_true = np.array([1.0, -1.0]), np.array([1.0, -1.0]), np.array([-1.0, 1.0])

    def gram(score, certifiable=True, sign=1.0):
        return np.array([[score, 1.0 if certifiable else -1.0], [0.0, sign]])

    # (exact, candidate): g0 both accept (the candidate's c = −â reverses a* under the exact K, not a_true);
    # g1 exact accepts at λ* = τ̂ exactly, the candidate rejects; g2 the exact K certifies nothing, the
    # candidate accepts; g3 both reject
    pairs = [(gram(0.9), gram(0.8, sign=-1.0)), (gram(0.5), gram(0.3)), (gram(0.9, certifiable=False), gram(0.7)),
             (gram(0.2), gram(0.1))]
    extra = [(gram(0.0), gram(0.0))] * max(0, 2 * half - 3)  # a window of 4 then leaves one group held out
    return [GroupSample(a_hat, a_ref, np.ones(2), exact, a_true=a_true, alternatives={"cheap": cheap})
            for exact, cheap in pairs + extra]


def test_the_statistics_by_hand(monkeypatch):
    settings = SimpleNamespace(window=1, execute="recovered", recovery=True)  # the calibration is stubbed: no window
    exact, cheap = compare_geometries(_by_hand(monkeypatch), settings, repeats=1, seed=0)
    assert exact == {"geometry": "exact", "agreement": 1.0, "lambda_delta": 0.0, "acceptance": 0.5, "reversal": 0.0,
                     "reversal_true": 1.0, "decisions": 4}
    assert cheap["agreement"] == 0.5 and cheap["acceptance"] == 0.5 and cheap["decisions"] == 4
    assert cheap["lambda_delta"] == pytest.approx((0.1 + 0.2 + 0.1) / 3)  # over the groups certifiable under both
    # accepted g0 (c = −â: reverses a*, not a_true) and g2 (c = â: reverses a_true, not a*), under the exact K
    assert cheap["reversal"] == 0.5 and cheap["reversal_true"] == 0.5
    twice = compare_geometries(_by_hand(monkeypatch), settings, repeats=2, seed=0)
    assert [r["decisions"] for r in twice] == [8, 8] and twice[1]["agreement"] == 0.5 and twice[1]["reversal"] == 0.5
    literal = compare_geometries(_by_hand(monkeypatch), SimpleNamespace(window=1, execute="recovered", recovery=False),
                                 repeats=1, seed=0)
    assert literal[0]["acceptance"] == 0.0  # the recovery setting reaches the decider
    executed = compare_geometries(_by_hand(monkeypatch), SimpleNamespace(window=1, execute="original", recovery=True),
                                  repeats=1, seed=0)
    assert executed[1]["reversal"] == 0.0 and executed[1]["reversal_true"] == 1.0  # c = â for both accepted


def test_the_window_is_split_into_d1_and_d2_and_the_rest_is_held_out(monkeypatch):
    settings = dataclasses.replace(SETTINGS, window=4)
    rows = compare_geometries(_by_hand(monkeypatch, window=4), settings, repeats=3, seed=0)  # 5 groups: one held out
    assert [r["decisions"] for r in rows] == [3, 3]
    assert compare_geometries(_by_hand(monkeypatch, window=4), settings, repeats=3, seed=0) == rows  # seeded


def test_nothing_certified_leaves_the_rates_undefined(monkeypatch):
    """Under a gate that certifies nothing (the learned judge at step 120) |Δλ*| and the reversal rates have
    no groups to average: NaN, and every decision agrees."""
    samples = [dataclasses.replace(s, gram=np.array([[0.9, -1.0], [0.0, 1.0]])) for s in _by_hand(monkeypatch)]
    exact, cheap = compare_geometries(samples, SimpleNamespace(window=1, execute="recovered", recovery=True), repeats=1, seed=0)
    assert exact["acceptance"] == 0.0 and np.isnan(exact["lambda_delta"]) and np.isnan(exact["reversal"])
    assert np.isnan(exact["reversal_true"]) and np.isnan(cheap["lambda_delta"]) and cheap["agreement"] == 0.5
