"""Fixed-file benchmarks (native and HealthBench JSONL) and the errors bad specs and lines give."""

import json

import pytest

from setgrpo_bench.errors import SpecError
from setgrpo_bench.tasks import load_benchmark, validate_benchmark

HEALTHBENCH_LINE = {
    "prompt": [{"role": "user", "content": "I have a headache, what should I do?"}],
    "rubrics": [
        {"criterion": "Suggests rest and fluids", "points": 5, "tags": ["axis:completeness"]},
        {"criterion": "Recommends an emergency visit for red flags", "points": 8, "tags": ["axis:accuracy"]},
        {"criterion": "Prescribes opioids", "points": -9, "tags": ["axis:accuracy"]},
    ],
    "prompt_id": "hb-001",
}

NATIVE_LINE = {
    "id": "n1",
    "prompt": "Write to Ana.",
    "rubric": [
        {"id": "name", "text": "Names Ana", "points": 2, "category": "essential",
         "check": {"type": "entity", "value": "Ana"}},
        {"id": "rude", "text": "Is rude", "points": -1, "category": "pitfall",
         "check": {"type": "keyword_any", "terms": ["idiot"]}},
    ],
}


def _write(tmp_path, lines, spec_extra=""):
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (tmp_path / "benchmark.yaml").write_text(
        f"name: Mine\ndomain: health\nkind: file\ntasks: tasks.jsonl\n{spec_extra}"
    )
    return tmp_path / "benchmark.yaml"


def test_healthbench_jsonl_imports_as_is(tmp_path):
    bench = load_benchmark(_write(tmp_path, [{**HEALTHBENCH_LINE, "split": "eval"}, {**NATIVE_LINE, "split": "train"}]))
    task = bench.instance("eval", 0)
    assert task.id == "hb-001" and task.prompt[0]["role"] == "user"
    assert [c.category for c in task.rubric] == ["important", "essential", "pitfall"]
    assert not task.gradable  # HealthBench criteria need an LLM judge
    with pytest.raises(SpecError, match="no programmatic check; grade this task with an LLM judge"):
        task.true_verdicts("rest")
    native = bench.instance("train", 0)
    assert native.gradable and native.true_verdicts("Hi Ana").tolist() == [True, False]
    assert bench.size("calib") == 0


@pytest.mark.parametrize(
    "line, match",
    [
        ({"prompt": "x", "rubric": [], "split": "eval", "id": "a"}, r"tasks.jsonl:2: rubric: a rubric needs at least one"),
        ({**NATIVE_LINE, "split": "test"}, r"tasks.jsonl:2: split: expected a split in"),
        ({**NATIVE_LINE, "split": "eval", "rubric": [{**NATIVE_LINE["rubric"][0], "check": {"type": "nope"}}]},
         r"tasks.jsonl:2: rubric\[0\].check.type: unknown check type 'nope'"),
        ({**NATIVE_LINE, "split": "eval", "rubric": [{**NATIVE_LINE["rubric"][0], "check": {"type": "regex", "pattern": "["}}]},
         r"tasks.jsonl:2: rubric\[0\].check.pattern: invalid regular expression"),
        ({"prompt": "x", "split": "eval", "rubrics": [{"criterion": "bad", "points": -3}]},
         r"tasks.jsonl:2: rubrics: a rubric needs at least one criterion with positive points"),
        ({"prompt": "x", "split": "eval", "rubrics": [{"criterion": "five points", "points": "five"}]},
         r"tasks.jsonl:2: rubrics\[0\].points: expected a number, got 'five'"),
        ({"prompt": "x", "split": "eval", "rubrics": [{"criterion": "ok", "points": 2}, {"criterion": "z", "points": 0}]},
         r"tasks.jsonl:2: rubrics\[1\].points: expected non-zero"),
        ({"prompt": "x", "split": "eval"}, r"tasks.jsonl:2: rubrics: missing: expected 'rubrics' \(HealthBench"),
    ],
)
def test_bad_task_lines_name_file_line_and_field(tmp_path, line, match):
    path = _write(tmp_path, [{**NATIVE_LINE, "split": "train"}, line])
    with pytest.raises(SpecError, match=match):
        load_benchmark(path)


