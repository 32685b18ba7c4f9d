"""The learned judge: built bit for bit, shipped for the current suite, its shared-prefix grading equal
to asking each question alone, its verdicts sampled from its own P(yes), usable as a judge profile."""

import numpy as np
import pytest
import torch
from conftest import binomial_ok

from setgrpo_bench.judges.learned import (
    LearnedJudgeGrader,
    build_judge,
    encode_question,
    left_padded,
)
from setgrpo_bench.judges.learned_paths import (
    KEY_FILE,
    SHIPPED,
    JudgeBuildConfig,
    build_key,
)

SMALL_JUDGE = JudgeBuildConfig(n_embd=16, n_layer=1, n_head=2, label_budget=600, held_out=200, epochs=1)


@pytest.fixture(scope="module")
def small_judge(tmp_path_factory):
    return build_judge(SMALL_JUDGE, out=tmp_path_factory.mktemp("judge") / "small")


@pytest.fixture(scope="module")
def grader(small_judge):
    return LearnedJudgeGrader(small_judge)


def test_the_shipped_judge_is_built_for_the_current_suite_and_policy():
    """A change to a benchmark, the embedded policy or the build recipe makes it stale: rebuild it with
    ``python -m setgrpo_bench build-judge``."""
    assert (SHIPPED / KEY_FILE).read_text().strip() == build_key()
    assert sum(p.stat().st_size for p in SHIPPED.iterdir()) < 10 * 2**20


def test_a_rebuild_is_bit_identical(small_judge, tmp_path):
    again = build_judge(SMALL_JUDGE, out=tmp_path / "again")
    assert (again / "model.safetensors").read_bytes() == (small_judge / "model.safetensors").read_bytes()
    assert (again / "judge_card.json").read_text() == (small_judge / "judge_card.json").read_text()


def test_shared_prefix_probabilities_equal_asking_each_question_alone(grader, medication):
    task = medication.instance("train", 3)
    responses = ["Take 10 mg twice a day with food.", "", "Dear Ana, call your doctor if you feel dizzy. " * 4]
    shared = grader.yes_probabilities(responses, [c.text for c in task.rubric])
    tok = grader.tokenizer
    rows = [encode_question(tok, r, c.text, grader.limit) for r in responses for c in task.rubric]
    ids, mask = left_padded(rows, tok.pad_token_id)
    with torch.no_grad():
        logits = grader.model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(1) - 1).clamp(min=0)).logits[:, -1]
    alone = torch.softmax(logits[:, list(grader.answers)], dim=-1)[:, 0].reshape(shared.shape).numpy()
    assert np.abs(shared - alone).max() < 1e-5


