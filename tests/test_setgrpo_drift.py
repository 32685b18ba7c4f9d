"""SetGRPO while the policy moves (agents/setgrpo/window.py ``drift_corrected_level``, DESIGN §8): the
gate tests its window at a level lowered by the rise of GRPO's reversal rate, and a simulated drifting
stream shows the uncorrected window breaking the gate's certificate where the default keeps it."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.agents.setgrpo.ltt import min_testable_count
from setgrpo_bench.agents.setgrpo.risk_gate import acceptance_levels, ltt_threshold, threshold_grid
from setgrpo_bench.agents.setgrpo.window import drift_corrected_level


def test_the_level_falls_by_the_ratio_of_the_windows_reversal_rate_to_the_recent_one():
    ages = np.array([1] * 20 + [40] * 20)
    rising = np.array([1] * 10 + [0] * 10 + [1] * 2 + [0] * 18)  # 10/20 recent, 12/40 in the window
    window, recent = 13 / 42, 11 / 22  # add-one smoothed
    assert drift_corrected_level(0.2, ages, rising, recent=32) == pytest.approx(0.2 * window / recent)
    assert drift_corrected_level(0.2, ages, rising[::-1], recent=32) == 0.2  # a falling rate: never raised
    assert drift_corrected_level(0.2, ages, rising, recent=0) == 0.2  # 0: the literal reading
    assert drift_corrected_level(0.2, ages, rising, recent=0.5) == 0.2  # nothing recent
    assert drift_corrected_level(0.2, ages, rising, recent=1) == pytest.approx(0.2 * window / recent)  # a step back
    assert drift_corrected_level(0.2, ages, rising, recent=40) == 0.2  # everything recent: no drift to see
    # a group exactly `recent` steps old is recent
    assert drift_corrected_level(0.2, np.array([32] * 20 + [33] * 20), rising, recent=32) < 0.2


def test_the_agent_ages_its_window_by_its_own_steps_and_restores_them():
    from conftest import groups_of

    from setgrpo_bench.agents.setgrpo import SetGRPOAgent

    config = resolve_config("setgrpo", {"groups_per_step": 4, "group_size": 4})
    agent = SetGRPOAgent(config.setgrpo, std_floor=0.05)
    rng = np.random.default_rng(0)
    for step in range(3):
        groups = groups_of(rng.random((4, 4)))
        grams = {b: np.eye(4) for b in range(4)}
        agent.update(groups, grams, {b: rng.random(4) for b in (0, 1)})
    assert agent.step == 3 and [g.step for _, g in agent.window] == [0, 0, 1, 1, 2, 2]
    again = SetGRPOAgent(config.setgrpo, std_floor=0.05)
    again.load_state_dict(agent.state_dict())
    assert again.step == 3 and [g.step for _, g in again.window] == [0, 0, 1, 1, 2, 2]
    old = agent.state_dict()
    del old["step"]
    for _, group in old["window"]:
        del group["step"]
    again.load_state_dict(old)  # a window saved before steps were kept: every group of age 0
    assert again.step == 0 and {g.step for _, g in again.window} == {0}


# ------------------------------------------------------------------ a drifting stream
#
# The learned judge's board-v2 runs: with no gate, GRPO's own update reverses the reference's on 13% of
# groups at the start and 45% by step 120 (docs/setgrpo.md, "Calibration under drift"). Here a group's
# score s (its recovery ratio) is uniform on [0, 1] and it reverses with probability r(t)(1 + κ(1/2 − s)),
# r rising linearly from 0.13 to 0.45; κ = 1 (the best-scored groups reverse a third as often as the
# worst-scored) is not measured: it is the score's power to select safer groups. The true risk of the groups a threshold τ accepts is then
# R_t(τ) = r(t)(1 − κτ/2), known exactly, and the certificate is broken at a step when τ̂ is finite and
# R_t(τ̂) > α. Learn-then-Test promises P(broken) ≤ δ at every step.

R_START, R_END, STEPS, KAPPA = 0.13, 0.45, 120, 1.0
CHECKED_STEP = 50  # where the uncorrected window breaks most (0.19 of 300 streams; 0.06–0.17 at steps 40–70)
REPETITIONS = 1000


def _risk(t: float) -> float:
    return R_START + (R_END - R_START) * t / STEPS


def _broken(rng: np.random.Generator, s, *, recent: int) -> bool:
    """One stream to CHECKED_STEP under the preset's budget: the warm-up, then audit_fraction of the
    groups audited each step into the window; τ̂ at CHECKED_STEP at the level corrected for drift."""
    per_step = math.ceil(s.audit_fraction * 16)
    steps = np.concatenate([np.zeros(s.warmup_groups, int), np.repeat(np.arange(1, CHECKED_STEP), per_step)])
    steps = steps[-s.window:]  # the window keeps its last `window` groups
    scores = rng.random(len(steps))
    events = rng.random(len(steps)) < np.array([_risk(t) for t in steps]) * (1 + KAPPA * (0.5 - scores))
    folds = (np.arange(len(steps)) + s.warmup_groups + per_step * (CHECKED_STEP - 1) - len(steps)) % 2
    level = drift_corrected_level(s.alpha, CHECKED_STEP - steps, events, recent=recent)
    d1, d2 = folds == 0, folds == 1
    families = len(s.alpha_a_grid.split(","))
    grid = threshold_grid(scores[d1], acceptance_levels(s.grid_start, s.grid_step))
    tau = ltt_threshold(grid, scores[d2], events[d2], alpha=level, delta=s.delta / families, start=s.gate_start)
    if not math.isfinite(tau):
        return False
    return _risk(CHECKED_STEP) * (1 - KAPPA * min(tau, 1.0) / 2) > s.alpha


def _breaks(recent: int) -> int:
    s = resolve_config("setgrpo").setgrpo
    assert min_testable_count(s.alpha, s.delta) < s.window / 2
    return sum(_broken(np.random.default_rng(seed), s, recent=recent) for seed in range(REPETITIONS))


def test_under_drift_the_literal_window_breaks_the_certificate_and_the_default_keeps_it():
    """Counts of broken certificates over 1,000 streams against δ, within a binomial tolerance
    (two-sided level 1e-4 each way): the default's is consistent with ≤ δ, the whole window's is not."""
    s = resolve_config("setgrpo").setgrpo
    bound = binom.ppf(1 - 1e-4, REPETITIONS, s.delta)  # the most a rate of δ gives but once in 10⁴
    default, whole = _breaks(s.drift_steps), _breaks(0)
    assert s.drift_steps > 0 and default <= bound, (default, bound)
    assert whole > bound, (whole, bound)


# ------------------------------------------------------------------ diagnostics of the certificate over time


def _steps(counts: list[tuple[int, int]], ages: list[float] | None = None) -> list[dict]:
    """Metrics records of a SetGRPO run: (audited accepted, reversed) per step, and the window's age."""
    return [{"step": i + 1, "n_audited_accepted": n, "n_reversed_ref": k,
             **({"window_age": ages[i]} if ages is not None else {})} for i, (n, k) in enumerate(counts)]


