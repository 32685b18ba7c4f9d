"""``diagnose --compare-geometry``: a candidate geometry's decisions against the exact K's on the same
groups — agreement, |Δλ*|, acceptance, and the reversal of what it accepts measured under the exact K."""

import dataclasses
import json

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