def test_a_call_larger_than_one_block_is_graded_block_by_block_with_the_same_probabilities(grader, medication, monkeypatch):
    """Memory stays bounded however many pairs a call holds (``PAIRS_PER_BLOCK``); a call within one block
    is a single forward, so a training group's probabilities do not depend on the split."""
    from setgrpo_bench.judges.learned import PAIRS_PER_BLOCK

    task = medication.instance("train", 2)
    criteria = [c.text for c in task.rubric]
    group = ["Take 10 mg twice a day.", "", "Call your doctor today, Ana. " * 3, "No."]
    one = grader.yes_probabilities(group, criteria)
    blocks, block = [], grader._yes_block
    monkeypatch.setattr(grader, "_yes_block", lambda responses, c, prompt="": blocks.append(len(responses) * len(c))
                        or block(responses, c, prompt))
    many = grader.yes_probabilities(group * (PAIRS_PER_BLOCK // len(criteria)), criteria)
    assert len(blocks) > 1 and max(blocks) <= PAIRS_PER_BLOCK and sum(blocks) == many.size
    np.testing.assert_allclose(many, np.tile(one, (PAIRS_PER_BLOCK // len(criteria), 1)), atol=1e-6)
    np.testing.assert_array_equal(grader._yes_block(group, criteria), one)
    assert grader.yes_probabilities([], criteria).shape == (0, len(criteria))


def test_group_grading_equals_one_by_one_from_the_same_stream(grader, medication):
    task = medication.instance("train", 5)
    responses = ["Take it daily.", "Ask your pharmacist about 5 mg.", "No."]
    together = grader.grade_group(task, responses, np.random.default_rng(1))
    rng = np.random.default_rng(1)
    alone = [grader.grade(task, r, rng) for r in responses]
    assert [g.score for g in together] == [g.score for g in alone]
    assert all(g.valid and g.judge_calls == len(task.rubric) for g in together)


def test_verdicts_are_sampled_from_the_judges_own_probability(grader, medication):
    task = medication.instance("train", 7)
    response = "Take 10 mg in the morning and call your doctor if the rash spreads."
    p = grader.yes_probabilities([response], [c.text for c in task.rubric])[0]
    n = 4000
    grades = grader.grade_group(task, [response] * n, np.random.default_rng(2))
    met = np.stack([g.verdicts for g in grades]).sum(axis=0)
    for j in range(len(task.rubric)):  # Bonferroni over the criteria, two-sided level 1e-4
        assert binomial_ok(int(met[j]), n, float(p[j]), alpha=1e-4 / len(task.rubric)), (j, met[j] / n, p[j])
    w = task.points / task.points[task.points > 0].sum()
    assert grades[0].spread == pytest.approx(float(np.sqrt((w**2 * p * (1 - p)).sum())))


def test_the_card_states_the_judges_measured_error_rates(grader, medication):
    card = grader.card
    assert card["labels_train"] == 600 and card["labels_held_out"] == 200 and 0 <= card["ece"] <= 1
    fp, fn = grader.stated_rates(medication.instance("train", 0))
    assert fp.shape == fn.shape == (len(medication.instance("train", 0).rubric),) and np.all((fp >= 0) & (fp <= 1))


def test_the_learned_judge_is_a_profile_every_env_and_run_can_use():
    import gymnasium as gym

    from setgrpo_bench.agents import resolve_config
    from setgrpo_bench.harness.suite import suite_fingerprint

    env = gym.make("setgrpo/UnitConversion-v0", noise="learned").unwrapped
    env.reset(seed=0)
    _, reward, *_ , info = env.step("12 km is 12000 m.")
    assert 0.0 <= reward <= 1.0 and info["valid"] and env.judge_error_rates(env.benchmark.instance("train", 0)) is not None
    learned = suite_fingerprint(resolve_config("grpo", {"noise": "learned"}))
    assert learned != suite_fingerprint(resolve_config("grpo", {"noise": "realistic"}))


def test_a_held_out_split_by_task_shares_no_task_with_the_training_labels():
    from types import SimpleNamespace

    from setgrpo_bench.judges.learned_labels import split_held_out

    pairs = [(SimpleNamespace(id=f"task{p % 7}"), f"response {p}") for p in range(40)]
    examples = [([p, j], bool(j % 2), "essential", p) for p in range(40) for j in range(3)]
    config = JudgeBuildConfig(held_out=30, label_budget=60, split_by_task=True)
    held, train = split_held_out(examples, pairs, config, np.random.default_rng(0))
    held_tasks, train_tasks = ({pairs[e[3]][0].id for e in part} for part in (held, train))
    assert not held_tasks & train_tasks and len(held) >= 30 and len(train) == 60
    assert len(held) - 30 < max(sum(pairs[e[3]][0].id == t for e in examples) for t in held_tasks)  # whole tasks, no more
    plain = split_held_out(examples, pairs, JudgeBuildConfig(held_out=30, label_budget=60), np.random.default_rng(0))
    assert plain == (examples[:30], examples[30:90])


def test_the_first_builds_key_leaves_out_the_fields_added_since_and_a_profile_names_its_build():
    from setgrpo_bench.graders import judge_profile
    from setgrpo_bench.judges.learned_paths import ADDED_FIELDS, profile_build_key, shipped_folder

    assert build_key(JudgeBuildConfig(**ADDED_FIELDS)) == build_key()
    assert build_key(JudgeBuildConfig(reads_prompt=True)) != build_key()
    assert profile_build_key({}) == build_key() == profile_build_key({"build": None})
    assert profile_build_key({"build": {"n_layer": 3}}) == build_key(JudgeBuildConfig(n_layer=3))
    assert shipped_folder("learned", JudgeBuildConfig()) == SHIPPED
    assert shipped_folder("learned-prompt", JudgeBuildConfig(n_layer=3)).name == "learned_judge_prompt"
    assert judge_profile("learned-prompt").fingerprint()["build"] != judge_profile("learned").fingerprint()["build"]


def test_a_profile_with_an_unknown_build_field_names_it(tmp_path, monkeypatch):
    from setgrpo_bench.catalog import ENV_VAR
    from setgrpo_bench.errors import SpecError
    from setgrpo_bench.graders.kinds import model_profiles

    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "mine.yaml").write_text("name: mine\nkind: learned\nbuild:\n  n_layers: 3\n")
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(SpecError, match="unknown build field") as error:
        model_profiles()
    assert error.value.field == "build.n_layers" and "mine.yaml" in str(error.value)


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    config = JudgeBuildConfig(n_embd=16, n_layer=1, n_head=2, label_budget=600, held_out=200, epochs=1, reads_prompt=True,
                              max_prompt_tokens=32, n_positions=192, split_by_task=True)
    return LearnedJudgeGrader(build_judge(config, out=tmp_path_factory.mktemp("judge") / "reader"))


def test_a_judge_that_reads_the_prompt_answers_from_it_with_a_shared_prefix(reader, grader, medication):
    task = medication.instance("train", 3)
    criteria = [c.text for c in task.rubric]
    responses = ["Take 10 mg twice a day with food.", ""]
    shared = reader.yes_probabilities(responses, criteria, task.prompt_text)
    tok = reader.tokenizer
    rows = [encode_question(tok, r, c, reader.limit, task.prompt_text, reader.prompt_limit) for r in responses for c in criteria]
    ids, mask = left_padded(rows, tok.pad_token_id)
    with torch.no_grad():
        logits = reader.model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(1) - 1).clamp(min=0)).logits[:, -1]
    alone = torch.softmax(logits[:, list(reader.answers)], dim=-1)[:, 0].reshape(shared.shape).numpy()
    assert np.abs(shared - alone).max() < 1e-5
    elsewhere = medication.instance("train", 4).prompt_text
    other = reader.yes_probabilities(responses, criteria, elsewhere)
    assert np.abs(shared - other).max() > 1e-6  # the prompt is read (an untrained-sized judge reads it weakly)
    np.testing.assert_array_equal(grader.yes_probabilities(responses, criteria, task.prompt_text),
                                  grader.yes_probabilities(responses, criteria, elsewhere))  # one built not to, does not
    grades = reader.grade_group(task, responses, np.random.default_rng(0))
    assert all(g.valid for g in grades) and reader.card["config"]["reads_prompt"]
    # a build that reads the prompt is graded packed (SDPA); one that does not, as its recorded runs were (eager)
    assert (reader.model.config._attn_implementation, grader.model.config._attn_implementation) == ("sdpa", "eager")
    assert {"auroc", "hack_table"} <= set(reader.card) and 0 <= reader.card["auroc"] <= 1


def test_hack_pairs_are_labelled_train_tasks_with_one_of_the_hacks_drawn_from_their_own_stream():
    from setgrpo_bench.envs import load_env_benchmark
    from setgrpo_bench.graders.hacks import hack_responses
    from setgrpo_bench.judges.learned_labels import hack_pairs

    benches = [load_env_benchmark(name) for name in ("MedicationGuide", "UnitConversion")]
    pairs = hack_pairs(benches, 12, seed=3)
    assert len(pairs) == 12 and pairs == hack_pairs(benches, 12, seed=3) and hack_pairs(benches, 0, seed=3) == []
    assert all(task.id.split("/")[1] == "train" for task, _ in pairs)
    kinds = set()
    for task, text in pairs:
        hacks = hack_responses(task, np.random.default_rng(0))
        fixed = {k: v for k, v in hacks.items() if k != "gibberish"}  # gibberish depends on the stream
        kinds.add(next((k for k, v in fixed.items() if v == text), "gibberish"))
    assert len(kinds) >= 3
