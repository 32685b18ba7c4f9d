"""SetGRPO on real and synthetic groups: geometry from the live policy, the calibration window, the
ablations (each changes only its module), and the wall between true scores and updates."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from conftest import SMALL_RUN, Killed, kill_after

from setgrpo_bench.agents import (
    Decision,
    Groups,
    Needs,
    SetGRPOAgent,
    TrainConfig,
    resolve_config,
)
from setgrpo_bench.agents import setgrpo as sm
from setgrpo_bench.agents.fields import parse_geometry
from setgrpo_bench.errors import ConfigError
from setgrpo_bench.graders import RubricGrader
from setgrpo_bench.harness import run
from setgrpo_bench.harness.geometry import GradientGeometry
from setgrpo_bench.harness.objective import LossSpec, grpo_loss
from setgrpo_bench.harness.suite import make_envs
from setgrpo_bench.harness.trainer import Trainer
from setgrpo_bench.harness.update import gradient_outside
from setgrpo_bench.policy import GenerationConfig, TransformersEngine, load_policy
from setgrpo_bench.policy.engine import token_logprobs


@pytest.fixture(scope="module")
def policy(small_policy):
    return load_policy(small_policy)


@pytest.fixture(scope="module")
def group_rollout(policy, medication):
    torch.manual_seed(0)
    engine = TransformersEngine(policy, GenerationConfig(max_new_tokens=16))
    return engine.generate([medication.instance("train", 0).prompt_text] * 6)


@pytest.fixture(scope="module")
def uneven_rollout(group_rollout):
    """The group with responses cut to different lengths, so that per-sequence weights differ."""
    mask = group_rollout.response_mask.clone()
    for i, length in enumerate([16, 3, 9, 12, 5, 16]):
        mask[i, length:] = 0
    return dataclasses.replace(group_rollout, response_mask=mask, logprobs=group_rollout.logprobs * mask)


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
def test_gram_is_the_gram_of_the_real_losss_per_response_gradients(policy, uneven_rollout, loss_type):
    """φ_i is the gradient of the GRPO loss when response i alone has coefficient 1 (at ratio 1), by
    autograd through ``grpo_loss`` itself; K must equal ΦΦᵀ up to the loss's positive normaliser."""
    rollout = uneven_rollout
    geometry = GradientGeometry(policy.model, "full", temperature=1.0, loss_type=loss_type, max_new_tokens=16)
    K = geometry.gram(rollout, range(6))
    phis = []
    for i in range(6):
        policy.model.zero_grad(set_to_none=True)
        logprobs = token_logprobs(policy.model, rollout, 1.0)
        loss, _ = grpo_loss(logprobs, logprobs.detach(), torch.eye(6)[i], rollout.response_mask,
                            torch.ones(6, dtype=torch.bool), LossSpec(loss_type=loss_type, max_new_tokens=16))
        loss.backward()
        phis.append(torch.cat([p.grad.reshape(-1) for p in policy.model.parameters()]).double())
    policy.model.zero_grad(set_to_none=True)
    loop = torch.stack(phis)
    expected = (loop @ loop.T).numpy()
    assert np.abs(K / np.trace(K) - expected / np.trace(expected)).max() <= 1e-5
    assert np.all(np.linalg.eigvalsh(K) >= -1e-9 * np.trace(K))


@pytest.mark.parametrize("spec, ghost", [("full", None), ("full", True), ("last:1", None), ("sketch:256", None)])
def test_the_one_backward_gram_equals_the_torch_func_gram(policy, spec, ghost, medication):
    """K from activations and output gradients of one backward pass over several groups equals K
    from torch.func per-response gradients, group by group."""
    torch.manual_seed(1)
    prompts = [medication.instance("train", i).prompt_text for i in range(3) for _ in range(5)]
    rollout = TransformersEngine(policy, GenerationConfig(max_new_tokens=16)).generate(prompts)
    groups = {0: [0, 1, 2, 3, 4], 1: [5, 6, 8, 9], 2: [10, 11, 12, 13, 14]}
    geometry = GradientGeometry(policy.model, spec, temperature=1.0, loss_type="grpo", max_new_tokens=16, chunk=8,
                                ghost=ghost)
    assert geometry.uses is not None  # the hook path runs for GPT-2
    hooks = geometry.grams(rollout, groups).grams
    geometry.uses = None
    reference = geometry.grams(rollout, groups).grams
    for b in groups:
        assert np.abs(hooks[b] - reference[b]).max() <= 1e-5 * np.abs(reference[b]).max()


