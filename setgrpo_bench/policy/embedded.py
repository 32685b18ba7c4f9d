"""Where the embedded policy lives and what it is a function of (DESIGN §6), without torch: the build
key, the shipped folder and the cache. The builder itself is ``policy.tiny``."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..catalog import builtin_root
from ..hashing import stable_hash
from ..tasks.catalog_benchmarks import benchmark_paths, load_env_benchmark

CACHE_ENV = "SETGRPO_BENCH_CACHE"
SHIPPED = Path(__file__).with_name("embedded")
"""The default build, shipped inside the package (weights, tokenizer and its build key)."""
KEY_FILE = "build_key.txt"
CORPUS_VERSION = 1


@dataclass(frozen=True)
class TinyConfig:
    """Architecture and warm-start settings of the embedded model."""

    vocab_size: int = 2048  # BPE vocabulary, incl. the end-of-text token
    n_embd: int = 128  # hidden size
    n_layer: int = 4  # transformer blocks
    n_head: int = 4  # attention heads
    n_positions: int = 256  # context length (prompt ≈ 55 + response ≤ 96 tokens)
    dropout: float = 0.0  # 3 passes over 12k examples do not overfit 1M parameters; RL needs a dropout-free policy
    activation: str = "gelu_pytorch_tanh"  # torch's fused tanh-GELU (the same function as GPT-2's gelu_new, ~4× faster)
    instances_per_benchmark: int = 600  # train-split prompts per benchmark in the corpus
    examples_per_instance: int = 2  # example responses per prompt (random quality)
    min_quality: float = 0.1  # lowest quality of example responses (0.0: initial macro 0.31; 0.3: 0.44)
    max_quality: float = 1.0  # highest quality of example responses
    prompt_loss: bool = False  # also learn to predict prompt tokens (more signal per sequence)
    epochs: int = 3  # passes over the corpus (1 left the samples at 0.22 against a corpus at 0.62)
    batch_size: int = 16  # sequences per optimiser step (more steps beat bigger batches at this budget)
    lr: float = 3e-3  # peak AdamW learning rate (one-cycle schedule)
    seed: int = 0  # seeds the corpus draw, the initialisation and the batch order


def cache_root() -> Path:
    """``$SETGRPO_BENCH_CACHE``, else ``$XDG_CACHE_HOME/setgrpo_bench``, else ``~/.cache/setgrpo_bench``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "setgrpo_bench"


def builtin_names() -> list[str]:
    return sorted(name for name, path in benchmark_paths().items() if "_catalog" in path.parts or path.is_relative_to(_builtin_envs()))


def _builtin_envs() -> Path:
    return builtin_root() / "envs"


def build_key(config: TinyConfig = TinyConfig()) -> str:
    """What the embedded model is a function of: the built-in suite's content, this config and the
    corpus recipe. A shipped or cached build is used only under its own key."""
    suite = {name: load_env_benchmark(name).content_hash() for name in builtin_names()}
    return stable_hash({"suite": suite, "config": asdict(config), "corpus": CORPUS_VERSION})


def shipped_key() -> str | None:
    """The key of the build shipped inside the package, or None when none is shipped."""
    path = SHIPPED / KEY_FILE
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def tiny_path(config: TinyConfig = TinyConfig()) -> Path:
    """The folder of the tiny model for ``config`` and the current built-in suite: the shipped build
    when its key matches, else a folder of the cache."""
    key = build_key(config)
    return SHIPPED if shipped_key() == key else cache_root() / f"tiny-{key[:16]}"


def install_build(target: Path, model: Any, tokenizer: Any, key: str, extra: dict[str, str] | None = None) -> Path:
    """Save a built model, its tokenizer, its key and ``extra`` text files into a fresh folder beside
    ``target``, give them the user's usual permissions (``mkdtemp`` makes 0700), then put the folder in
    ``target``'s place at once."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    for name, text in {KEY_FILE: key + "\n", **(extra or {})}.items():
        (staging / name).write_text(text, encoding="utf-8")
    umask = os.umask(0)
    os.umask(umask)
    for path in [staging, *staging.iterdir()]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return target
