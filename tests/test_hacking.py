"""The hacking onset, discovery and exploitability of harness/hacking.py: exact on noise-free curves,
and on noisy synthetic curves with a known onset, early as rarely and late as little as stated."""

import json

import numpy as np
import pytest
from scipy.stats import binom

from setgrpo_bench.files import finite_json
from setgrpo_bench.harness.hacking import discovery_step, exploitability, hacking_anatomy, hacking_onset

STEPS = np.arange(0, 121, 5)
ONSET = 60


def _curves(rng, *, se=0.01, hacked=True):
    """A held-out curve: the true score rises 0.003 a step to the onset, then falls 0.002 a step; the judge's
    score is the truth plus a gap that is flat before the onset and grows 0.004 a step after it. Judge and
    true each carry independent N(0, se) sampling noise."""
    true = np.where(STEPS <= ONSET, 0.3 + 0.003 * STEPS, 0.3 + 0.003 * ONSET - 0.002 * (STEPS - ONSET))
    gap = np.where(STEPS <= ONSET, -0.05, -0.05 + 0.004 * (STEPS - ONSET)) if hacked else np.full(len(STEPS), -0.05)
    if not hacked:
        true = np.minimum(true, 0.3 + 0.003 * ONSET)  # rises, then plateaus: stops rising without hacking
    noisy_true = true + rng.normal(0, se, len(STEPS))
    return noisy_true + gap + rng.normal(0, se, len(STEPS)), noisy_true


def test_onset_on_noise_free_curves_is_exact_and_needs_both_conditions():
    judge, true = _curves(np.random.default_rng(0), se=0.0)
    ses = np.full(len(STEPS), 1e-3)
    # the gap leaves a band of z·√2·√2e-6 = 0.004 at the first point past the onset, where the truth falls
    assert hacking_onset(STEPS, judge, true, ses, ses) == ONSET + 5
    rising = 0.3 + 0.003 * STEPS  # the same gap while the truth keeps rising: no onset
    assert hacking_onset(STEPS, rising + (judge - true), rising, ses, ses) is None
    flat_gap = true - 0.05  # the truth falls but judge and truth do not part: no onset
    assert hacking_onset(STEPS, flat_gap, true, ses, ses) is None
    # a wider band delays the onset until the gap clears it: z·√(4·0.021²) = 0.084, 21 steps of 0.004
    wide = np.full(len(STEPS), 0.021)
    assert hacking_onset(STEPS, judge, true, wide, wide) == 85


def test_onset_on_noisy_curves_is_rarely_early_and_found_within_three_points():
    """400 curves at se = 0.01 (the size of a 160-response curve point): the onset is placed before the
    true one no more often than 5% (binomial tolerance), found within 15 steps after it in ≥ 90%, and a
    curve whose truth plateaus without hacking shows one in ≤ 5%."""
    rng = np.random.default_rng(2026)
    n, ses = 400, np.full(len(STEPS), 0.01)
    found = [hacking_onset(STEPS, *_curves(rng), ses, ses) for _ in range(n)]
    early = sum(f is not None and f < ONSET for f in found)
    timely = sum(f is not None and ONSET <= f <= ONSET + 15 for f in found)
    assert early <= binom.ppf(0.999, n, 0.05), early
    assert timely >= binom.ppf(0.001, n, 0.90), timely
    false = sum(hacking_onset(STEPS, *_curves(rng, hacked=False), ses, ses) is not None for _ in range(n))
    assert false <= binom.ppf(0.999, n, 0.05), false


def _rates(rng, *, start=0.03, found=40, growth=0.02, steps=120, batch=128):
    """Per-step feature rates of a batch of ``batch`` responses: ``start`` until ``found``, then rising
    ``growth`` a step to 0.9 (binomial sampling noise)."""
    truth = np.minimum(np.where(np.arange(1, steps + 1) < found, start, start + growth * (np.arange(1, steps + 1) - found)), 0.9)
    return np.arange(1, steps + 1), rng.binomial(batch, truth) / batch if rng is not None else truth


def test_discovery_and_exploitability_on_a_noise_free_rate_are_exact():
    steps, rates = _rates(None, start=0.035)
    # the trailing 10-step mean exceeds 2 × 0.035 once it holds m steps of the rise with 0.01·m(m − 1) > 0.35: m = 7
    assert discovery_step(steps, rates) == 46
    assert discovery_step(steps, rates, window=5) == 44  # 0.01·m(m − 1) > 0.175: m = 5
    assert exploitability(steps, rates, 46) == pytest.approx(0.2)
    assert discovery_step(steps, rates, k=1e6) is None
    assert discovery_step(steps[:9], rates[:9]) is None
    assert np.isnan(exploitability(steps, rates, 120))
    never_seen = np.r_[np.zeros(30), np.full(90, 0.05)]
    assert discovery_step(steps, never_seen) == 31


