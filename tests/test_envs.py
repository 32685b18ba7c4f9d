import json
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

import setgrpo_bench
from setgrpo_bench.catalog import ENV_VAR
from setgrpo_bench.cli import main
from setgrpo_bench.envs import registered_env_ids
from setgrpo_bench.errors import ConfigError, UnknownNameError

BUILTIN = registered_env_ids()


@pytest.mark.parametrize("env_id", BUILTIN)
def test_check_env_passes(env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped)


@pytest.mark.parametrize("env_id", BUILTIN)
def test_same_seed_same_prompt_and_grade_different_seeds_differ(env_id):
    def rollout(seed):
        env = gym.make(env_id)
        prompt, info = env.reset(seed=seed)
        _, reward, terminated, truncated, step_info = env.step("A plain answer that says very little.")
        return prompt, reward, step_info["verdicts"], terminated, truncated

    a, b = rollout(7), rollout(7)
    assert a[:2] == b[:2] or (a[0] == b[0] and np.isnan(a[1]) and np.isnan(b[1]))
    assert a[2] == b[2] and a[3] is True and a[4] is False
    prompts = {rollout(seed)[0] for seed in range(8)}
    assert len(prompts) > 1


def test_make_overrides_and_spec_metadata():
    spec = gym.spec("setgrpo/MedicationGuide-v0")
    assert spec.kwargs["domain"] == "health" and spec.kwargs["split_sizes"]["eval"] >= 200
    env = gym.make("setgrpo/MedicationGuide-v0", split="eval", noise="clean").unwrapped
    assert env.split == "eval" and env.grader.name == "clean"
    env = gym.make("setgrpo/MedicationGuide-v0", grader="harsh").unwrapped
    assert env.grader.name == "harsh"
    with pytest.raises(UnknownNameError, match="Did you mean 'harsh'"):
        gym.make("setgrpo/MedicationGuide-v0", noise="hars")
    with pytest.raises(ConfigError, match="split='test' is not allowed"):
        gym.make("setgrpo/MedicationGuide-v0", split="test")


def test_reset_options_pick_the_task():
    env = gym.make("setgrpo/UnitConversion-v0", noise="clean").unwrapped
    _, info = env.reset(seed=0, options={"index": 5, "split": "eval"})
    assert info["task_id"] == "UnitConversion/eval/5"
    prompt, info2 = env.reset(options={"task_id": "UnitConversion/calib/3"})
    assert info2["split"] == "calib" and info2["index"] == 3
    with pytest.raises(ConfigError, match="task_id"):
        env.reset(options={"task_id": "Other/eval/1"})
    with pytest.raises(ConfigError, match="index=9999 is not allowed"):
        env.reset(options={"index": 9999})
    with pytest.raises(ConfigError, match="options"):
        env.reset(options={"idx": 1})


def test_step_needs_reset_and_accepts_unicode():
    env = gym.make("setgrpo/EventInvitation-v0", noise="clean").unwrapped
    with pytest.raises(ResetNeeded):
        env.step("hi")
    env.reset(seed=1)
    assert env.action_space.contains("Grüße, 東京 — ok?")
    _, reward, *_ = env.step("Grüße, 東京 — ok?")
    assert 0.0 <= reward <= 1.0


def test_group_helper_equals_reset_step_loop(medication):
    responses = medication.examples(medication.instance("train", 2), np.random.default_rng(0), 8)
    env = gym.make("setgrpo/MedicationGuide-v0", noise="realistic").unwrapped
    _, info = env.reset(seed=3, options={"index": 2})
    batched = env.grade_group(responses, task=info["task_id"])
    env.reset(seed=3, options={"index": 2})
    looped = []
    for r in responses:
        env.reset(options={"index": 2})
        looped.append(env.step(r)[4])
    for g, info in zip(batched, looped):
        assert g.valid == info["valid"] and g.judge_calls == info["judge_calls"]
        assert np.array_equal(g.score, info["score"], equal_nan=True)


SPEC = textwrap.dedent(
    """
    name: {name}
    domain: cooking
    sizes: {{train: 20, calib: 10, eval: 10}}
    pools:
      dishes: [soup, pasta, salad, curry, stew, risotto]
    variables:
      dish: {{pool: dishes}}
      minutes: {{range: [5, 60]}}
    prompt: Describe how to make {{dish}} in {{minutes}} minutes.
    criteria:
      - id: dish
        text: Names the {{dish}}.
        points: 2
        category: essential
        check: {{type: keyword_any, terms: ["{{dish}}"]}}
      - id: burns
        text: Burns the food.
        points: -1
        category: pitfall
        check: {{type: keyword_any, terms: [burn]}}
    """
)


