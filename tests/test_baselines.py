"""The baseline coefficient rules on hand-computed groups, the budget-matched control, and a contract
test that runs every agent preset of the catalog."""

import math

import numpy as np
import pytest

from setgrpo_bench.agents import Groups, RuleAgent, resolve_config
from setgrpo_bench.agents import coefficients as co
from setgrpo_bench.agents.budget import budget_matched_repeats
from setgrpo_bench.agents.presets import load_preset, preset_paths
from setgrpo_bench.harness import run
from setgrpo_bench.harness.suite import make_envs
from setgrpo_bench.harness.trainer import Trainer
from setgrpo_bench.policy import load_policy

RULES = sorted(co.COEFFICIENT_RULES)


def test_dr_grpo_centres_without_scaling():
    assert np.allclose(co.dr_grpo_coefficients(np.array([0.2, 0.4, 0.9, 0.5])), [-0.3, -0.1, 0.4, 0.0])


def test_mc_grpo_odd_even_and_ties():
    odd = co.mc_grpo_coefficients(np.array([0.1, 0.5, 0.9]))  # median 0.5, MAD 0.4, median rollout out
    assert np.isnan(odd[1]) and np.allclose(odd[[0, 2]], np.array([-0.4, 0.4]) / 0.401 * 3 / 2)
    even = co.mc_grpo_coefficients(np.array([0.1, 0.3, 0.6, 1.0]))  # median 0.45, MAD 0.25, none left out
    assert np.allclose(even, (np.array([0.1, 0.3, 0.6, 1.0]) - 0.45) / 0.251)
    ties = co.mc_grpo_coefficients(np.array([0.5, 0.5, 0.9]))  # MAD 0: only the 1e-3 floor; one of the tied medians out
    assert np.isnan(ties[0]) and ties[1] == 0 and ties[2] == pytest.approx(0.4 / 1e-3 * 3)


def test_qae_quantile_baseline():
    r = np.array([0.0, 0.5, 1.0, 0.2])  # sorted 0, .2, .5, 1: the 0.4-quantile is .2 + .2·.3 = .26
    assert np.allclose(co.qae_coefficients(r, qae_quantile=0.4), r - 0.26)
    scaled = co.qae_coefficients(r, qae_quantile=0.4, qae_std=True, std_floor=0.0, eps=0.0)
    assert np.allclose(scaled, (r - 0.26) / r.std(ddof=1))


def test_gapo_shortest_half_window_centre():
    r = np.array([0.1, 0.2, 0.25, 0.9])  # windows of 2: spans .1, .05, .65 → [.2, .25], centre .225
    scale = math.sqrt(((r - 0.225) ** 2).sum() / 3)
    assert np.allclose(co.gapo_coefficients(r, eps=0.0), (r - 0.225) / scale)
    odd = np.array([0.0, 0.4, 0.5, 0.55, 1.0])  # width 3: [.4, .5, .55] spans .15 → centre .5
    assert co.gapo_coefficients(odd, eps=0.0)[2] == 0.0


def test_s_grpo_weight_by_hand():
    r = np.array([0.1, 0.2, 0.6])  # mean .3
    p, t = 0.2, (0.3 - 0.2) / 0.6
    w = 0.6 * t * (1 - t) / (math.sqrt(0.3 * 0.7 + 1e-6) * math.sqrt(t * (1 - t) + 1e-6))
    assert np.allclose(co.s_grpo_coefficients(r, flip_rate=p), w * (r - 0.3) / (r.std(ddof=1) + 1e-8))
    clean = co.s_grpo_coefficients(r, flip_rate=0.0)  # p = 0: w ≈ 1, plain group normalisation
    assert np.allclose(clean, (r - 0.3) / r.std(ddof=1), rtol=1e-4)
    low = np.array([0.0, 0.1, 0.2])  # de-noised success rate clipped to 0: no update
    assert np.allclose(co.s_grpo_coefficients(low, flip_rate=0.2), 0.0)


def test_noise_corrected_scores_are_unbiased_per_criterion():
    points = np.array([2.0, 1.0, -1.0])
    fp, fn = np.array([0.1, 0.1, 0.1]), np.array([0.2, 0.2, 0.2])
    v = np.array([[1, 0, 1]])
    expected = (2 * 0.9 / 0.7 + 1 * -0.1 / 0.7 - 1 * 0.9 / 0.7) / 3
    assert np.allclose(co.corrected_scores(v, points, fp, fn), expected)
    rng = np.random.default_rng(0)  # E[corrected] = true score, by simulation
    truth = rng.random((20000, 3)) < 0.5
    observed = np.where(truth, rng.random(truth.shape) >= fn, rng.random(truth.shape) < fp)
    true_score = truth @ points / 3
    gap = co.corrected_scores(observed, points, fp, fn) - true_score
    assert abs(gap.mean()) < 4 * gap.std() / math.sqrt(len(gap))


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("rewards", [[0.4, 0.4, 0.4], [0.3, 0.3]])
def test_constant_groups_give_zeros(rule, rewards):
    extra = {"verdicts": np.ones((len(rewards), 2)), "points": np.array([1.0, 1.0]),
             "false_positive": np.zeros(2), "false_negative": np.zeros(2)} if rule == "noise_corrected" else {}
    assert np.all(co.get_rule(rule)(np.array(rewards), **extra) == 0)


@pytest.mark.parametrize("rule", ["grpo", "dr_grpo", "qae", "s_grpo"])
def test_two_responses_get_opposite_coefficients(rule):
    a = co.get_rule(rule)(np.array([0.2, 0.8]))
    assert a[0] < 0 < a[1]