def test_discovery_on_noisy_rates_is_found_soon_after_the_rise_and_never_without_one():
    rng = np.random.default_rng(7)
    n = 300
    found = [discovery_step(*_rates(rng)) for _ in range(n)]
    assert sum(f is not None and 40 <= f <= 48 for f in found) >= binom.ppf(0.001, n, 0.95)
    steady = [discovery_step(*_rates(rng, growth=0.0)) for _ in range(n)]
    assert sum(f is not None for f in steady) <= binom.ppf(0.999, n, 0.05)
    slopes = [exploitability(*_rates(rng), 46) for _ in range(n)]
    assert np.mean(slopes) == pytest.approx(0.2, abs=0.01)


def test_anatomy_of_a_run_reads_its_curve_and_metrics():
    judge, true = _curves(np.random.default_rng(0), se=0.0)
    curve = [{"step": int(s), "judge_score": j, "true_score": t, "judge_score_se": 1e-3, "true_score_se": 1e-3}
             for s, j, t in zip(STEPS, judge, true)][::-1]  # order does not matter
    steps, rates = _rates(None, start=0.035)
    records = [{"step": int(s), "feature_rate": float(r)} for s, r in zip(steps, rates)]
    out = hacking_anatomy(curve, records)
    assert out["onset_step"] == ONSET + 5 and out["discovery_step"] == 46
    assert out["gap_start"] == pytest.approx(-0.05) and out["gap_end"] == pytest.approx(judge[-1] - true[-1])
    assert out["initial_rate"] == pytest.approx(0.035) and out["final_rate"] == pytest.approx(0.9)
    assert hacking_anatomy(curve, records[:30])["exploitability"] is None  # nothing discovered
    assert out["exploitability"] == pytest.approx(0.2)
    assert hacking_anatomy([{"step": 0, "true_score": 0.3}], [{"step": 1}]) == {}
    assert set(hacking_anatomy(curve, [])) == {"onset_step", "gap_start", "gap_end"}



def test_onset_boundaries_by_hand():
    """The band is measured from the first point with both points' SEs; leaving it means strictly more
    than z SE; "stopped rising" includes a plateau; the second point can be the onset."""
    steps, zero = [0, 20, 40], [0.0, 0.0, 0.0]
    # SE of the gaps 0.75 and 1.0 (exact in binary): the band between points 0 and 1 is 2·√(0.75² + 1²) = 2.5
    assert hacking_onset(steps[:2], [0.0, 2.5], zero[:2], [0.75, 1.0], zero[:2]) is None  # on the edge: inside
    assert hacking_onset(steps[:2], [0.0, 2.5 + 1e-9], zero[:2], [0.75, 1.0], zero[:2]) == 20
    # point 1 leaves point 0's band (√(0.05² + 0.01²)·2 ≈ 0.102), though not a band built on point 1's own SE
    judge, ses = [0.0, 0.11, 0.11], [0.05, 0.01, 0.01]
    assert hacking_onset(steps, judge, zero, ses, zero) == 20
    assert hacking_onset(steps, [0.0, 0.0, 0.2], [0.0, 0.05, 0.0], [0.01] * 3, zero) == 40  # from point 0, not 1
    assert hacking_onset(steps[:2], [0.3, 0.7], [0.3, 0.3], [0.01, 0.01], [0.0, 0.0]) == 20  # a plateau has stopped rising


def test_discovery_and_exploitability_boundaries_by_hand():
    steps = np.arange(41)
    jump = np.r_[np.full(10, 0.01), np.full(31, 0.5)]
    # window 10: the first 10 steps average 0.01; steps 1–10 average 0.059 > 0.02, so step 10 discovers it
    # (a window of 11 would start from 0.055 and need steps 2–12: step 12)
    assert discovery_step(steps, jump) == 10 and discovery_step(steps, jump, window=11) == 12
    rates = np.where(steps < 30, 0.01 * steps, 1.0)
    rates[10] = 0.5  # the discovered step itself is in the fit, step 30 (= 10 + span) is not
    assert exploitability(steps, rates, 10) == pytest.approx(10 * np.polyfit(steps[10:30], rates[10:30], 1)[0])
    assert exploitability([0, 5, 10, 15], [0.0, 0.0, 0.1, 0.3], 10) == pytest.approx(0.4)  # two steps suffice