def test_register_env_from_python():
    import yaml

    from setgrpo_bench.tasks.procedural import ProceduralBenchmark

    bench = ProceduralBenchmark(yaml.safe_load(SPEC.format(name="PyKitchen")))
    env_id = setgrpo_bench.register_env(bench, grader="clean")
    assert env_id == "setgrpo/PyKitchen-v0"
    env = gym.make(env_id)
    prompt, _ = env.reset(seed=0)
    dish = prompt.split("make ")[1].split(" in")[0]
    _, reward, *_ = env.step(f"Cook the {dish} gently.")
    assert reward == 1.0
    check_env(env.unwrapped)


def test_register_env_from_catalog_folder_via_env_var_and_flag(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "mycatalog" / "envs" / "Kitchen"
    folder.mkdir(parents=True)
    (folder / "benchmark.yaml").write_text(SPEC.format(name="YamlKitchen"))
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "mycatalog"))
    from setgrpo_bench.envs import register_catalog

    assert "setgrpo/YamlKitchen-v0" in register_catalog()
    gym.make("setgrpo/YamlKitchen-v0").reset(seed=0)
    monkeypatch.delenv(ENV_VAR)
    folder2 = tmp_path / "flagcatalog" / "envs" / "Kitchen"
    folder2.mkdir(parents=True)
    (folder2 / "benchmark.yaml").write_text(SPEC.format(name="FlagKitchen"))
    assert main(["--catalog", str(tmp_path / "flagcatalog"), "envs", "list"]) == 0
    assert "FlagKitchen" in capsys.readouterr().out


def test_register_env_from_installed_entry_point(tmp_path, monkeypatch):
    """A package that declares a ``setgrpo_bench.catalog`` entry point contributes its benchmarks."""
    package = tmp_path / "kitchen_plugin"
    (package / "catalog" / "envs" / "Kitchen").mkdir(parents=True)
    (package / "catalog" / "envs" / "Kitchen" / "benchmark.yaml").write_text(SPEC.format(name="PluginKitchen"))
    (package / "__init__.py").write_text("from pathlib import Path\nCATALOG = Path(__file__).parent / 'catalog'\n")
    dist = tmp_path / "kitchen_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kitchen-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[setgrpo_bench.catalog]\nkitchen = kitchen_plugin:CATALOG\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from setgrpo_bench.envs import register_catalog

    assert "setgrpo/PluginKitchen-v0" in register_catalog()


def test_envs_cli_list_show_validate(capsys, tmp_path):
    assert main(["envs", "list"]) == 0
    assert "setgrpo/MedicationGuide-v0" in capsys.readouterr().out
    assert main(["envs", "show", "setgrpo/MedicationGuide-v0", "--json", "--index", "1"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["id"] == "MedicationGuide/eval/1" and shown["rubric"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC.format(name="Bad").replace("category: essential", "category: crucial").replace(
        "[5, 60]", "[60, 5]"))
    assert main(["envs", "validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "variables.minutes.range" in out and "criteria[0].category" in out  # all problems, not the first
    assert main(["envs", "show", "MedicationGuid"]) == 2
    assert "Did you mean 'MedicationGuide'" in capsys.readouterr().out


def test_the_docs_gymnasium_example_runs():
    """The environments page's first Python example (reset → step → grade_group) runs as written."""
    page = (Path(__file__).parents[1] / "docs" / "environments.md").read_text(encoding="utf-8")
    code = page[page.index("```python\n") + len("```python\n"):]
    code = code[: code.index("```")]
    namespace: dict = {}
    exec(compile(code, "docs/environments.md", "exec"), namespace)
    assert namespace["terminated"] and len(namespace["grades"]) == 2


def test_reregistering_an_id_with_another_grader_warns(medication):
    setgrpo_bench.register_env(medication, version=7)
    with pytest.warns(UserWarning, match="already registered .* replacing it with grader 'clean'"):
        setgrpo_bench.register_env(medication, grader="clean", version=7)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        setgrpo_bench.register_env(medication, grader="clean", version=7)  # the same again: silent
