"""The embedded default policy ``tiny`` (DESIGN §6): a ≈1M-parameter GPT-2 with a byte-level BPE
tokenizer, both trained by the package on a warm-start corpus drawn from the built-in suite.

Byte-level BPE makes any prompt representable, so unseen names can be copied from the prompt. The
corpus pairs train-split prompts with example responses of graded quality, so that samples from the
warm-started model are diverse and RL has something to improve. The result is cached under a key of
the suite's content hash and this config, and rebuilt deterministically when missing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from ..tasks.catalog_benchmarks import load_env_benchmark
from .embedded import (
    KEY_FILE,
    TinyConfig,
    build_key,
    builtin_names,
    install_build,
    tiny_path,
)
from .model import RESPONSE_MARKER

EOS = "<|endoftext|>"

def warm_start_corpus(config: TinyConfig) -> list[tuple[str, str]]:
    """(prompt, response) pairs: train-split prompts of every built-in benchmark with example
    responses of random quality."""
    rng = np.random.default_rng(config.seed)
    pairs = []
    for name in builtin_names():
        bench = load_env_benchmark(name)
        for index in range(min(config.instances_per_benchmark, bench.size("train"))):
            task = bench.instance("train", index)
            examples = bench.examples(task, rng, config.examples_per_instance, min_quality=config.min_quality,
                                      max_quality=config.max_quality)
            pairs += [(task.prompt_text, r) for r in examples]
    order = rng.permutation(len(pairs))
    return [pairs[i] for i in order]


def _tokenizer(pairs: list[tuple[str, str]], config: TinyConfig) -> PreTrainedTokenizerFast:
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        (p + RESPONSE_MARKER + r for p, r in pairs), vocab_size=config.vocab_size, min_frequency=2,
        special_tokens=[EOS], show_progress=False,
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, eos_token=EOS, bos_token=EOS, pad_token=EOS, unk_token=EOS,
        padding_side="left", model_max_length=config.n_positions,
    )


def _examples(pairs, tokenizer, config) -> list[tuple[list[int], int]]:
    """Token ids of prompt+response+EOS and the index where the response starts (loss starts there)."""
    out = []
    for prompt, response in pairs:
        head = tokenizer(prompt + RESPONSE_MARKER)["input_ids"]
        tail = tokenizer(response)["input_ids"] + [tokenizer.eos_token_id]
        ids = (head + tail)[: config.n_positions]
        out.append((ids, 0 if config.prompt_loss else len(head)))
    return out


def _batches(examples, config: TinyConfig, generator: torch.Generator) -> list[list[int]]:
    """Shuffled batches of similar-length examples (sorted within windows of 16 batches), so that
    little compute goes to padding."""
    order = torch.randperm(len(examples), generator=generator).tolist()
    window = 16 * config.batch_size
    batches = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: len(examples[i][0]))
        batches += [chunk[i : i + config.batch_size] for i in range(0, len(chunk), config.batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def _collate(batch: list[tuple[list[int], int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in batch)
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (seq, response_start) in enumerate(batch):
        ids[row, : len(seq)] = torch.tensor(seq)
        labels[row, response_start : len(seq)] = torch.tensor(seq[response_start:])
        mask[row, : len(seq)] = 1
    return ids, labels, mask


def _train(model: GPT2LMHeadModel, examples, config: TinyConfig, progress: Progress) -> None:
    generator = torch.Generator().manual_seed(config.seed)
    epochs = [_batches(examples, config, generator) for _ in range(config.epochs)]
    steps = sum(len(e) for e in epochs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=config.lr, total_steps=steps, pct_start=0.05)
    task = progress.add_task("warm start", total=steps)
    model.train()
    for batches in epochs:
        for batch in batches:
            ids, labels, mask = _collate([examples[i] for i in batch])
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            progress.update(task, advance=1, description=f"warm start (loss {loss.item():.2f})")
    model.eval()


def build_tiny(config: TinyConfig = TinyConfig(), *, force: bool = False, out: Path | None = None) -> Path:
    """Build (or reuse, shipped or cached) the embedded model; returns its folder. ``out`` builds into
    a given folder (``build-policy`` writes the shipped build so)."""
    target = Path(out) if out is not None else tiny_path(config)
    key = build_key(config)
    if not force and (target / "config.json").is_file() and _key_of(target) == key:
        return target
    # building leaves the caller's random streams untouched (a run that builds the policy first
    # gives the same result as one that finds it cached), and runs on one thread: the order of
    # floating-point sums then does not depend on the machine's cores, so a rebuild is bit-identical
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]), Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), transient=False,
        ) as progress:
            torch.manual_seed(config.seed)
            prep = progress.add_task("tiny policy: corpus and tokenizer", total=1)
            pairs = warm_start_corpus(config)
            tokenizer = _tokenizer(pairs, config)
            examples = _examples(pairs, tokenizer, config)
            progress.update(prep, completed=1)
            model = GPT2LMHeadModel(GPT2Config(
                vocab_size=len(tokenizer), n_positions=config.n_positions, n_embd=config.n_embd,
                n_layer=config.n_layer, n_head=config.n_head, resid_pdrop=config.dropout, embd_pdrop=config.dropout,
                attn_pdrop=config.dropout, activation_function=config.activation, bos_token_id=tokenizer.eos_token_id,
                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
            ))
            _train(model, examples, config, progress)
    finally:
        torch.set_num_threads(threads)
    return install_build(target, model, tokenizer, key)


def _key_of(folder: Path) -> str | None:
    path = folder / KEY_FILE
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None
