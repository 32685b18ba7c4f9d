"""The controls that say why a method wins (DESIGN §7, §9): stopping rules, rewards from the reference at
another agent's price, the dev/test partition of the eval split and the held-out curve."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import SMALL_RUN, Killed, groups_of, kill_after

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.agents.base import Decision, RuleAgent
from setgrpo_bench.agents.budget import budget_matched_reference_groups
from setgrpo_bench.agents.config import StopSettings, TrainConfig
from setgrpo_bench.agents.stopping import StoppingAgent, audit_gap, gap_stops
from setgrpo_bench.errors import ConfigError, SpecError
from setgrpo_bench.harness import run
from setgrpo_bench.tasks.benchmark import eval_indices


# ---------------------------------------------------------------- the rules, by hand
def test_the_gap_rule_fires_when_the_running_mean_rises_past_its_minimum_by_the_margin():
    # window 3: running means 0, 0.0167, 0.0833 (within 0.1 of the minimum 0), then 0.1833 (past it)
    gaps = [0.0, 0.0, 0.0, 0.05, 0.2, 0.3]
    assert [gap_stops(gaps[:k], 3, 0.1) for k in range(1, 7)] == [False] * 5 + [True]
    assert not gap_stops([0.3, 0.3], 3, 0.1)  # fewer gaps than the window: never
    assert not gap_stops([0.0, math.nan, 0.0, 0.1, 0.1], 3, 0.1)  # NaN skipped: means 0.0333, 0.0667
    assert gap_stops([0.2, 0.1, 0.0, 0.0, 0.0, 0.3, 0.3, 0.3], 3, 0.1)  # the minimum is running, not the first mean
    assert not gap_stops([0.0, 0.0, 0.0, 0.1, 0.1, 0.1], 3, 0.1)  # reaching the margin exactly does not stop


def test_the_audit_gap_is_judge_minus_reference_over_responses_both_graded():
    rewards = np.array([[0.8, 0.6, np.nan], [0.5, 0.5, 0.5], [0.9, 0.9, 0.9]])
    audits = {0: np.array([0.5, 0.4, 0.1]), 2: np.array([0.6, np.nan, 0.6])}
    # judge (0.8 + 0.6 + 0.9 + 0.9) / 4 = 0.8; reference (0.5 + 0.4 + 0.6 + 0.6) / 4 = 0.525
    assert audit_gap(rewards, audits) == pytest.approx(0.275)
    assert math.isnan(audit_gap(rewards, {})) and math.isnan(audit_gap(rewards, {1: np.full(3, np.nan)}))


def test_the_idle_rule_counts_consecutive_steps_that_train_nothing():
    agent = StoppingAgent(RuleAgent("grpo", std_floor=0.05), StopSettings(stop="idle", stop_idle=2))
    constant, varied = groups_of(np.full((2, 3), 0.5)), groups_of(np.array([[0.1, 0.5, 0.9], [0.5, 0.5, 0.5]]))
    for groups, stopped in [(constant, False), (varied, False), (constant, False), (constant, True)]:
        decision = agent.decide(groups, {}, {})
        assert bool(decision.stats["stopped"]) == stopped
        agent.after_step(decision)
        assert agent.stopped == stopped
    restored = StoppingAgent(RuleAgent("grpo", std_floor=0.05), StopSettings(stop="idle", stop_idle=2))
    restored.load_state_dict(json.loads(json.dumps(agent.state_dict())))
    assert restored.stopped and restored.idle == agent.idle


def test_the_step_a_rule_fires_trains_on_nothing():
    agent = StoppingAgent(RuleAgent("grpo", std_floor=0.05), StopSettings(stop="audit_gap", stop_window=1, stop_margin=0.1))
    groups = groups_of(np.array([[0.1, 0.5, 0.9]]))
    agent.after_step(agent.decide(groups, {}, {0: np.array([0.1, 0.5, 0.9])}))  # gap 0: the minimum
    decision = agent.decide(groups, {}, {0: np.array([0.0, 0.3, 0.6])})  # gap 0.2 > 0 + 0.1
    assert decision.stats["stopped"] == 1.0 and not decision.accepted.any() and not decision.coefficients.any()
    assert not agent.stopped  # decide is pure; the step's end records it
    agent.after_step(decision)
    assert agent.stopped


# ---------------------------------------------------------------- in a run
def test_a_stopped_run_ends_at_its_stop_and_spends_nothing_after(small_policy, tmp_path):
    overrides = {**SMALL_RUN, "steps": 6, "policy": small_policy, "stop_window": 1, "stop_margin": 1e-9, "eval_every": 1}
    config = resolve_config("grpo_stop", overrides)
    result = run(config, tmp_path / "stop")
    stop = result["stopped_at_step"]
    assert stop is not None and stop < 6
    records = [json.loads(line) for line in (tmp_path / "stop" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, stop + 1))
    assert records[-1]["stopped"] and records[-1]["stepped"] == 0 and not any(r["stopped"] for r in records[:-1])
    assert all(0 < r["audit_calls"] for r in records)  # every step audits, until the stop
    assert result["grader_cost"] == pytest.approx(sum(r["grader_cost"] for r in records))
    assert [p["step"] for p in result["curve"]] == list(range(0, stop + 1))
    # the stop step trained nothing: its policy is the previous step's, sampled the same way
    assert result["curve"][-1]["true_score"] == result["curve"][-2]["true_score"]
    # killed right after the stop step is on disk, the resumed run trains no further and ends the same
    with pytest.raises(Killed):
        run(config, tmp_path / "killed", on_step=kill_after(stop))
    assert run(config, tmp_path / "killed", resume=True) == result


def test_rewards_from_the_reference_buy_setgrpos_judge_cost(small_policy, tmp_path):
    setgrpo = resolve_config("setgrpo", {"protocol": "board-v2"})
    assert budget_matched_reference_groups(setgrpo) == 6  # (16 + 48·11/120 + 4·10) / 10 = 6.04
    assert resolve_config("grpo_reference").grading.reference_groups == 6
    assert budget_matched_reference_groups(setgrpo.replace(audit_fraction=0.5)) == 10  # (16 + 4.4 + 80) / 10
    result = run(resolve_config("grpo_reference", {**SMALL_RUN, "steps": 2, "policy": small_policy, "reference_groups": 1}),
                 tmp_path / "ref")
    records = [json.loads(line) for line in (tmp_path / "ref" / "metrics.jsonl").read_text().splitlines()]
    for r in records:  # one group of 3 responses a step, each call of `expert` counted 10 times
        assert r["grader_cost"] == pytest.approx(10 * r["grader_calls"]) and r["audit_calls"] == 0
    assert result["grader_cost"] == pytest.approx(10 * result["grader_calls"])


def test_reference_rewards_need_an_agent_that_trains_on_rewards():
    with pytest.raises(ConfigError, match="rewards_from"):
        resolve_config("setgrpo", {"rewards_from": "reference"})
    with pytest.raises(ConfigError, match="reference_groups.*rewards_from 'reference'"):
        resolve_config("grpo", {"reference_groups": 3})
    with pytest.raises(ConfigError, match="stop_margin.*stop 'audit_gap'"):
        resolve_config("grpo", {"stop_margin": 0.2})


# ---------------------------------------------------------------- splits and curves
class _Sized:
    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n

    def size(self, split: str) -> int:
        return self.n


def test_the_eval_split_is_dev_then_test():
    bench = _Sized("Big", 240)
    assert eval_indices(bench, "dev") == range(0, 64) and eval_indices(bench, "dev", 16) == range(0, 16)
    assert eval_indices(bench, "test") == range(64, 240) and eval_indices(bench, "test", 10) == range(64, 74)
    assert eval_indices(_Sized("Small", 40), "dev") == range(0, 40)
    with pytest.raises(ConfigError, match=r"Small has 150: 86 after its 64 dev ones"):
        eval_indices(_Sized("Small", 150), "test")


def test_knobs_are_never_chosen_on_the_test_split(tmp_path, monkeypatch):
    from setgrpo_bench.harness.diagnose import diagnose

    with pytest.raises(ConfigError, match="dev split only"):
        diagnose(resolve_config("setgrpo", {"eval_split": "test"}), n_groups=12, alphas_a=[0.1], alphas=[0.1], repeats=1,
                 out=tmp_path)
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "peek.yaml").write_text("extends: grpo\nlr: 1.0e-4\neval_split: test\n")
    monkeypatch.setenv("SETGRPO_BENCH_CATALOG", str(tmp_path))
    with pytest.raises(SpecError, match=r"peek.yaml:3: eval_split: a preset is chosen on the dev split"):
        resolve_config("peek")


def test_the_held_out_curve_leaves_training_as_it_was(small_policy, tmp_path):
    base = {**SMALL_RUN, "steps": 3, "policy": small_policy}
    with_curve = run(resolve_config("grpo", {**base, "eval_every": 2}), tmp_path / "curve")
    without = run(resolve_config("grpo", {**base, "eval_every": 0}), tmp_path / "none")
    assert [p["step"] for p in with_curve.pop("curve")] == [0, 2, 3]
    with_curve["initial"].pop("curve")
    assert set(with_curve.pop("hacking")) == {"onset_step", "gap_start", "gap_end"}  # read from the curve
    assert with_curve == without and "curve" not in without and "hacking" not in without


def test_a_run_recorded_before_the_curve_existed_is_read_without_one():
    recorded = resolve_config("grpo").to_dict()
    del recorded["eval_every"]
    assert TrainConfig.from_record(recorded).run.eval_every == 0
    assert TrainConfig.from_flat(recorded).run.eval_every == 20


def test_decisions_of_a_stopping_agent_keep_the_inner_records():
    agent = StoppingAgent(RuleAgent("grpo", std_floor=0.05), StopSettings(stop="idle", stop_idle=5))
    decision = agent.decide(groups_of(np.array([[0.1, 0.5, 0.9]])), {}, {})
    assert isinstance(decision, Decision) and decision.accepted.all() and decision.stats["stopped"] == 0.0


def test_the_held_out_grid_carries_a_stopped_runs_last_point_and_measures_the_drop():
    from setgrpo_bench.harness.overoptimisation import held_out_grid, held_out_overoptimisation

    full = [{"step": s, "true_score": v} for s, v in [(0, 0.3), (2, 0.5), (4, 0.4), (5, 0.35)]]
    stopped = [{"step": 0, "true_score": 0.3}, {"step": 3, "true_score": 0.45}]  # stopped at step 3
    grid, true = held_out_grid([full, stopped], steps=5, every=2)
    assert grid == [0, 2, 4, 5]
    assert true.tolist() == [[0.3, 0.5, 0.4, 0.35], [0.3, 0.3, 0.45, 0.45]]
    stats = held_out_overoptimisation(grid, true)
    # mean curve 0.3, 0.4, 0.425, 0.4: peak at step 4; drops 0.4 − 0.35 = 0.05 and 0
    assert stats["peak_step"] == 4 and stats["true_peak"] == pytest.approx(0.425) and stats["true_end"] == pytest.approx(0.4)
    assert stats["drop"] == pytest.approx(0.025) and stats["drop_se"] == pytest.approx(0.025)


def test_the_page_shows_each_entrys_mean_held_out_curve_by_step():
    from setgrpo_bench.leaderboard.tables import held_out_frame

    curve = {"step": [0, 20, 25], "true_score": [0.3391, 0.45, 0.4449], "true_score_se": [0.0, 0.01, 0.02]}
    frame = held_out_frame([{"name": "old", "suite": {"noise": "clean"}},
                            {"name": "new", "suite": {"noise": "learned"}, "held_out": curve}])
    assert frame.to_dict("records") == [{"entry": "new", "judge": "learned", "step 0": "0.339", "step 20": "0.450",
                                         "step 25": "0.445"}]
    assert held_out_frame([{"name": "old", "suite": {"noise": "clean"}}]).empty


class _Spy(RuleAgent):
    """A GRPO agent that records what the stopping rule hands it."""

    warmup_groups = 7
    grams_cover_accepted = True

    def __init__(self) -> None:
        super().__init__("grpo", std_floor=0.05)
        self.calls: list[tuple[str, object]] = []
        self.state = {"inner": 1}

    def needs(self, groups, rng, *, warmup=False):
        self.calls.append(("needs", groups, warmup))
        self.rng = rng
        return super().needs(groups, rng, warmup=warmup)

    def decide(self, groups, grams, audits):
        self.calls.append(("decide", groups, grams, audits))
        decision = super().decide(groups, grams, audits)
        decision.records.append("record")
        return decision

    def update(self, groups, grams, audits):
        self.calls.append(("update", groups, grams, audits))

    def after_step(self, decision):
        self.calls.append(("after_step", decision))

    def state_dict(self):
        return dict(self.state)

    def load_state_dict(self, state):
        self.state = state


def test_a_stopping_rule_hands_the_inner_agent_everything_it_is_given():
    spy = _Spy()
    agent = StoppingAgent(spy, StopSettings(stop="audit_gap", stop_audits=1, stop_window=1, stop_margin=0.1))
    assert agent.warmup_groups == 7 and agent.grams_cover_accepted
    groups, grams = groups_of(np.array([[0.1, 0.5, 0.9], [0.2, 0.4, 0.6]])), {0: np.eye(3)}
    rng = np.random.default_rng(0)
    needs = agent.needs(groups, rng)
    assert spy.calls[-1] == ("needs", groups, False) and spy.rng is rng and len(needs.audits) == 1
    assert agent.needs(groups, np.random.default_rng(0), warmup=True).audits == ()  # the warm-up audits nothing more
    assert spy.calls[-1] == ("needs", groups, True)
    audits = {0: np.array([0.1, 0.5, 0.9])}
    decision = agent.decide(groups, grams, audits)
    assert spy.calls[-1] == ("decide", groups, grams, audits) and decision.records == ["record"]
    agent.update(groups, grams, audits)
    assert spy.calls[-1] == ("update", groups, grams, audits)
    agent.after_step(decision)
    assert spy.calls[-1] == ("after_step", decision)
    fired = agent.decide(groups, grams, {0: np.array([0.0, 0.2, 0.4])})  # gap 0.3 > 0 + 0.1
    assert fired.stats["stopped"] == 1.0 and fired.records == ["record"]
    restored = StoppingAgent(_Spy(), StopSettings(stop="audit_gap"))
    restored.load_state_dict({**agent.state_dict(), "inner": {"inner": 2}})
    assert restored.inner.state == {"inner": 2} and restored.gaps == agent.gaps


def test_the_idle_rule_computes_no_gap():
    agent = StoppingAgent(RuleAgent("grpo", std_floor=0.05), StopSettings(stop="idle"))
    decision = agent.decide(groups_of(np.array([[0.1, 0.5, 0.9]])), {}, {0: np.array([0.0, 0.0, 0.0])})
    assert math.isnan(decision.stats["stop_gap"])