def test_ghost_inner_products_equal_explicit_per_response_gradients():
    from setgrpo_bench.harness.geometry import _ghost_gram

    rng = torch.Generator().manual_seed(0)
    a, g = torch.randn(4, 7, 5, generator=rng), torch.randn(4, 7, 3, generator=rng)
    explicit = torch.einsum("rti,rto->rio", a.double(), g.double()).reshape(4, -1)
    assert torch.allclose(_ghost_gram(a, g), explicit @ explicit.T, rtol=1e-10)


def test_parameter_subsets_sketch_and_identity(policy, group_rollout):
    full = GradientGeometry(policy.model, "full", temperature=1.0, loss_type="grpo", max_new_tokens=16)
    last = GradientGeometry(policy.model, "last:1", temperature=1.0, loss_type="grpo", max_new_tokens=16)
    assert set(last.names) < set(full.names) and all(".0." in n or "ln_f" in n for n in last.names)
    sketch = GradientGeometry(policy.model, "sketch:64", temperature=1.0, loss_type="grpo", max_new_tokens=16)
    K1, K2 = sketch.gram(group_rollout, range(6)), sketch.gram(group_rollout, range(6))
    assert K1.shape == (6, 6) and np.array_equal(K1, K2)  # fixed seed: the same projection each time
    identity = GradientGeometry(policy.model, "identity", temperature=1.0, loss_type="grpo", max_new_tokens=16)
    assert np.array_equal(identity.gram(group_rollout, range(6)), np.eye(6))


@pytest.mark.parametrize("spec", ["fulll", "last:0", "sketch:x", "last"])
def test_bad_geometry_specs(spec):
    with pytest.raises(ConfigError, match="geometry"):
        parse_geometry(spec)


def _groups(rewards, spreads=None):
    B, G = rewards.shape
    rollout = type("R", (), {"texts": [""] * (B * G)})()
    spreads = np.full_like(rewards, 0.05) if spreads is None else spreads
    return Groups(rollout, list(range(B)), [0] * B, rewards, spreads)


class _Harness:
    """Plays the trainer's part for synthetic groups: K from a fixed random factor per task, and
    fixed reference rewards per task (truth plus small noise)."""

    def __init__(self, rng, truth, G):
        self.rng, self.G, self.factors = rng, G, {}
        self.table = {b: truth[b] + rng.normal(scale=0.03, size=G) for b in range(len(truth))}
        self.audit_rng = np.random.default_rng(0)

    def grams(self, groups, needs):
        out = {}
        for b, valid in needs.grams.items():
            F = self.factors.setdefault(groups.tasks[b], self.rng.normal(size=(self.G, self.G)))[valid][:, valid]
            out[b] = F @ F.T
        return out

    def step(self, agent, groups, *, warmup=False, update=True):
        needs = agent.needs(groups, self.audit_rng, warmup=warmup)
        grams, audits = self.grams(groups, needs), {b: self.table[groups.tasks[b]] for b in needs.audits}
        decision = None if warmup else agent.decide(groups, grams, audits)
        if update:
            agent.update(groups, grams, audits)
        return decision


def _agent(rng, *, n_calib=60, G=6, **changes):
    """An agent whose window holds ``n_calib`` audited synthetic groups."""
    config = TrainConfig.from_flat({"selector": "setgrpo", "window": 2 * n_calib, "warmup_groups": n_calib,
                                    "audit_fraction": 0.5, **changes})
    agent = SetGRPOAgent(config.setgrpo, std_floor=config.coefficients.std_floor)
    truth = rng.uniform(0, 1, size=(n_calib, G))
    harness = _Harness(rng, truth, G)
    harness.step(agent, _groups(truth + rng.normal(scale=0.05, size=truth.shape)), warmup=True)
    return agent, harness


