"""Where the learned judge lives and what it is a function of, without torch: its build config and
key, the shipped folder and the cache (the builder and the grader are ``judges.learned``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

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


def build_key(config: JudgeBuildConfig = JudgeBuildConfig()) -> str:
    """What the judge is a function of: the built-in suite, the policy its samples come from, this
    config and the recipe. A shipped or cached build is used only under its own key."""
    suite = {name: load_env_benchmark(name).content_hash() for name in builtin_names()}
    return stable_hash({"suite": suite, "policy": policy_build_key(), "config": asdict(config), "recipe": RECIPE_VERSION})


def shipped_key() -> str | None:
    path = SHIPPED / KEY_FILE
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def judge_path(config: JudgeBuildConfig = JudgeBuildConfig()) -> Path:
    """The shipped build when its key matches the current suite and config, else a folder of the cache."""
    key = build_key(config)
    return SHIPPED if shipped_key() == key else cache_root() / f"learned-judge-{key[:16]}"
