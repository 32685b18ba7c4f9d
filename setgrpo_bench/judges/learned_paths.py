"""Where the learned judge lives and what it is a function of, without torch: its build config and
key, the shipped folder and the cache (the builder and the grader are ``judges.learned``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..hashing import stable_hash
from ..policy.embedded import build_key as policy_build_key
from ..policy.embedded import builtin_names, cache_root
from ..tasks.catalog_benchmarks import load_env_benchmark

SHIPPED = Path(__file__).with_name("learned_judge")
"""The default build, shipped inside the package (weights, tokenizer, its key and its card)."""
KEY_FILE = "build_key.txt"
CARD = "judge_card.json"
RECIPE_VERSION = 1


@dataclass(frozen=True)
class JudgeBuildConfig:
    """Capacity and label budget of the learned judge: small on purpose, so that its errors are a
    model's errors — tied to surface features, worse away from its training data, exploitable."""

    n_embd: int = 64  # hidden size
    n_layer: int = 2  # transformer blocks
    n_head: int = 4  # attention heads
    label_budget: int = 12_000  # labelled (response, criterion) pairs it learns from
    policy_share: float = 0.5  # share of the labelled responses sampled from the initial policy (the rest: corpus)
    held_out: int = 3_000  # labelled pairs kept aside to measure it (and state its error rates)
    max_response_tokens: int = 96  # a longer response is cut (its start is kept)
    epochs: int = 4  # passes over the labels
    batch_size: int = 32
    lr: float = 2e-3  # peak AdamW learning rate (one-cycle schedule)
    seed: int = 0  # the label draw, the initialisation and the batch order
    reads_prompt: bool = False  # the task's prompt precedes the response in the judge's input
    max_prompt_tokens: int = 96  # a longer prompt is cut (its start is kept)
    n_positions: int = 256  # the longest input the model reads
    split_by_task: bool = False  # held-out labels come from tasks (and so responses) that no training label saw
    hack_share: float = 0.0  # responses written to fool a judge (graders/hacks.py), as a share of the others, labelled too

    @classmethod
    def from_profile(cls, fields: Mapping[str, Any]) -> JudgeBuildConfig:
        """The build a ``kind: learned`` profile names (its ``build`` mapping; none: the default)."""
        return cls(**dict(fields.get("build") or {}))


ADDED_FIELDS = {"reads_prompt": False, "max_prompt_tokens": 96, "n_positions": 256, "split_by_task": False,
                "hack_share": 0.0}
"""Build fields added after the first build, with the values it was built with: left out of a key at
those values, so that the first build keeps its key."""


def build_key(config: JudgeBuildConfig = JudgeBuildConfig()) -> str:
    """What the judge is a function of: the built-in suite, the policy its samples come from, this
    config and the recipe. A shipped or cached build is used only under its own key."""
    suite = {name: load_env_benchmark(name).content_hash() for name in builtin_names()}
    fields = {k: v for k, v in asdict(config).items() if k not in ADDED_FIELDS or v != ADDED_FIELDS[k]}
    return stable_hash({"suite": suite, "policy": policy_build_key(), "config": fields, "recipe": RECIPE_VERSION})


def profile_build_key(fields: Mapping[str, Any]) -> str:
    """The build key of the judge a ``kind: learned`` profile names (for suite hashes)."""
    return build_key(JudgeBuildConfig.from_profile(fields))


def shipped_builds() -> list[Path]:
    """Every build shipped inside the package: the default one and those of ``learned_judge_*``."""
    return [SHIPPED, *sorted(SHIPPED.parent.glob(f"{SHIPPED.name}_*"))]


def shipped_folder(profile: str, config: JudgeBuildConfig) -> Path:
    """Where a profile's build ships: the default build in ``learned_judge``, any other in
    ``learned_judge_<profile>``."""
    return SHIPPED if config == JudgeBuildConfig() else SHIPPED.with_name(f"{SHIPPED.name}_{profile.removeprefix('learned-').replace('-', '_')}")


def judge_path(config: JudgeBuildConfig = JudgeBuildConfig()) -> Path:
    """The shipped build whose key matches the current suite and config, else a folder of the cache."""
    key = build_key(config)
    for folder in shipped_builds():
        if (folder / KEY_FILE).is_file() and (folder / KEY_FILE).read_text(encoding="utf-8").strip() == key:
            return folder
    return cache_root() / f"learned-judge-{key[:16]}"