def test_gapo_with_two_responses_centres_on_one_of_them():
    a = co.gapo_coefficients(np.array([0.2, 0.8]))  # a "half" window is one response: the first one
    assert a[0] == 0 < a[1]


def _groups_with_judge(rewards):
    from setgrpo_bench.envs import load_env_benchmark

    task = load_env_benchmark("MedicationGuide").instance("train", 0)
    J = len(task.rubric)
    verdicts = [np.random.default_rng(b).random((rewards.shape[1], J)) < 0.5 for b in range(len(rewards))]
    rates = [(np.full(J, 0.1), np.full(J, 0.2))] * len(rewards)
    return Groups(None, [task] * len(rewards), [0] * len(rewards), rewards, np.zeros_like(rewards), verdicts, rates), task


def test_rule_agent_feeds_criterion_level_rules_and_drops_left_out_responses():
    rewards = np.array([[0.1, 0.5, 0.9], [0.2, np.nan, 0.7]])
    groups, task = _groups_with_judge(rewards)
    s = RuleAgent("s_grpo").decide(groups, {}, {})
    weights = np.abs(task.points) / np.abs(task.points).sum()
    assert np.allclose(s.coefficients[0], co.s_grpo_coefficients(rewards[0], flip_rate=float(weights @ np.full(len(weights), 0.15))))
    nc = RuleAgent("noise_corrected").decide(groups, {}, {})
    expected = co.grpo_coefficients(co.corrected_scores(groups.verdicts[0], task.points, *groups.rates[0]))
    assert np.allclose(nc.coefficients[0], expected)
    assert not nc.accepted[1, 1] and nc.coefficients[1, 1] == 0  # invalid grade left out
    mc = RuleAgent("mc_grpo").decide(groups, {}, {})
    assert not mc.accepted[0, 1] and mc.accepted[0, [0, 2]].all()  # the median rollout is left out


def test_budget_matched_repeats_and_fractional_schedule(small_policy):
    setgrpo = resolve_config("setgrpo", {"protocol": "board-v1", "reference": "consensus:5"})
    steps = setgrpo.run.steps
    k = budget_matched_repeats(setgrpo)
    assert k == pytest.approx((steps * 16 + 48 * 6 + steps * 4 * 5) / (steps * 16))
    expert = resolve_config("setgrpo", {"protocol": "board-v1"})  # audits cost 10 training-judge calls each
    assert budget_matched_repeats(expert) == pytest.approx((steps * 16 + 48 * 11 + steps * 4 * 10) / (steps * 16))
    assert resolve_config("grpo_kavg").grading.judge_repeats == pytest.approx(budget_matched_repeats(expert))
    config = resolve_config("grpo_kavg", {"policy": small_policy, "judge_repeats": 2.3, "envs": "MedicationGuide"})
    trainer = Trainer(config, load_policy(small_policy), make_envs(config))
    repeats = [trainer.collector._repeats() for _ in range(97)]
    assert set(repeats) == {2, 3} and sum(repeats) == math.floor(97 * 2.3)
    assert all(abs(sum(repeats[:n]) - 2.3 * n) < 1 for n in range(1, 98))  # within one group at all times


@pytest.mark.parametrize("agent", sorted(preset_paths()))
def test_every_agent_preset_trains_one_step(agent, small_policy, tmp_path):
    """Contract: every preset in the catalog resolves, trains and evaluates; oracles are flagged."""
    overrides = dict(policy=small_policy, envs="MedicationGuide,UnitConversion", steps=1, groups_per_step=2,
                     group_size=3, eval_instances=1, max_new_tokens=8)
    if load_preset(agent).get("selector") == "setgrpo":
        overrides.update(warmup_groups=6, window=8)
    config = resolve_config(agent, overrides)
    result = run(config, tmp_path / agent)
    assert result["oracle"] == config.grading.oracle == (agent == "grpo_oracle")
    assert math.isfinite(result["final"]["macro_true_score"])


def test_the_oracle_trains_exactly_as_grpo_under_the_exact_judge(small_policy, tmp_path):
    """The oracle's rewards are the true scores; so are the `clean` judge's: the two runs train the same
    policy step for step (their held-out true scores are equal; only the judge's eval scores differ).
    The oracle's policy is the same under every judge profile, so the board runs it under one."""
    base = dict(policy=small_policy, envs="MedicationGuide,UnitConversion", steps=2, groups_per_step=2,
                group_size=3, eval_instances=2, max_new_tokens=8)
    oracle = run(resolve_config("grpo_oracle", {**base, "noise": "realistic"}), tmp_path / "oracle")
    clean = run(resolve_config("grpo", {**base, "noise": "clean"}), tmp_path / "clean")
    assert [e["true_score"] for e in oracle["final"]["per_env"].values()] == \
        [e["true_score"] for e in clean["final"]["per_env"].values()]
    weights = [(tmp_path / name / "checkpoints" / "step_000002" / "model.safetensors").read_bytes()
               for name in ("oracle", "clean")]
    assert weights[0] == weights[1]
    harsh = run(resolve_config("grpo_oracle", {**base, "noise": "harsh"}), tmp_path / "harsh")
    assert (tmp_path / "harsh" / "checkpoints" / "step_000002" / "model.safetensors").read_bytes() == weights[0]
    assert harsh["final"]["macro_true_score"] == oracle["final"]["macro_true_score"]
    run(resolve_config("grpo", {**base, "noise": "realistic"}), tmp_path / "noisy")
    assert (tmp_path / "noisy" / "checkpoints" / "step_000002" / "model.safetensors").read_bytes() != weights[0]
