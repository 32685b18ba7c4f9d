"""``RubricEnv``: one open-ended task per episode, graded by a stochastic rubric judge (DESIGN §5)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

from ..errors import ConfigError
from ..graders import Grade, NoiseProfile, RubricGrader, make_grader
from ..tasks.benchmark import SPLITS, Benchmark
from ..tasks.catalog_benchmarks import load_env_benchmark
from ..tasks.model import TaskInstance
from .spaces import UnicodeText


class RubricEnv(gym.Env[str, str]):
    """Single-step environment: ``reset`` gives a prompt, ``step(response)`` grades it and ends.

    ``reward`` is the judge's noisy score (NaN when the judge failed even after its retries; ``info``
    says ``valid=False``). ``info["true_score"]`` is the noise-free rubric score, for evaluation by the
    harness only. All randomness (task choice, judge noise) comes from ``self.np_random``.
    ``grader`` (a grader or profile) takes precedence over ``noise`` (a profile name or path).

    >>> import gymnasium, setgrpo_bench
    >>> env = gymnasium.make("setgrpo/MedicationGuide-v0", noise="clean")
    >>> prompt, info = env.reset(seed=0, options={"index": 3})
    >>> obs, reward, terminated, truncated, info = env.step("Take your medicine.")
    >>> terminated
    True
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        benchmark: str | Path | Benchmark,
        split: str = "train",
        grader: str | Path | NoiseProfile | RubricGrader | Any | None = None,
        noise: str | Path | NoiseProfile | None = None,
        render_mode: str | None = None,
        max_prompt_chars: int = 16_384,
        max_response_chars: int = 16_384,
        domain: str | None = None,
        split_sizes: dict[str, int] | None = None,
    ) -> None:
        self.benchmark = benchmark if isinstance(benchmark, Benchmark) else load_env_benchmark(benchmark)
        if split not in SPLITS:
            raise ConfigError("split", split, f"one of {list(SPLITS)}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError("render_mode", render_mode, f"None or one of {self.metadata['render_modes']}")
        self.split = split
        self.grader = make_grader(grader or noise or self.benchmark.default_grader, self.benchmark.score_rule)
        self.render_mode = render_mode
        self.domain = domain or self.benchmark.domain
        self.split_sizes = split_sizes or {s: self.benchmark.size(s) for s in SPLITS}
        self.observation_space = UnicodeText(max_prompt_chars)
        self.action_space = UnicodeText(max_response_chars)
        self.task: TaskInstance | None = None
        self._last: tuple[str, Grade] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Options: ``index`` (int) or ``task_id`` (str) to pick the task, ``split`` to switch split."""
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"index", "task_id", "split"}
        if unknown:
            raise ConfigError("options", sorted(unknown), "keys among 'index', 'task_id', 'split'")
        split = options.get("split", self.split)
        if "task_id" in options:
            name, task_split, index = _parse_task_id(options["task_id"], self.benchmark.name)
            split, options["index"] = task_split, index
        index = options.get("index")
        if index is None:
            index = int(self.np_random.integers(self.benchmark.size(split)))
        self.task = self.benchmark.instance(split, int(index))
        self._last = None
        return self.task.prompt_text, self._task_info()

    def _task_info(self) -> dict[str, Any]:
        task = self.task
        assert task is not None
        return {
            "task_id": task.id,
            "benchmark": self.benchmark.name,
            "domain": self.domain,
            "split": task.metadata["split"],
            "index": task.metadata["index"],
            "rubric": [{"id": c.id, "text": c.text, "points": c.points, "category": c.category} for c in task.rubric],
        }

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.task is None:
            raise ResetNeeded("call reset() before step(): each episode is one prompt and one response")
        self._check_response(action)
        grade = self.grader.grade(self.task, action, self.np_random)
        info = {**self._task_info(), **grade.info(tuple(c.id for c in self.task.rubric))}
        self._last = (action, grade)
        self.task = None
        return "", grade.score, True, False, info

    def grade_group(self, responses: Sequence[str], *, task: TaskInstance | str,
                    rng: np.random.Generator | None = None) -> list[Grade]:
        """Grade G responses to ``task`` (an instance or a task id such as ``info["task_id"]``) at
        once, from ``rng`` (default: the env's ``np_random``). Equal to G ``reset(options={"task_id":
        ...})`` + ``step`` calls made from the same stream; the episode state is not touched."""
        if isinstance(task, str):
            name, split, index = _parse_task_id(task, self.benchmark.name)
            task = self.benchmark.instance(split, index)
        if isinstance(responses, str):
            raise ConfigError("responses", responses[:40], "a sequence of response texts (a group), not one str")
        responses = list(responses)
        for response in responses:
            self._check_response(response)
        return self.grader.grade_group(task, responses, self.np_random if rng is None else rng)

    def _check_response(self, response: object) -> None:
        """A response is text the action space holds: a ``str`` of at most its length, valid Unicode."""
        if not isinstance(response, str):
            raise ConfigError("response", type(response).__name__, "the response text (a str)")
        if not self.action_space.contains(response):
            raise ConfigError("response", f"<{len(response)} characters>",
                              f"at most {self.action_space.max_length} characters (the action space's limit)")
        try:
            response.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ConfigError("response", response[max(exc.start - 10, 0): exc.end + 10],
                              f"valid Unicode text (character {exc.start} is a lone surrogate)") from None

    def judge_error_rates(self, task: TaskInstance) -> tuple[np.ndarray, np.ndarray] | None:
        """The judge's stated (false-positive, false-negative) rate per criterion of ``task``, or None
        when it states none (LLM judges): test-time knowledge a practitioner has of a calibrated judge."""
        return self.grader.stated_rates(task)

    def render(self) -> str | None:
        """``ansi``: the current prompt, or the last response with its grade."""
        if self.render_mode != "ansi":
            return None
        if self._last is None:
            return f"prompt: {self.task.prompt_text}" if self.task is not None else "(no task: call reset())"
        response, grade = self._last
        return f"response: {response}\nscore: {grade.score:.3f} (valid={grade.valid}, calls={grade.judge_calls})"


def _parse_task_id(task_id: str, benchmark: str) -> tuple[str, str, int]:
    parts = str(task_id).rsplit("/", 2)
    if len(parts) != 3 or parts[0] != benchmark or parts[1] not in SPLITS or not parts[2].isdigit():
        raise ConfigError("task_id", task_id, f"'{benchmark}/<split>/<index>' with split in {list(SPLITS)}")
    return parts[0], parts[1], int(parts[2])