def test_warm_up_fills_disjoint_alternating_folds_and_audits_join_after_decisions():
    agent, harness = _agent(np.random.default_rng(0))
    assert len(agent.fold(0)) == len(agent.fold(1)) == 30
    before = list(agent.window)
    q = agent.quantile(agent.params.alpha_a)
    tau = agent.threshold(q)
    groups = _groups(np.random.default_rng(1).uniform(size=(8, 6)))
    decision = harness.step(agent, groups, update=False)
    assert decision.stats["q"] == q and decision.stats["tau"] == tau
    assert list(agent.window) == before  # deciding changes nothing
    audited = [r for r in decision.records if r.a_ref is not None]
    assert len(audited) == 4
    harness.step(agent, groups)
    assert len(agent.window) == len(before) + 4  # the audits join the window in ``update``


def test_state_round_trip_resumes_the_same_decisions():
    agent, harness = _agent(np.random.default_rng(0))
    state = agent.state_dict()
    groups = _groups(np.random.default_rng(2).uniform(size=(8, 6)))
    harness.audit_rng = np.random.default_rng(5)
    first = harness.step(agent, groups)
    clone = SetGRPOAgent(agent.params, std_floor=agent.std_floor)
    clone.load_state_dict(state)
    harness.audit_rng = np.random.default_rng(5)
    again = harness.step(clone, groups)
    assert np.array_equal(first.coefficients, again.coefficients)
    assert np.array_equal(first.accepted, again.accepted)
    assert [g.a_hat.tolist() for _, g in agent.window] == [g.a_hat.tolist() for _, g in clone.window]


def test_constant_groups_are_excluded_everywhere():
    agent, harness = _agent(np.random.default_rng(0))
    rewards = np.random.default_rng(3).uniform(size=(4, 6))
    rewards[1] = 0.5
    needs = agent.needs(_groups(rewards), np.random.default_rng(0), warmup=True)
    assert 1 not in needs.grams and 1 not in needs.audits
    decision = harness.step(agent, _groups(rewards))
    assert 1 not in [r.index for r in decision.records]
    assert not decision.accepted[1].any() and not decision.coefficients[1].any()


def test_each_ablation_changes_only_its_module():
    rng_rewards = np.random.default_rng(4).uniform(size=(16, 6))
    groups = _groups(rng_rewards)
    base, harness = _agent(np.random.default_rng(0))
    base_decision = harness.step(base, groups, update=False)

    no_gate, harness = _agent(np.random.default_rng(0), gate=False)
    d = harness.step(no_gate, groups, update=False)
    assert all(r.accepted == r.certifiable for r in d.records)  # every certifiable group, no gate
    assert [r.score for r in d.records] == [r.score for r in base_decision.records]  # same (a), (b)

    no_recovery, harness = _agent(np.random.default_rng(0), recovery=False)
    d = harness.step(no_recovery, groups, update=False)
    assert all(np.array_equal(r.executed, r.a_hat) for r in d.records)
    assert all(r.score == pytest.approx(sm.certified_radius_ratio(r.gram, r.a_hat, r.rho)) for r in d.records)
    assert d.stats["q"] == base_decision.stats["q"]  # same (a)

    no_calib, harness = _agent(np.random.default_rng(0), calibrate=False, fixed_q=0.7)
    d = harness.step(no_calib, groups, update=False)
    assert d.stats["q"] == 0.7
    assert all(np.allclose(r.rho, 0.7 * r.sigma) for r in d.records)


def test_too_few_calibration_groups_accept_nothing():
    agent, harness = _agent(np.random.default_rng(0), n_calib=8, alpha_a=0.1)  # D1 of 4: k = ⌈5·0.9⌉ = 5 > 4 → q = ∞
    decision = harness.step(agent, _groups(np.random.default_rng(5).uniform(size=(4, 6))))
    assert decision.stats["q"] == math.inf and not decision.accepted.any()


SETGRPO_RUN = {**SMALL_RUN, "steps": 2, "groups_per_step": 4, "group_size": 4}
SMALL_WINDOW = dict(warmup_groups=8, window=16, audit_fraction=0.5)


