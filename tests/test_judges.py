"""LLM judges: verdict sampling against the judge's own probabilities, invalid answers, the endpoint
judge against a real local OpenAI-compatible server (incl. dropped connections and malformed JSON),
and API keys that never reach logs or run directories."""

import json
import threading

import numpy as np
import pytest
from conftest import binomial_ok

from setgrpo_bench.agents import resolve_config
from setgrpo_bench.graders.endpoint import EndpointJudge, JudgeEndpointError
from setgrpo_bench.graders.llm_judge import (
    LLMJudgeGrader,
    load_judge_profile,
    parse_verdict,
    tempered,
)
from setgrpo_bench.harness import run
from setgrpo_bench.judges import TransformersJudge
from setgrpo_bench.judges.serve import _Handler, make_server
from setgrpo_bench.tasks.scoring import rubric_score
from setgrpo_bench.tasks.task_files import task_from_line

PROFILE = load_judge_profile("judge-default")


@pytest.mark.parametrize("text, verdict", [
    ('{"criteria_met": true}', True), ('Answer: {"criteria_met": false, "why": "x"}', False), ("Yes, it does.", True),
    ("  no.", False), ("Maybe", None), ("", None), (None, None), ("yesterday", None),
])
def test_parse_verdict(text, verdict):
    assert parse_verdict(text) == verdict


def test_tempered_probabilities():
    assert tempered(np.array([0.8]), 1.0)[0] == pytest.approx(0.8)
    assert tempered(np.array([0.8]), 0.5)[0] == pytest.approx(0.64 / (0.64 + 0.04))
    assert tempered(np.array([0.8]), 1e6)[0] == pytest.approx(0.5, abs=1e-4)


@pytest.fixture(scope="module")
def local_judge(small_policy):
    return TransformersJudge(small_policy)


def test_verdicts_are_sampled_from_the_judges_own_probabilities(local_judge, medication):
    task = medication.instance("eval", 0)
    grader = LLMJudgeGrader(local_judge, PROFILE)
    responses = ["Take 10 mg twice a day.", "Call the clinic."]
    questions = [PROFILE.question(task, r, c.text) for r in responses for c in task.rubric]
    p = tempered(local_judge.yes_probabilities(questions, PROFILE.system), PROFILE.temperature)
    draws, _, valid, _, calls = grader._verdicts(task, responses, np.random.default_rng(0), repeats=3000)
    counts = draws.sum(axis=0).reshape(-1)
    assert all(binomial_ok(int(k), 3000, float(q)) for k, q in zip(counts, p))
    assert valid.all() and (calls == 3000 * len(task.rubric)).all()


def test_local_judge_grades_with_programmatic_truth_and_estimates_it_without_checks(local_judge, medication, tmp_path):
    task = medication.instance("eval", 1)
    grades = LLMJudgeGrader(local_judge, PROFILE).grade_group(task, ["A reply.", "Another reply."], np.random.default_rng(1))
    assert all(g.valid and g.judge_calls == len(task.rubric) and not g.true_score_is_estimate for g in grades)
    assert grades[0].true_score == pytest.approx(float(rubric_score(task.points, task.true_verdicts("A reply."))[0]))
    healthbench = task_from_line({"prompt": "Explain fever.", "rubrics": [{"criterion": "Mentions fluids", "points": 5},
                                  {"criterion": "Is rude", "points": -3}]}, benchmark="HB", domain="health", split="eval", index=0)
    [grade] = LLMJudgeGrader(local_judge, PROFILE).grade_group(healthbench, ["Drink fluids."], np.random.default_rng(2))
    assert grade.true_score_is_estimate and grade.judge_calls == 2 * (1 + PROFILE.truth_repeats)


class _Recording(_Handler):
    seen: list
    def do_POST(self):  # noqa: N802
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        super().do_POST()


class _Verdicts(_Recording):
    """The served model's own sample decides the verdict (randomness stays the model's); parseable."""
    def _reply(self, status, payload):
        if status == 200:
            text = payload["choices"][0].get("message", {}).get("content", payload["choices"][0].get("text", ""))
            verdict = "true" if len(text) % 2 == 0 else "false"
            payload["choices"][0]["message"] = {"role": "assistant", "content": f'{{"criteria_met": {verdict}}}'}
        super()._reply(status, payload)


