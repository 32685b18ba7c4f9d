"""Verdicts against GRPO (leaderboard/verdicts.py): each test by hand against scipy, then the page's
error rates simulated: no more than 5% of pages of identical methods carry any verdict, and a planted
3σ effect at 5 seeds is found at least 80% of the time. Tolerances are binomial, seeds fixed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from setgrpo_bench.leaderboard.verdicts import (
    checks_display,
    compare,
    holm,
    homogeneity,
    judge_tests,
    verdict_display,
    verdict_heading,
    verdicts,
)

PAGES = 400  # simulated pages per rate


def _page(rng: np.random.Generator, *, judges: int = 6, agents: int = 8, seeds: int = 5, effect: float = 0.0,
          sds: np.ndarray | None = None) -> pd.DataFrame:
    """``judges`` × (GRPO + ``agents`` others) entries, seeds ~ N(0.5, sd²); agent ``a0`` under the first
    judge shifted by ``effect`` (in units of its sd): 48 verdicts at the defaults."""
    rows = []
    for j in range(judges):
        for k, agent in enumerate(["grpo", *(f"a{i}" for i in range(agents))]):
            sd = 0.02 if sds is None else float(sds[k])
            shift = effect * sd if (j == 0 and agent == "a0") else 0.0
            rows.append({"agent": agent, "noise": f"judge{j}", "oracle": False,
                         "per_seed": list(0.5 + shift + sd * rng.standard_normal(seeds))})
    return pd.DataFrame(rows)


def test_holm_by_hand():
    # sorted p: 0.01·4 = 0.04, 0.02·3 = 0.06, 0.03·2 = 0.06 (monotone), 0.5·1 = 0.5
    assert holm(np.array([0.03, 0.01, 0.5, 0.02])) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm(np.array([0.4, 0.9])) == pytest.approx([0.8, 0.9])  # 0.4·2 = 0.8; max(0.8, 0.9·1)
    assert holm(np.array([0.6, 0.7])) == pytest.approx([1.0, 1.0])  # capped at 1


def test_pooled_and_welch_tests_match_scipy():
    x, y = np.array([0.52, 0.55, 0.50, 0.58]), np.array([0.47, 0.49, 0.51])
    welch = stats.ttest_ind(x, y, equal_var=False)
    out = compare(x, y, None)
    assert out["p"] == pytest.approx(welch.pvalue) and out["diff"] == pytest.approx(x.mean() - y.mean())
    ci = welch.confidence_interval(0.95)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((ci.low, ci.high))
    student = stats.ttest_ind(x, y, equal_var=True)  # pooled over these two samples only: df 5
    var = ((len(x) - 1) * x.var(ddof=1) + (len(y) - 1) * y.var(ddof=1)) / 5
    assert compare(x, y, (var, 5))["p"] == pytest.approx(student.pvalue)


def test_a_judge_pools_every_agent_unless_levene_rejects():
    rng = np.random.default_rng(3)
    seeds = {"grpo": 0.5 + 0.02 * rng.standard_normal(5), "a": 0.55 + 0.02 * rng.standard_normal(5),
             "b": 0.5 + 0.02 * rng.standard_normal(3)}
    rows, check = judge_tests(seeds)
    assert check["test"] == "pooled" and check["pooled_df"] == 4 + 4 + 2
    assert check["levene_p"] == pytest.approx(stats.levene(*seeds.values(), center="median").pvalue)
    assert [r["agent"] for r in rows] == ["a", "b"]
    wild = {**seeds, "c": np.array([0.2, 0.21, 0.5, 0.8, 0.79]), "d": np.array([0.22, 0.2, 0.5, 0.78, 0.8])}
    assert homogeneity(list(wild.values())) < 0.05
    rows, check = judge_tests(wild)
    assert check["test"] == "Welch" and {r["test"] for r in rows} == {"Welch"}


def test_a_page_of_identical_methods_carries_a_verdict_at_most_5_percent_of_the_time():
    """Holm over the page's 48 verdicts: the family-wise rate of any win or loss ≤ 5%. Without the
    correction 48 tests at 5% would put a verdict on most pages."""
    rng = np.random.default_rng(20261206)
    any_verdict = 0
    for _ in range(PAGES):
        table, _ = verdicts(_page(rng, seeds=5))
        assert len(table) == 48
        any_verdict += bool((table["verdict"] != "tie").any())
    assert any_verdict <= stats.binom.ppf(0.999, PAGES, 0.05)


def test_unequal_seed_variances_fall_back_to_welch_and_keep_the_rate():
    rng = np.random.default_rng(7)
    sds = np.array([0.01, 0.04, 0.01, 0.03, 0.01, 0.05, 0.01, 0.02, 0.04])
    any_verdict = 0
    for _ in range(PAGES):
        table, _ = verdicts(_page(rng, seeds=5, sds=sds))
        any_verdict += bool((table["verdict"] != "tie").any())
    assert any_verdict <= stats.binom.ppf(0.999, PAGES, 0.05)


def test_a_planted_3_sigma_effect_at_5_seeds_is_found_80_percent_of_the_time():
    rng = np.random.default_rng(11)
    found = 0
    for _ in range(PAGES):
        table, _ = verdicts(_page(rng, seeds=5, effect=3.0))
        row = table[(table["judge"] == "judge0") & (table["agent"] == "a0")].iloc[0]
        found += row["verdict"] == "win"
    assert found >= stats.binom.ppf(0.001, PAGES, 0.80)


def test_the_oracle_and_entries_without_seeds_get_no_verdict():
    frame = pd.DataFrame([
        {"agent": "grpo", "noise": "clean", "oracle": False, "per_seed": [0.5, 0.51, 0.49]},
        {"agent": "grpo_oracle", "noise": "clean", "oracle": True, "per_seed": [0.7, 0.71, 0.69]},
        {"agent": "old", "noise": "clean", "oracle": False, "per_seed": []},
        {"agent": "a", "noise": "clean", "oracle": False, "per_seed": [0.6, 0.61, 0.59]},
        {"agent": "a", "noise": "learned", "oracle": False, "per_seed": [0.6, 0.61, 0.59]},  # no grpo here
    ])
    table, checks = verdicts(frame)
    assert table[["judge", "agent"]].values.tolist() == [["clean", "a"]]
    assert table["verdict"].tolist() == ["win"] and set(checks["judge"]) == {"clean", "learned"}


def test_homogeneity_counts_two_seed_cells_and_two_cells():
    two = [np.array([0.1, 0.5]), np.array([0.30, 0.31])]
    assert homogeneity(two) == pytest.approx(stats.levene(*two, center="median").pvalue)
    assert homogeneity([*two, np.array([0.4])]) == homogeneity(two)  # a one-seed cell has no variance to compare
    assert homogeneity([np.array([0.2, 0.2]), np.array([0.5, 0.5, 0.5])]) == 1.0  # nothing varies: nothing to reject
    assert homogeneity([np.array([0.1, 0.5])]) == 1.0


def test_edges_by_hand_zero_variance_two_seed_cells_losses_and_judge_order():
    same = compare(np.array([0.5, 0.5]), np.array([0.5, 0.5]), None)
    assert same == {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0, "p": 1.0, "df": np.inf}
    apart = compare(np.array([0.6, 0.6]), np.array([0.5, 0.5]), None)
    assert apart["p"] == 0.0 and apart["ci_low"] == apart["ci_high"] == pytest.approx(0.1)
    rows, check = judge_tests({"grpo": np.array([0.50, 0.52, 0.48]), "two": np.array([0.40, 0.42])})
    assert [(r["agent"], r["n"], r["n_baseline"]) for r in rows] == [("two", 2, 3)]
    rows, check = judge_tests({"grpo": np.array([0.2, 0.21, 0.5, 0.8, 0.79]), "a": np.array([0.50, 0.51, 0.49, 0.5, 0.5]),
                               "b": np.array([0.22, 0.2, 0.5, 0.78, 0.8])})
    assert check["test"] == "Welch" and check["pooled_df"] is None
    frame = pd.DataFrame([
        {"agent": agent, "noise": judge, "oracle": False, "per_seed": list(mean + 0.01 * np.array([-1.0, 0.0, 1.0, 0.5, -0.5]))}
        for judge in ("learned", "realistic") for agent, mean in (("grpo", 0.5), ("worse", 0.3))])
    table, checks = verdicts(frame)
    assert table["judge"].tolist() == ["realistic", "learned"] and checks["judge"].tolist() == ["realistic", "learned"]
    assert table["verdict"].tolist() == ["loss", "loss"]
    empty, checks = verdicts(frame[frame["agent"] == "grpo"])
    assert empty.empty and checks["judge"].tolist() == ["realistic", "learned"]


def test_two_seed_cells_count_in_the_pool_and_a_two_seed_baseline_gets_verdicts():
    rows, check = judge_tests({"grpo": np.array([0.50, 0.52]), "a": np.array([0.40, 0.42, 0.41])})
    assert [(r["agent"], r["n_baseline"]) for r in rows] == [("a", 2)]
    assert check["pooled_df"] == 1 + 2 and rows[0]["df"] == 3.0


def test_welch_reports_its_satterthwaite_degrees_of_freedom():
    x, y = np.array([0.5, 0.52, 0.55, 0.49]), np.array([0.4, 0.3, 0.45])
    assert compare(x, y, None)["df"] == pytest.approx(stats.ttest_ind(x, y, equal_var=False).df)


def test_the_page_shows_each_verdict_and_check_as_written():
    table = pd.DataFrame([{"judge": "clean", "agent": "a", "against": "grpo", "n": 5, "n_baseline": 3, "diff": 0.0123, "ci_low": -0.004,
                           "ci_high": 0.0286, "p": 0.0412, "p_adjusted": 0.612, "test": "pooled", "verdict": "tie"}])
    assert verdict_display(table).to_dict("records") == [{
        "judge": "clean", "agent": "a", "seeds": "5 v 3", "Δ vs grpo": "+0.012", "95% CI": "[-0.004, +0.029]",
        "p": "0.0412", "Holm p": "0.612", "test": "pooled", "verdict": "tie"}]
    checks = pd.DataFrame([{"judge": "clean", "levene_p": 0.51234, "test": "pooled", "pooled_df": 12},
                           {"judge": "learned", "levene_p": 0.01, "test": "Welch", "pooled_df": None}])
    assert checks_display(checks).to_dict("records") == [
        {"judge": "clean", "Levene p": "0.512", "seed variance": "pooled (12 df)"},
        {"judge": "learned", "Levene p": "0.01", "seed variance": "Welch (not pooled)"}]


def test_a_method_faces_its_controls_in_the_same_family():
    """``controls``: the method against each control under each judge, a pair lacking a side untested, every
    p adjusted with the baseline's in one Holm family; the page names what each row is compared with."""
    seeds = {"grpo": np.array([0.50, 0.52, 0.48, 0.51, 0.49]), "m": np.array([0.60, 0.62, 0.58, 0.61, 0.59]),
             "stop": np.array([0.61, 0.63, 0.59, 0.60, 0.62]), "kl": np.array([0.50, 0.49, 0.51, 0.52, 0.48])}
    rows, check = judge_tests(seeds, {"m": ("stop", "kl", "absent")})
    assert [(r["agent"], r["against"]) for r in rows] == [("m", "grpo"), ("stop", "grpo"), ("kl", "grpo"), ("m", "stop"), ("m", "kl")]
    by_hand = compare(seeds["m"], seeds["stop"], (np.mean([np.var(v, ddof=1) for v in seeds.values()]), 16))
    assert rows[3]["diff"] == pytest.approx(-0.010) and rows[3]["p"] == pytest.approx(by_hand["p"])
    frame = pd.DataFrame([{"agent": a, "noise": "clean", "oracle": False, "per_seed": list(v)} for a, v in seeds.items()])
    table, _ = verdicts(frame, {"m": ("stop", "kl")})
    assert len(table) == 5 and table["p_adjusted"].tolist() == pytest.approx(holm(table["p"].to_numpy()).tolist())
    assert table.set_index(["agent", "against"])["verdict"][("m", "kl")] == "win"
    assert table.set_index(["agent", "against"])["verdict"][("m", "stop")] == "tie"
    shown = verdict_display(table)
    assert shown["against"].tolist() == ["grpo", "grpo", "grpo", "stop", "kl"] and "Δ" in shown
    assert verdict_heading(table) == "Where each method wins, ties or loses against grpo, and m against its controls"
    both, _ = verdicts(frame, {"m": ("kl",), "stop": ("kl",)})
    assert verdict_heading(both) == "Where each method wins, ties or loses against grpo, and m, stop against their controls"
    plain, _ = verdicts(frame)
    assert "against" not in verdict_display(plain) and "Δ vs grpo" in verdict_display(plain)
    assert verdict_heading(plain) == "Where each method wins, ties or loses against grpo"