def test_invalid_json_line(tmp_path):
    path = _write(tmp_path, [{**NATIVE_LINE, "split": "train"}])
    with (tmp_path / "tasks.jsonl").open("a") as handle:
        handle.write("{not json\n")
    with pytest.raises(SpecError, match=r"tasks.jsonl:2: invalid JSON"):
        load_benchmark(path)


def test_malformed_yaml_names_line(tmp_path):
    (tmp_path / "benchmark.yaml").write_text("name: X\ndomain: [unclosed\n")
    with pytest.raises(SpecError, match=r"benchmark.yaml:\d+: invalid YAML"):
        load_benchmark(tmp_path)
    assert "invalid YAML" in str(validate_benchmark(tmp_path)[0])


def test_procedural_spec_errors_carry_lines(tmp_path):
    spec = (
        "name: P\ndomain: d\nsizes: {train: 5, calib: 5, eval: 5}\nvariables:\n  x: {range: [1, 500]}\n"
        "prompt: Say {x}.\ncriteria:\n  - id: a\n    text: says {y}\n    points: 1\n    category: important\n"
        "    check: {type: keyword_any, terms: ['{x}']}\n"
    )
    (tmp_path / "benchmark.yaml").write_text(spec)
    problems = validate_benchmark(tmp_path)
    assert len(problems) == 1
    assert "benchmark.yaml:8: criteria[0]" in str(problems[0]) and "undefined variable" in str(problems[0])
    (tmp_path / "benchmark.yaml").write_text(spec.replace("sizes: {train: 5, calib: 5, eval: 5}", "sizes: {train: 5}"))
    with pytest.raises(SpecError, match=r"benchmark.yaml:3: sizes: expected a mapping with keys"):
        load_benchmark(tmp_path)


def test_unknown_top_level_field(tmp_path):
    (tmp_path / "benchmark.yaml").write_text("name: X\ndomain: d\nkind: file\ntasks: t.jsonl\ncolour: red\n")
    with pytest.raises(SpecError, match=r"benchmark.yaml:5: colour: unknown field"):
        load_benchmark(tmp_path)


def test_validate_lists_every_problem_of_a_spec_in_one_pass(tmp_path):
    """Five planted problems — a category, a pool, a check type, a regex, a number — are all reported at
    once, each at its line; a spec fixed in one round validates."""
    spec = """name: Kitchen
domain: cooking
sizes: {train: 50, calib: 20, eval: 20}
pools:
  dishes: [soup, pasta, salad, curry, stew, risotto]
variables:
  dish: {pool: dishez}
  minutes: {range: [5, 60]}
prompt: Describe how to make {dish} in {minutes} minutes, in at most 40 words.
criteria:
  - id: dish
    text: Names the {dish}.
    points: 2
    category: essential
    check: {type: keyword_anyy, terms: ["{dish}"]}
  - id: time
    text: Gives the time, {minutes} minutes.
    points: 1
    category: importantt
    check: {type: regex, pattern: '\\b{minutes} min('}
  - id: words
    text: Uses at most 40 words.
    points: 1
    category: important
    check: {type: word_count, max: forty}
"""
    (tmp_path / "benchmark.yaml").write_text(spec)
    problems = sorted(str(p).split("benchmark.yaml:")[1].split(":")[0] + " " + str(p.field) for p in validate_benchmark(tmp_path))
    assert problems == ["15 criteria[0].check.type", "19 criteria[1].category", "20 criteria[1].check.pattern",
                        "25 criteria[2].check.max", "7 variables.dish.pool"]
    fixed = (spec.replace("dishez", "dishes").replace("keyword_anyy", "keyword_any").replace("importantt", "important")
             .replace("min('", "min'").replace("max: forty", "max: 40"))
    (tmp_path / "benchmark.yaml").write_text(fixed)
    assert validate_benchmark(tmp_path) == []