def test_reversal_is_pooled_per_block_of_twenty_steps_with_its_exact_interval():
    from setgrpo_bench.harness.pooled import clopper_pearson, reversal_by_block

    records = _steps([(2, 1)] * 20 + [(3, 0)] * 20 + [(1, 1)] * 5) + [{"step": 46, "loss": 0.0}]  # not SetGRPO's
    blocks = reversal_by_block(records)
    assert [(b["first_step"], b["last_step"], b["n_audited_accepted"], b["n_reversed_ref"]) for b in blocks] == [
        (1, 20, 40, 20), (21, 40, 60, 0), (41, 45, 5, 5)]
    assert blocks[0]["reversal_ref"] == 0.5 and (blocks[0]["reversal_ref_low"], blocks[0]["reversal_ref_high"]) == \
        clopper_pearson(20, 40)
    assert reversal_by_block(_steps([(0, 0)] * 3))[0]["reversal_ref"] is None
    assert reversal_by_block([]) == []
    assert [b["last_step"] for b in reversal_by_block(_steps([(1, 0)] * 40))] == [20, 40]  # no empty block after
    assert [b["last_step"] for b in reversal_by_block(_steps([(1, 0)] * 41))] == [20, 40, 41]  # a block of one step


def test_reversal_by_window_age_bins_the_steps_by_their_windows_mean_age():
    from setgrpo_bench.harness.pooled import reversal_by_age

    records = _steps([(4, 1), (4, 2), (4, 3), (4, 4)], ages=[5.0, 10.0, 29.9, 55.0])
    ages = reversal_by_age(records)
    assert [(a["min_age"], a["max_age"], a["n_reversed_ref"]) for a in ages] == [
        (0, 10, 1), (10, 20, 2), (20, 30, 3), (30, 40, 0), (40, None, 4)]
    assert reversal_by_age(_steps([(4, 1)])) == []  # a run that did not log its window's age
    assert reversal_by_age(_steps([(4, 1)], ages=[float("nan")])) == []