class _Dropping(_Verdicts):
    """Closes the first two connections without an answer."""
    drops = [2]
    def do_POST(self):  # noqa: N802
        if self.drops[0] > 0:
            self.drops[0] -= 1
            self.connection.close()
            return
        super().do_POST()


class _Malformed(_Recording):
    def _reply(self, status, payload):
        data = b'{"choices": [{"message": '
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def serve(small_policy):
    started = []

    def start(handler):
        handler = type(handler.__name__, (handler,), {"seen": []})
        server = make_server(small_policy, handler=handler, model_name="small")
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", server.RequestHandlerClass

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def test_endpoint_judge_end_to_end_against_a_real_model_server(serve, medication):
    url, handler = serve(_Verdicts)
    judge = EndpointJudge(url, "small", timeout_s=10, backoff_s=0.01)
    task = medication.instance("eval", 2)
    responses = ["Same answer.", "Same answer.", "A different answer."]
    grades = LLMJudgeGrader(judge, PROFILE).grade_group(task, responses, np.random.default_rng(0))
    assert all(g.valid for g in grades) and grades[0].judge_calls == len(task.rubric)
    assert len(handler.seen) == 2 * len(task.rubric)  # identical requests of the batch were sent once
    assert np.array_equal(grades[0].verdicts, grades[1].verdicts)


def test_unparseable_answers_make_the_grade_invalid_not_zero(serve, medication):
    url, handler = serve(_Recording)  # the small model's raw text: never a verdict
    task = medication.instance("eval", 3)
    [grade] = LLMJudgeGrader(EndpointJudge(url, "small", backoff_s=0.01), PROFILE).grade_group(task, ["x"], np.random.default_rng(0))
    assert not grade.valid and np.isnan(grade.score)
    assert grade.judge_calls == len(task.rubric) * (PROFILE.max_retries + 1)
    assert len(json.loads(grade.raw)) == len(task.rubric)  # the raw answers are kept
    assert "raw" in grade.info(tuple(c.id for c in task.rubric))


def test_dropped_connections_are_retried_and_malformed_json_is_invalid(serve, medication):
    task = medication.instance("eval", 4)
    url, _ = serve(_Dropping)
    [grade] = LLMJudgeGrader(EndpointJudge(url, "small", backoff_s=0.01), PROFILE).grade_group(task, ["y"], np.random.default_rng(0))
    assert grade.valid
    url, handler = serve(_Malformed)
    judge = EndpointJudge(url, "small", backoff_s=0.01, max_attempts=3)
    [grade] = LLMJudgeGrader(judge, PROFILE).grade_group(task, ["y"], np.random.default_rng(0))
    assert not grade.valid and len(handler.seen) == 3 * len(task.rubric) * (PROFILE.max_retries + 1)


def test_unknown_model_is_a_clear_error(serve):
    url, _ = serve(_Recording)
    with pytest.raises(JudgeEndpointError, match="HTTP 404: .*model 'other' is not served"):
        EndpointJudge(url, "other").answers(["q"], PROFILE, seeds=[0], attempt=0)


def test_api_key_is_sent_but_never_logged_or_written(serve, small_policy, tmp_path, monkeypatch, capsys):
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("JUDGE_KEY", secret)
    url, handler = serve(_Verdicts)
    config = resolve_config("grpo", {"policy": small_policy, "envs": "UnitConversion", "steps": 1, "groups_per_step": 1,
                                     "group_size": 2, "eval_instances": 1, "max_new_tokens": 8, "judge_url": url,
                                     "judge_model": "small", "judge_api_key_env": "JUDGE_KEY"})
    run(config, tmp_path / "run")
    assert handler.seen and all(auth == f"Bearer {secret}" for _, auth in handler.seen)
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    captured = capsys.readouterr()
    assert secret not in captured.out + captured.err
    assert secret not in repr(EndpointJudge(url, "small", api_key_env="JUDGE_KEY"))
    with pytest.raises(Exception, match="JUDGE_KEY_MISSING"):
        EndpointJudge(url, "small", api_key_env="JUDGE_KEY_MISSING")


def test_judge_config_errors():
    with pytest.raises(Exception, match="judge_model"):
        resolve_config("grpo", {"judge_url": "http://127.0.0.1:1"})
    with pytest.raises(Exception, match="not both"):
        resolve_config("grpo", {"judge": "tiny", "judge_url": "http://x", "judge_model": "m"})
    with pytest.raises(Exception, match="http"):
        EndpointJudge("ftp://x", "m")