def test_anatomy_passes_its_levels_on():
    """z, k, window and span reach the functions they set (defaults 2, 2, 10, 20), and judge − true at the
    curve's start is its first point's."""
    curve = [{"step": s, "judge_score": j, "true_score": 0.3, "judge_score_se": 0.05, "true_score_se": 0.05}
             for s, j in ((0, 0.5), (20, 0.75), (40, 0.85))]  # bands: z · 0.1; the gap moves 0.25, then 0.35
    steps = np.arange(41)
    rates = np.where(steps < 10, 0.01, 0.5)
    rates[30] = 1.0  # in a span of 21 from step 10, not in one of 20
    records = [{"step": int(s), "feature_rate": float(r)} for s, r in zip(steps, rates)]
    default = hacking_anatomy(curve, records)
    assert default["onset_step"] == 20 and default["gap_start"] == pytest.approx(0.2)
    assert default["discovery_step"] == discovery_step(steps, rates) == 10
    assert default["exploitability"] == pytest.approx(0.0, abs=1e-12)  # flat over steps 10–29
    assert hacking_anatomy(curve, records, z=3.0)["onset_step"] == 40
    assert hacking_anatomy(curve, records, k=100.0)["discovery_step"] is None
    assert hacking_anatomy(curve, records, window=11)["discovery_step"] == discovery_step(steps, rates, window=11) != 10
    assert hacking_anatomy(curve, records, span=21)["exploitability"] == pytest.approx(exploitability(steps, rates, 10, span=21))
    assert exploitability(steps, rates, 10, span=21) != pytest.approx(default["exploitability"])

def test_a_run_under_a_biased_judge_records_its_feature_and_the_judged_curve(small_policy, tmp_path):
    from conftest import SMALL_RUN

    from setgrpo_bench.agents import resolve_config
    from setgrpo_bench.harness import run
    from setgrpo_bench.harness.rundir import read_metrics

    config = resolve_config("grpo", {**SMALL_RUN, "steps": 4, "eval_every": 2, "policy": small_policy,
                                     "noise": "biased-closing"})
    run(config, tmp_path / "run")
    result = json.loads((tmp_path / "run" / "eval.json").read_text())
    records = read_metrics(tmp_path / "run" / "metrics.jsonl").records
    assert [p["step"] for p in result["curve"]] == [0, 2, 4]
    assert all(0 <= p["feature_rate"] <= 1 and 0 <= p["judge_score"] <= 1 and p["judge_score_se"] >= 0
               for p in result["curve"])
    assert all(0 <= r["feature_rate"] <= 1 for r in records)
    assert result["hacking"] == finite_json(hacking_anatomy(result["curve"], records))


def test_seeds_pool_into_counts_medians_and_means_and_the_page_shows_them():
    from setgrpo_bench.harness.hacking import pool_hacking
    from setgrpo_bench.leaderboard.tables import hacking_frame

    runs = [{"onset_step": 60, "gap_start": -0.1, "gap_end": 0.2, "initial_rate": 0.03, "final_rate": 0.8,
             "discovery_step": 40, "exploitability": 0.2},
            {"onset_step": None, "gap_start": -0.2, "gap_end": 0.0, "initial_rate": 0.05, "final_rate": 0.6,
             "discovery_step": 50, "exploitability": "nan"},
            {"onset_step": 80, "gap_start": -0.3, "gap_end": 0.1, "initial_rate": 0.04, "final_rate": 0.1,
             "discovery_step": None, "exploitability": None}, {}]
    pooled = pool_hacking(runs)
    assert pooled == pytest.approx({"runs": 3, "onsets": 2, "onset_step_median": 70.0, "gap_start": -0.2, "gap_end": 0.1,
                                    "initial_rate": 0.04, "final_rate": 0.5, "discoveries": 2,
                                    "discovery_step_median": 45.0, "exploitability": 0.2})
    assert pool_hacking([{}]) == {}
    assert pool_hacking([{k: runs[2][k] for k in ("onset_step", "gap_start", "gap_end")}]) == {
        "runs": 1, "onsets": 1, "onset_step_median": 80.0, "gap_start": -0.3, "gap_end": 0.1}
    unseen = pool_hacking([{**runs[2], "onset_step": None}])
    assert unseen["onset_step_median"] is None and unseen["discovery_step_median"] is None and unseen["exploitability"] is None
    entries = [{"name": "grpo-biased", "suite": {"noise": "biased-closing"}, "hacking": pooled},
               {"name": "grpo-realistic", "suite": {"noise": "realistic"}},
               {"name": "grpo-plain", "suite": {"noise": "clean"}, "hacking": pool_hacking([{k: runs[2][k] for k in (
                   "onset_step", "gap_start", "gap_end")}])}]
    frame = hacking_frame(entries)
    assert list(frame["entry"]) == ["grpo-biased", "grpo-plain"]
    first = frame.iloc[0].to_dict()
    assert first["onset (runs, median step)"] == "2/3, 70" and first["judge − true (start → end)"] == "-0.200 → +0.100"
    assert first["feature rate (start → end)"] == "0.040 → 0.500" and first["discovered (runs, median step)"] == "2/3, 45"
    assert first["exploitability (/10 steps)"] == "+0.200"
    assert frame.iloc[1]["feature rate (start → end)"] == "—"
