"""Benchmarks: a named source of task instances with disjoint ``train``/``calib``/``eval`` splits.

Two kinds (DESIGN §3): a *procedural* generator described by a YAML spec (``tasks.procedural``),
where any index is reproducible alone from its seed, and a *file* benchmark reading fixed JSONL
(``tasks.task_files``, native format or HealthBench's ``{prompt, rubrics}``). Specs are checked by
``tasks.spec_checks`` and loaded by ``tasks.loading``.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterator

import numpy as np

from ..errors import ConfigError
from .model import TaskInstance

SPLITS = ("train", "calib", "eval")
_SPLIT_BUCKETS = {"train": range(0, 12), "calib": range(12, 16), "eval": range(16, 20)}
EVAL_PARTS = ("dev", "test")
DEV_INSTANCES = 64
"""The eval split's first 64 instances are ``dev``: presets, defaults and targets may be chosen on them.
The rest are ``test``, used only for a board's final numbers (DESIGN §9)."""
MIN_TEST_INSTANCES = 128


def eval_indices(benchmark: Benchmark, part: str, instances: int = 0) -> range:
    """Indices in the eval split of ``benchmark`` of its ``dev`` or ``test`` part, the first
    ``instances`` of that part (0: all of it). A test part under 128 instances is refused: a board's
    final numbers need at least that many per benchmark."""
    size = benchmark.size("eval")
    dev = min(DEV_INSTANCES, size)
    if part == "dev":
        start, stop = 0, dev
    elif part == "test":
        start, stop = dev, size
        if stop - start < MIN_TEST_INSTANCES:
            raise ConfigError("eval_split", "test", f"a benchmark with at least {DEV_INSTANCES + MIN_TEST_INSTANCES} eval "
                              f"instances ({benchmark.name} has {size}: {stop - start} after its {dev} dev ones)",
                              "Evaluate on 'dev', or give the benchmark more eval instances.")
    else:
        raise ConfigError("eval_split", part, f"one of {list(EVAL_PARTS)}")
    return range(start, stop if instances == 0 else min(stop, start + instances))


def split_of_prompt(benchmark: str, prompt: str) -> str:
    """The split a prompt belongs to, from a hash of its text: splits are disjoint by construction."""
    digest = hashlib.sha256(f"{benchmark}\0{prompt}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") % 20
    return next(s for s, r in _SPLIT_BUCKETS.items() if bucket in r)


class Benchmark(ABC):
    """A source of task instances. Subclasses implement ``size``, ``instance`` and ``content_hash``."""

    name: str
    domain: str
    description: str = ""
    default_grader: str = "realistic"
    score_rule: str = "healthbench"

    @abstractmethod
    def size(self, split: str) -> int:
        """Number of instances in ``split``."""

    @abstractmethod
    def instance(self, split: str, index: int) -> TaskInstance:
        """Instance ``index`` of ``split``; the same arguments always give the same instance."""

    @abstractmethod
    def content_hash(self) -> str:
        """Hash of everything that defines the instances and rubrics."""

    def examples(self, task: TaskInstance, rng: np.random.Generator, n: int, min_quality: float = 0.0,
                 max_quality: float = 1.0) -> list[str]:
        """Example responses of graded quality for the warm start; empty when the benchmark has none."""
        return []

    def instances(self, split: str) -> Iterator[TaskInstance]:
        for index in range(self.size(split)):
            yield self.instance(split, index)

    def _check_index(self, split: str, index: int) -> None:
        if split not in SPLITS:
            raise ConfigError("split", split, f"one of {list(SPLITS)}")
        size = self.size(split)
        if not isinstance(index, (int, np.integer)) or not 0 <= index < size:
            raise ConfigError("index", index, f"an integer in [0, {size}) for {self.name}/{split}")