def test_setgrpo_run_writes_its_diagnostics_and_resumes_identically(small_policy, tmp_path):
    config = resolve_config("setgrpo", {**SETGRPO_RUN, **SMALL_WINDOW, "policy": small_policy})
    full = run(config, tmp_path / "a")
    metrics = [__import__("json").loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    for key in ("q", "tau", "uncertifiable", "coverage_ref", "coverage_true", "reversal_true", "audit_calls"):
        assert key in metrics[0], key
    assert metrics[0]["audit_calls"] > 0 and metrics[0]["grader_calls"] > metrics[0]["audit_calls"]
    assert (tmp_path / "a" / "setgrpo.png").is_file()
    assert full["audit_calls"] == sum(m["audit_calls"] for m in metrics)
    d = full["diagnostics"]
    assert set(d) >= {"q", "tau", "uncertifiable", "coverage_ref", "reversal_true", "update_energy_ratio"}
    for key in ("n_audited", "n_covered_ref", "n_audited_accepted", "n_reversed_ref", "n_nonconstant", "n_accepted",
                "n_covered_true", "n_reversed_true"):  # pooled counts are the sums of the per-step counts
        assert d[key] == sum(m[key] for m in metrics), key
    assert d["coverage_ref"] == d["n_covered_ref"] / d["n_audited"]
    assert d["coverage_ref_low"] <= d["coverage_ref"] <= d["coverage_ref_high"]

    with pytest.raises(Killed):
        run(config, tmp_path / "b", on_step=kill_after(1))
    resumed = run(config, tmp_path / "b", resume=True)
    assert resumed["final"] == full["final"]


@pytest.mark.parametrize("agent, oracle", [("grpo", False), ("setgrpo", False), ("grpo", True)])
def test_true_scores_reach_the_update_only_for_the_oracle(small_policy, monkeypatch, agent, oracle):
    """Two trainers with the same seed; in one, every grade's true score is replaced by noise.
    Non-oracle agents must produce bit-identical parameters; the oracle must not. One torch thread: with
    more, a busy machine's BLAS may split its sums differently between the two trainings."""
    overrides = {**SETGRPO_RUN, **(SMALL_WINDOW if agent == "setgrpo" else {}), "policy": small_policy,
                 "oracle": oracle, "noise": "realistic"}
    config = resolve_config(agent, overrides)

    def trained():
        torch.manual_seed(0)
        trainer = Trainer(config, load_policy(small_policy), make_envs(config))
        trainer.warm_up()
        trainer.step()
        return torch.cat([p.detach().reshape(-1) for p in trainer.policy.model.parameters()])

    real, noise = RubricGrader.grade_group, np.random.default_rng(99)

    def scrambled(self, task, responses, rng):
        return [dataclasses.replace(g, true_score=float(noise.random())) for g in real(self, task, responses, rng)]

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        honest = trained()
        monkeypatch.setattr(RubricGrader, "grade_group", scrambled)
        assert torch.equal(trained(), honest) != oracle
    finally:
        torch.set_num_threads(threads)


def _synthetic_samples(rng, n, G=6, noise=0.3):
    from setgrpo_bench.agents.coefficients import grpo_coefficients
    from setgrpo_bench.harness.diagnose import GroupSample

    out = []
    for _ in range(n):
        truth = rng.uniform(size=G)
        observed, reference = truth + rng.normal(scale=noise * 0.1, size=G), truth + rng.normal(scale=0.01, size=G)
        F = rng.normal(size=(G, G))
        out.append(GroupSample(grpo_coefficients(observed), grpo_coefficients(reference),
                               sm.response_scales(observed, np.full(G, 0.05)), F @ F.T, a_true=grpo_coefficients(truth)))
    return out


def test_diagnostic_curves_on_exchangeable_groups():
    from setgrpo_bench.harness.diagnose import coverage_curve, risk_curve
    from setgrpo_bench.harness.pooled import clopper_pearson

    samples = _synthetic_samples(np.random.default_rng(0), 240)
    coverage = coverage_curve(samples, [0.1, 0.3], repeats=100, seed=0)
    for row in coverage:  # mean held-out coverage ≈ k/(n1+1) for exchangeable groups
        k = sm.conformal_rank(120, row["alpha_a"])
        assert abs(row["coverage_ref"] - k / 121) < 0.04
    assert coverage[0]["coverage_ref"] > coverage[1]["coverage_ref"]
    risk = risk_curve(samples, [0.1, 0.2], alpha_a=0.3, delta=0.1, repeats=60, seed=0)
    for row in risk:
        assert row["acceptance"] > 0 and row["violation_rate"] <= 0.25
        assert row["risk_ref"] <= row["alpha"] + 0.05
    low, high = clopper_pearson(5, 20)
    assert low < 0.25 < high and clopper_pearson(0, 10)[0] == 0.0 and clopper_pearson(10, 10)[1] == 1.0


def test_the_gate_comparison_reports_what_each_setting_does_on_the_same_groups():
    """``diagnose --compare``: on the same groups, a larger set level accepts more groups and keeps more of
    the true-score progress; executing â keeps all of it for the groups it accepts; a window larger than
    the sample is refused by name."""
    from setgrpo_bench.harness.diagnose import compare_settings

    samples = _synthetic_samples(np.random.default_rng(1), 200, noise=3.0)  # a judge that errs: wide sets
    base = resolve_config("setgrpo-literal").setgrpo
    variants = {"literal": dataclasses.replace(base, window=64),
                "grid": dataclasses.replace(base, window=64, alpha_a_grid="0.5,0.9", gate_start=0.5),
                "grid, â": dataclasses.replace(base, window=64, alpha_a_grid="0.5,0.9", gate_start=0.5, execute="original")}
    rows = {r["variant"]: r for r in compare_settings(samples, variants, repeats=20, seed=0)}
    assert rows["literal"]["alpha_a"] == 0.5 and 0.5 <= rows["grid"]["alpha_a"] <= 0.9
    assert rows["grid"]["acceptance"] >= rows["literal"]["acceptance"]
    assert rows["grid"]["retained_alignment"] > rows["literal"]["retained_alignment"]
    assert rows["grid, â"]["retained_alignment"] >= rows["grid"]["retained_alignment"]
    assert all(0 <= r["stalled"] <= 1 and r["reversal_ref"] <= 0.2 for r in rows.values())
    with pytest.raises(ConfigError, match="more than the window"):
        compare_settings(samples[:60], {"literal": dataclasses.replace(base, window=64)}, repeats=1, seed=0)


def test_diagnose_cli_writes_json_and_plot(small_policy, tmp_path, capsys):
    from setgrpo_bench.cli import main

    args = ["diagnose", "--policy", small_policy, "--envs", "MedicationGuide,UnitConversion", "--groups", "24",
            "--group-size", "4", "--groups-per-step", "8", "--max-new-tokens", "12", "--repeats", "5",
            "--alphas-a", "0.2,0.5", "--alphas", "0.2", "--out", str(tmp_path / "d")]
    assert main(args) == 0
    result = __import__("json").loads((tmp_path / "d" / "diagnose.json").read_text())
    assert result["groups"] == 24 and [r["alpha_a"] for r in result["coverage"]] == [0.2, 0.5]
    assert (tmp_path / "d" / "diagnose.png").stat().st_size > 10_000
    assert main(["diagnose", "--agent", "grpo", "--policy", small_policy, "--groups", "12",
                 "--out", str(tmp_path / "e")]) == 2
    assert "a SetGRPO preset" in capsys.readouterr().out


def test_the_agent_certifies_its_threshold_on_d2():
    """D1 (fold 0) holds safe groups, D2 (fold 1) groups whose reference reverses every update: the
    gate must accept nothing. With the folds swapped it certifies the threshold."""
    from test_setgrpo_math import _aligned_groups

    rng = np.random.default_rng(0)
    safe, risky = _aligned_groups(rng, 30, reversed_reference=False), _aligned_groups(rng, 30, reversed_reference=True)
    config = TrainConfig.from_flat({"selector": "setgrpo", "window": 60, "calibrate": False, "fixed_q": 1.0})
    agent = SetGRPOAgent(config.setgrpo, std_floor=0.05)
    agent.window.extend([(0, g) for g in safe] + [(1, g) for g in risky])
    assert agent.threshold(1.0) == math.inf
    agent.window.clear()
    agent.window.extend([(0, g) for g in risky] + [(1, g) for g in safe])
    assert agent.threshold(1.0) == 1.0


def test_the_gate_rejects_certifiable_groups_below_the_threshold():
    """Calibrated on precise groups, τ̂ = 1; a step of noisier groups (larger sets) has certifiable
    groups with λ* < 1, which must be left out, and every group at or above τ̂ must be taken."""
    agent, harness = _agent(np.random.default_rng(0))
    rewards = np.random.default_rng(1).uniform(size=(16, 6))
    decision = harness.step(agent, _groups(rewards, np.full_like(rewards, 0.15)), update=False)
    tau = decision.stats["tau"]
    assert math.isfinite(tau)
    below = [r for r in decision.records if r.certifiable and r.score < tau]
    assert below, "the fixture must contain groups the gate rejects"
    for r in decision.records:
        assert r.accepted == (r.certifiable and r.score >= tau)
        assert decision.accepted[r.index].any() == r.accepted
        assert np.array_equal(decision.coefficients[r.index][r.valid], r.executed if r.accepted else np.zeros_like(r.executed))


@pytest.mark.parametrize("loss_type, normalise_over", [("grpo", "accepted"), ("dr_grpo", "accepted"),
                                                      ("dapo", "accepted"), ("grpo", "batch"), ("dapo", "batch")])
def test_an_update_from_the_geometrys_gradients_equals_the_backward_pass(small_policy, loss_type, normalise_over):
    """At μ = 1 the SetGRPO step is formed as Σ_i κ_i φ_i from the per-response gradients the Gram
    matrices were built from; it must move the parameters as the ordinary backward pass of the
    GRPO loss does, for any coefficients and accept mask."""
    config = resolve_config("setgrpo", {**SETGRPO_RUN, **SMALL_WINDOW, "policy": small_policy, "loss_type": loss_type,
                                        "groups_per_step": 6, "normalise_over": normalise_over})
    trainers = []
    for _ in range(2):  # plain SGD: the step is the clipped gradient itself (Adam's first step is its sign)
        trainer = Trainer(config, load_policy(small_policy), make_envs(config))
        trainer.update.optimizer = torch.optim.SGD(trainer.policy.model.parameters(), lr=1.0)
        trainers.append(trainer)
    before = [p.detach().clone() for p in trainers[0].policy.model.parameters()]
    assert trainers[0].update_from_gradients
    batch = trainers[0].collector.collect(6)
    rng = np.random.default_rng(0)
    coefficients = rng.normal(size=batch.groups.rewards.shape)
    accepted = rng.random(batch.groups.rewards.shape[0]) < 0.6
    accepted[0] = True
    decision = Decision(coefficients, np.repeat(accepted[:, None], 4, axis=1))
    needs = Needs({b: np.ones(4, bool) for b in range(6)})
    fused = trainers[0].update(batch.groups.rollout, decision,
                                 trainers[0].geometry_of(batch.groups, needs, keep_gradients=True))
    plain = trainers[1].update(batch.groups.rollout, decision)
    assert fused["loss"] == pytest.approx(plain["loss"], rel=1e-5)
    assert fused["grad_norm"] == pytest.approx(plain["grad_norm"], rel=5e-3)
    steps = [torch.cat([(p.detach() - p0).reshape(-1) for p, p0 in zip(t.policy.model.parameters(), before)])
             for t in trainers]
    assert steps[1].abs().max() > 0
    # Φ is kept in bfloat16 (each entry within 2⁻⁹ of itself): within 5e-3 of the largest coordinate
    assert (steps[0] - steps[1]).abs().max() <= 5e-3 * steps[1].abs().max()


def test_a_consensus_reference_still_trains_and_is_costed_as_judge_calls(small_policy, tmp_path):
    """``consensus:K`` (K more calls of the training judge) still works; its audit calls cost one
    training-judge call each, where the default expert's cost ten."""
    base = {**SETGRPO_RUN, **SMALL_WINDOW, "policy": small_policy, "steps": 1}
    consensus = run(resolve_config("setgrpo", {**base, "reference": "consensus:3"}), tmp_path / "c")
    expert = run(resolve_config("setgrpo", base), tmp_path / "e")
    assert consensus["audit_calls"] > 0 and expert["audit_calls"] > 0
    assert consensus["grader_cost"] == consensus["grader_calls"]
    assert expert["grader_cost"] == pytest.approx(expert["grader_calls"] + 9 * expert["audit_calls"])


def test_a_training_steps_audits_join_the_window_after_its_decision(small_policy):
    """In ``Trainer.step`` the agent decides with the window as it was, and only then learns from the
    step's audits: they are out of sample for the q and τ̂ they are judged by."""
    config = resolve_config("setgrpo", {**SETGRPO_RUN, **SMALL_WINDOW, "policy": small_policy})
    trainer = Trainer(config, load_policy(small_policy), make_envs(config))
    trainer.warm_up()
    trainer.step()
    for _ in range(2):
        before = (len(trainer.agent.fold(0)), len(trainer.agent.fold(1)), trainer.agent.calibration().q)
        metrics = trainer.step()
        assert (metrics["window_d1"], metrics["window_d2"], metrics["q"]) == before
        assert len(trainer.agent.window) == min(before[0] + before[1] + metrics["n_audited"], config.setgrpo.window)
        assert metrics["n_audited"] > 0


@pytest.mark.parametrize("seed", range(4))
def test_an_update_from_gradients_takes_groups_with_invalid_grades_and_refuses_a_missing_row(small_policy, seed):
    """Responses with an invalid grade have no gradient row (they are outside the set) and zero
    coefficients: the fused step must take the other rows of their groups; an accepted response
    without a row is a bug and is refused. (Exactness under rounding: the test below.)"""
    config = resolve_config("setgrpo", {**SETGRPO_RUN, **SMALL_WINDOW, "policy": small_policy, "groups_per_step": 6,
                                        "seed": seed})
    trainer = Trainer(config, load_policy(small_policy), make_envs(config))
    batch = trainer.collector.collect(6)
    rng = np.random.default_rng(seed)
    valid = rng.random(batch.groups.rewards.shape) < 0.75
    valid[:, :2] = True
    coefficients = np.where(valid, rng.normal(size=valid.shape), 0.0)
    needs = Needs({b: valid[b] for b in range(6)})
    geometry = trainer.geometry_of(batch.groups, needs, keep_gradients=True)
    step = trainer.update(batch.groups.rollout, Decision(coefficients, valid), geometry)
    assert step["grad_norm"] > 0
    missing = valid.copy()
    missing[0, 0] = False
    geometry = trainer.geometry_of(batch.groups, Needs({b: missing[b] for b in range(6)}), keep_gradients=True)
    with pytest.raises(RuntimeError, match="no per-response gradient"):
        trainer.update(batch.groups.rollout, Decision(coefficients, valid), geometry)


def test_gradient_outside_is_exact_under_rounding():
    """Rows without a response gradient are exactly zero; a float-sum comparison would flag rounding."""
    g = torch.Generator().manual_seed(0)
    for _ in range(500):
        per_token = torch.randn(24, 72, generator=g) * 1e-3
        keep = torch.rand(24, generator=g) < 0.75
        keep[0] = True
        per_token[~keep] = 0
        rows = keep.nonzero()[:, 0]
        assert not gradient_outside(per_token, rows)
        assert gradient_outside(per_token, rows[1:])


def test_the_agent_remembers_window_decisions_without_changing_its_calibration():
    """The agent's calibration over a grid of set levels equals the one computed from scratch, on the
    first call and on later ones (whose window decisions come from memory), and after groups leave."""
    agent, harness = _agent(np.random.default_rng(4), alpha_a_grid="0.5,0.8,0.9", gate_start=0.5)
    p = agent.params

    def fresh():
        return sm.calibrate_set_and_threshold(agent.fold(0), agent.fold(1), [0.5, 0.8, 0.9], alpha=p.alpha,
                                              delta=p.delta, levels=sm.acceptance_levels(p.grid_start, p.grid_step),
                                              start=0.5, execute=p.execute)

    assert agent.calibration() == fresh() == agent.calibration()
    assert len(agent._decide)
    for seed in range(3):  # new audits push old groups out of the window
        harness.step(agent, _groups(np.random.default_rng(seed).uniform(size=(60, 6))))
        assert agent.calibration() == fresh()
    alive = {id(g.gram) for _, g in agent.window}
    assert all(key[0] in alive for key in agent._decide._seen)