def test_runs_pool_block_by_block_and_each_block_is_tested_against_alpha_with_holm():
    from setgrpo_bench.harness.pooled import drift_diagnostics, pool_drift
    from setgrpo_bench.leaderboard.verdicts import certificate_by_block

    runs = [_steps([(3, 0)] * 20 + [(2, 1)] * 20 + [(1, 0)] * 5, ages=[5.0] * 45) for _ in range(3)]
    pooled = pool_drift(drift_diagnostics(r) for r in runs)
    assert [b["n_audited_accepted"] for b in pooled["blocks"]] == [180, 120, 15]
    assert [b["n_reversed_ref"] for b in pooled["blocks"]] == [0, 60, 0] and pooled["ages"][0]["n_reversed_ref"] == 60
    tests = certificate_by_block(pooled["blocks"], alpha=0.2)
    assert [t["first_step"] for t in tests] == [1, 21]  # the last block has fewer than 25 groups: untested
    assert tests[0]["held"] and not tests[1]["held"]  # 60 of 120 at α = 0.2 is above α beyond chance
    assert tests[1]["p_adjusted"] == pytest.approx(min(1.0, 2 * tests[1]["p_above_alpha"]))  # Holm over 2
    assert pool_drift([{}, {}]) == {} and drift_diagnostics([{"step": 1, "loss": 0.0}]) == {}
    blocks_only = {"blocks": drift_diagnostics(runs[0])["blocks"]}  # a run that kept no age profile
    assert pool_drift([blocks_only])["ages"] == [] and pool_drift([blocks_only])["blocks"] == blocks_only["blocks"]
    at_the_floor = [{"first_step": 1, "last_step": 20, "n_audited_accepted": 25, "n_reversed_ref": 5}]
    assert [t["first_step"] for t in certificate_by_block(at_the_floor, alpha=0.2)] == [1]  # 25 groups: tested
    assert certificate_by_block(at_the_floor, alpha=0.2, min_groups=26) == []


def test_the_drift_command_reproduces_the_learned_judges_aging_certificate(capsys):
    """Board v2's SetGRPO under the learned judge (5 seeds): 0.132 → 0.393 by block, above α in blocks 3–4."""
    from setgrpo_bench.cli import main

    runs = Path(__file__).resolve().parents[1] / "leaderboard" / "v2" / "runs" / "setgrpo-learned-31a71f08"
    assert main(["drift", str(runs)]) == 0  # the seeds found below it, kept compressed as a board keeps them
    out = capsys.readouterr().out
    assert "0.132 [0.082, 0.196]" in out and "0.330 [0.242, 0.428]" in out and out.count("above α") == 2
    assert "0.237 [0.198, 0.279]" in out  # every audited accepted group of the run


def test_the_page_shows_the_certificate_by_block_for_entries_that_hold_it():
    from setgrpo_bench.harness.pooled import drift_diagnostics
    from setgrpo_bench.leaderboard.tables import drift_frame

    drift = drift_diagnostics(_steps([(3, 1)] * 25))
    frame = drift_frame([{"name": "old", "suite": {"noise": "clean"}},
                         {"name": "new", "suite": {"noise": "learned"}, "drift": drift}])
    assert frame.to_dict("records") == [{"entry": "new", "judge": "learned",
                                         "steps 1–20": "0.333 [0.22, 0.47] (60)", "steps 21–25": "0.333 [0.12, 0.62] (15)"}]
    assert drift_frame([{"name": "old", "suite": {"noise": "clean"}}]).empty


def test_a_setgrpo_entry_carries_its_runs_reversal_by_block_to_the_page(small_policy, tmp_path):
    from conftest import SMALL_RUN

    from setgrpo_bench.harness import run
    from setgrpo_bench.leaderboard import build_board, publish
    from setgrpo_bench.leaderboard.submission import check_submission

    overrides = {**SMALL_RUN, "steps": 3, "policy": small_policy, "warmup_groups": 4, "window": 8, "audit_fraction": 1.0}
    results = [run(resolve_config("setgrpo", {**overrides, "seed": seed}), tmp_path / "runs" / f"seed{seed}")
               for seed in (0, 1)]
    assert all(r["drift"]["blocks"][0]["last_step"] == 3 for r in results)
    [written] = publish([tmp_path / "runs"], tmp_path / "board", protocol=None)
    entry = json.loads(written.read_text())
    assert check_submission(entry, current=False) == []  # the schema holds its drift (the suite here is a test's)
    assert entry["drift"]["blocks"][0]["n_audited_accepted"] == sum(
        r["drift"]["blocks"][0]["n_audited_accepted"] for r in results)
    frame, rejected = build_board(tmp_path / "board")
    assert rejected == [] and frame["verified"].tolist() == [True]
    assert "## SetGRPO's certificate as the policy moves" in (tmp_path / "board" / "README.md").read_text()
