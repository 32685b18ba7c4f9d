"""Methods from installed packages: the tiny plugin under tests/plugins/ is installed (pip, into a
scratch folder on the path) and goes the whole way — registered, trained, published, shown — and every
registered agent, built-in or plugin, passes the same contract."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import SMALL_RUN

from setgrpo_bench.agents import Groups, resolve_config
from setgrpo_bench.agents.build import build_agent
from setgrpo_bench.agents.plugins import installed_plugins
from setgrpo_bench.agents.presets import preset_paths
from setgrpo_bench.errors import UnknownNameError

PLUGIN = Path(__file__).parent / "plugins" / "median_grpo"
SMALL = {**SMALL_RUN, "steps": 2}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The plugin installed by pip into a folder of its own (its dist-info carries the entry points)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(PLUGIN)],
                   check=True, capture_output=True, text=True)
    return target


@pytest.fixture
def installed(site, monkeypatch):
    """The plugin visible to this process: its folder on sys.path, the plugin registry read again."""
    monkeypatch.syspath_prepend(str(site))
    installed_plugins.cache_clear()
    yield site
    installed_plugins.cache_clear()


def test_a_plugin_registers_its_rule_and_preset(installed):
    [plugin] = [p for p in installed_plugins() if p.name == "median-grpo"]
    assert plugin.version == "0.1.0" and len(plugin.source_hash) == 64
    assert "median_grpo" in preset_paths()
    config = resolve_config("median_grpo")
    assert config.coefficients.rule == "median_grpo"
    rewards = np.array([[0.1, 0.2, 0.9]])
    decision = build_agent(config).decide(Groups(None, [], [], rewards, np.zeros_like(rewards)), {}, {})
    assert decision.coefficients[0, 1] == 0.0  # the median response is the baseline
    with pytest.raises(UnknownNameError, match="median_grpo"):
        resolve_config("median_grp")  # unknown names suggest the closest, plugin presets included


def test_without_the_plugin_its_preset_is_unknown():
    installed_plugins.cache_clear()
    assert "median_grpo" not in preset_paths()
    with pytest.raises(UnknownNameError):
        resolve_config("median_grpo")


def _contract(agent, small_policy):
    """One short step of ``agent``; decide is pure (the same inputs give the same decision, the agent's
    state unchanged) and sees no true score (``Groups`` carries none)."""
    import copy

    from setgrpo_bench.harness.suite import make_envs
    from setgrpo_bench.harness.trainer import Trainer
    from setgrpo_bench.policy import load_policy

    small_window = {"window": 8, "warmup_groups": 2} if resolve_config(agent).coefficients.selector == "setgrpo" else {}
    config = resolve_config(agent, {**SMALL, "policy": small_policy, **small_window})
    trainer = Trainer(config, load_policy(small_policy), make_envs(config))
    trainer.warm_up()
    metrics = trainer.step()
    assert np.isfinite(metrics["loss"]) and metrics["grader_calls"] > 0
    assert not {f for f in Groups.__dataclass_fields__ if "true" in f}
    batch = trainer.collector.collect(config.run.groups_per_step)
    needs = trainer.agent.needs(batch.groups, np.random.default_rng(0))
    geometry = trainer.geometry_of(batch.groups, needs)
    audits = trainer.auditor.audit(batch.groups, needs).grades
    state = copy.deepcopy(trainer.agent.state_dict())
    first, second = (trainer.agent.decide(batch.groups, geometry.grams, audits) for _ in range(2))
    assert np.array_equal(first.coefficients, second.coefficients) and np.array_equal(first.accepted, second.accepted)
    assert repr(trainer.agent.state_dict()) == repr(state)


@pytest.mark.parametrize("agent", sorted(preset_paths()))
def test_every_builtin_agent_meets_the_contract(agent, small_policy):
    _contract(agent, small_policy)


def test_the_plugin_agent_meets_the_contract(installed, small_policy):
    _contract("median_grpo", small_policy)


def test_a_plugin_method_is_trained_published_and_shown_with_its_provenance(site, small_policy, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in SMALL.items()] + ["--policy", small_policy]

    def cli(*args):
        done = subprocess.run([sys.executable, "-m", "setgrpo_bench", *args], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    for seed in (0, 1):
        cli("run", "--agent", "median_grpo", "--seed", str(seed), *flags, "--out", str(tmp_path / "runs" / f"seed{seed}"))
    recorded = json.loads((tmp_path / "runs" / "seed0" / "config.json").read_text())["plugins"]
    assert [p["name"] for p in recorded] == ["median-grpo"] and recorded[0]["version"] == "0.1.0"
    cli("publish", str(tmp_path / "runs"), "--board", str(tmp_path / "board"), "--protocol", "")
    [entry] = [json.loads(p.read_text()) for p in (tmp_path / "board" / "results").glob("*.json")]
    assert entry["agent"] == "median_grpo" and entry["plugins"] == recorded
    assert "median_grpo" in cli("leaderboard", "show", "--board", str(tmp_path / "board"))
