"""The learned judge (DESIGN §4): a small causal LM the package trains to answer, for one response and
one rubric criterion, whether the criterion is met — from a limited budget of programmatic labels on
the warm-start corpus's responses and the initial policy's samples (never on RL runs), so that its
errors are a model's: tied to surface features, worse away from its training data, and exploitable.

Input: ``[<prompt tokens> RESPONSE_MARKER] <response tokens> <|criterion|> <criterion text> <|verdict|>``
(the prompt for a build that reads it, ``reads_prompt``); the answer is the next token,
``<|yes|>`` or ``<|no|>``, and P(yes) is read from those two logits. A verdict is *sampled* from P(yes)
(the judge is stochastic), and the score's spread comes from the same probabilities, so the judge's
confidence is its own. Grading (``learned_grading.py``) gives the numbers of one forward per question,
sharing what questions share: a response's tokens across its criteria, and a group's prompt across its
responses for a build that reads it.

Built by ``python -m setgrpo_bench build-judge [--profile NAME]`` (one thread, fixed seeds; a profile's
``build`` names its config), shipped inside the package under the key of the suite, the policy and the
build config (``judges.learned_paths``), with a card of its measured accuracy, calibration, AUROC and hack
table (``judge_card.json``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

from ..graders.grade import Grade
from ..graders.hacks import hack_table, hack_tasks
from ..graders.measure import label_measures
from ..policy import load_policy
from ..policy.embedded import builtin_names, install_build
from ..tasks.model import CATEGORIES, TaskInstance
from ..tasks.scoring import rubric_score
from .learned_grading import (
    ATTENTION,
    CRITERION,
    NO,
    VERDICT,
    YES,
    encode_question,
    left_padded,
    yes_by_shared_heads,
    yes_packed,
)
from .learned_labels import labelled_pairs, split_held_out
from .learned_paths import CARD, KEY_FILE, JudgeBuildConfig, build_key, judge_path


def _tokenizer() -> Any:
    tokenizer = load_policy("tiny").tokenizer
    tokenizer.add_special_tokens({"additional_special_tokens": [CRITERION, VERDICT, YES, NO]})
    return tokenizer


# ---------------------------------------------------------------- build


def _examples(pairs, tokenizer, config: JudgeBuildConfig, rng: np.random.Generator):
    """(ids, label, category, pair index) per criterion of every pair, shuffled."""
    out = []
    for p, (task, response) in enumerate(pairs):
        truth = task.true_verdicts(response)
        prompt = task.prompt_text if config.reads_prompt else None
        for criterion, met in zip(task.rubric, truth):
            out.append((encode_question(tokenizer, response, criterion.text, config.max_response_tokens, prompt,
                                config.max_prompt_tokens), bool(met), criterion.category, p))
    return [out[i] for i in rng.permutation(len(out))]


def _batch(rows, pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, mask, labels), left padded: the verdict position is the last column."""
    ids, mask = left_padded([r[0] for r in rows], pad)
    return ids, mask, torch.tensor([r[1] for r in rows])


def _yes_logits(model, ids: torch.Tensor, mask: torch.Tensor, answers: tuple[int, int]) -> torch.Tensor:
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1).logits[:, -1]
    return logits[:, list(answers)].float()  # (N, 2): yes, no


def build_judge(config: JudgeBuildConfig = JudgeBuildConfig(), *, force: bool = False, out: Path | None = None) -> Path:
    """Build (or reuse, shipped or cached) the learned judge; returns its folder."""
    target = Path(out) if out is not None else judge_path(config)
    key = build_key(config)
    if not force and (target / KEY_FILE).is_file() and (target / KEY_FILE).read_text().strip() == key:
        return target
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the order of float sums then does not depend on the cores: a rebuild is bit-identical
    try:
        with torch.random.fork_rng(devices=[]):
            model, tokenizer, card = _train_judge(config)
    finally:
        torch.set_num_threads(threads)
    return install_build(target, model, tokenizer, key, {CARD: json.dumps(card, indent=2, sort_keys=True) + "\n"})


def _train_judge(config: JudgeBuildConfig) -> tuple[GPT2LMHeadModel, Any, dict[str, Any]]:
    rng = np.random.default_rng(config.seed)
    tokenizer = _tokenizer()
    fresh, hacks = labelled_pairs(config)
    pairs = fresh + hacks
    examples = _examples(pairs, tokenizer, config, rng)
    held, train = split_held_out(examples, pairs, config, rng)
    held = [e for e in held if e[3] < len(fresh)]  # measured on fresh responses only: a hack is training data
    torch.manual_seed(config.seed)
    model = GPT2LMHeadModel(GPT2Config(
        vocab_size=len(tokenizer), n_positions=config.n_positions, n_embd=config.n_embd, n_layer=config.n_layer, n_head=config.n_head,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu_pytorch_tanh",
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    ))
    answers = (tokenizer.convert_tokens_to_ids(YES), tokenizer.convert_tokens_to_ids(NO))
    generator = torch.Generator().manual_seed(config.seed)
    steps = config.epochs * math.ceil(len(train) / config.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=config.lr, total_steps=steps, pct_start=0.05)
    model.train()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=False) as progress:
        bar = progress.add_task("learned judge", total=steps)
        for _ in range(config.epochs):
            order = torch.randperm(len(train), generator=generator).tolist()
            for start in range(0, len(order), config.batch_size):
                ids, mask, label = _batch([train[i] for i in order[start : start + config.batch_size]], tokenizer.pad_token_id)
                logits = _yes_logits(model, ids, mask, answers)
                loss = torch.nn.functional.cross_entropy(logits, (~label).long())  # class 0 = yes
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                progress.update(bar, advance=1, description=f"learned judge (loss {loss.item():.3f})")
    model.eval()
    return model, tokenizer, _card(model, tokenizer, held, answers, config, len(train))


@torch.no_grad()
def _card(model, tokenizer, held, answers, config: JudgeBuildConfig, n_train: int) -> dict[str, Any]:
    """The judge measured on held-out labels (per-category accuracy and error rates, calibration, AUROC)
    and its hack table (``graders/hacks.py``) on dev instances, verdicts sampled from its P(yes)."""
    probs = []
    for start in range(0, len(held), 256):
        ids, mask, _ = _batch(held[start : start + 256], tokenizer.pad_token_id)
        probs.append(torch.softmax(_yes_logits(model, ids, mask, answers), dim=-1)[:, 0].numpy())
    p = np.concatenate(probs)
    truth = np.array([h[1] for h in held])
    category = np.array([h[2] for h in held])
    rates = {}
    for cat in CATEGORIES:
        sel = category == cat
        met, unmet = sel & truth, sel & ~truth
        rates[cat] = {"labels": int(sel.sum()), "accuracy": float(np.mean((p[sel] > 0.5) == truth[sel])) if sel.any() else None,
                      "false_positive": float(p[unmet].mean()) if unmet.any() else 0.0,
                      "false_negative": float(1 - p[met].mean()) if met.any() else 0.0}
    rng = np.random.default_rng(config.seed)
    prompt_of = (lambda task: task.prompt_text) if config.reads_prompt else (lambda task: None)

    def judged(task: TaskInstance, responses: list[str], score_rule: str) -> np.ndarray:
        rows = [encode_question(tokenizer, r, c.text, config.max_response_tokens, prompt_of(task), config.max_prompt_tokens)
                for r in responses for c in task.rubric]
        ids, mask = left_padded(rows, tokenizer.pad_token_id)
        yes = torch.softmax(_yes_logits(model, ids, mask, answers), dim=-1)[:, 0].numpy().reshape(len(responses), -1)
        return rubric_score(task.points, rng.random(yes.shape) < yes, score_rule)[0]

    return {"config": asdict(config), "labels_train": n_train, "labels_held_out": len(held),
            "parameters": sum(t.numel() for t in model.parameters()), "categories": rates,
            **label_measures(p, truth),
            "hack_table": hack_table(judged, hack_tasks(builtin_names()), seed=config.seed)}


# ---------------------------------------------------------------- grading


PAIRS_PER_BLOCK = 512
"""(response, criterion) pairs graded in one forward: bounds the packed rows and the mask a call holds."""


class LearnedJudgeGrader:
    """Grades with the learned judge: P(yes) per (response, criterion), a verdict sampled from it.

    Every call draws exactly J uniforms per response from ``rng``, so grading a group at once equals
    grading its responses one by one from the same stream.
    """

    def __init__(self, path: str | Path | None = None, score_rule: str = "healthbench", *, temperature: float = 1.0,
                 cost: float = 1.0, name: str = "learned", build: Mapping[str, Any] | None = None) -> None:
        """``path``: a built judge's folder; by default the build ``build`` names (fields of
        ``JudgeBuildConfig``; none: the default build), built on first use."""
        self.path = Path(path) if path is not None else build_judge(JudgeBuildConfig.from_profile({"build": build}))
        self.model, self.tokenizer, self.card = _load_judge(self.path.resolve())
        self.limit = int(self.card["config"]["max_response_tokens"])
        self.reads_prompt = bool(self.card["config"].get("reads_prompt", False))
        self.prompt_limit = int(self.card["config"].get("max_prompt_tokens", 0))
        self.answers = (self.tokenizer.convert_tokens_to_ids(YES), self.tokenizer.convert_tokens_to_ids(NO))
        self.score_rule, self.temperature, self.cost_per_call, self.name = score_rule, temperature, cost, name

    @torch.no_grad()
    def yes_probabilities(self, responses: Sequence[str], criteria: Sequence[str], prompt: str = "") -> np.ndarray:
        """P(yes) of every (response, criterion), shape (G, J), in blocks of at most ``PAIRS_PER_BLOCK``
        pairs, so that memory is bounded however many responses a call holds. A training group (G·J of a
        hundred or so) is one block: its probabilities are those of a single forward. ``prompt``: the
        task's, read by a judge built to read it (ignored by one that is not)."""
        per_block = max(1, PAIRS_PER_BLOCK // max(len(criteria), 1))
        blocks = [self._yes_block(responses[i : i + per_block], criteria, prompt)
                  for i in range(0, len(responses), per_block)]
        return np.concatenate(blocks) if blocks else np.zeros((0, len(criteria)))

    def _yes_block(self, responses: Sequence[str], criteria: Sequence[str], prompt: str = "") -> np.ndarray:
        """P(yes) of one block (``learned_grading.py``): packed for a build that reads the prompt; by shared
        heads for one that does not, the way its recorded runs were graded, so that they re-execute bit
        for bit."""
        if self.reads_prompt:
            return yes_packed(self.model, self.tokenizer, self.answers, responses, criteria, limit=self.limit,
                              prompt=prompt, prompt_limit=self.prompt_limit, temperature=self.temperature)
        return yes_by_shared_heads(self.model, self.tokenizer, self.answers, responses, criteria, limit=self.limit,
                                   temperature=self.temperature)

    def grade(self, task: TaskInstance, response: str, rng: np.random.Generator) -> Grade:
        return self.grade_group(task, [response], rng)[0]

    def grade_group(self, task: TaskInstance, responses: Sequence[str], rng: np.random.Generator) -> list[Grade]:
        J = len(task.rubric)
        p = (self.yes_probabilities(list(responses), [c.text for c in task.rubric], task.prompt_text) if responses
             else np.zeros((0, J)))
        observed = rng.random((len(responses), J)) < p
        true = np.stack([task.true_verdicts(r) for r in responses]) if responses else np.zeros((0, J), bool)
        score, raw = rubric_score(task.points, observed, self.score_rule)
        true_score, true_raw = rubric_score(task.points, true, self.score_rule)
        points = task.points
        w = points / points[points > 0].sum() if self.score_rule == "healthbench" else np.abs(points) / np.abs(points).sum()
        spread = np.sqrt((w**2 * p * (1 - p)).sum(axis=-1))  # the judge's own uncertainty about its score
        return [Grade(score=float(score[i]), raw_score=float(raw[i]), verdicts=observed[i], true_score=float(true_score[i]),
                      true_raw_score=float(true_raw[i]), true_verdicts=true[i], valid=True, judge_calls=J,
                      spread=float(spread[i]), confidence=np.where(observed[i], p[i], 1 - p[i]))
                for i in range(len(responses))]

    def stated_rates(self, task: TaskInstance) -> tuple[np.ndarray, np.ndarray]:
        """The judge's error rates per criterion of ``task``, as measured on its held-out labels."""
        cats = self.card["categories"]
        return (np.array([cats[c]["false_positive"] for c in task.categories]),
                np.array([cats[c]["false_negative"] for c in task.categories]))

    def fingerprint(self) -> dict[str, Any]:
        return {"kind": "learned", "key": (self.path / KEY_FILE).read_text().strip(), "temperature": self.temperature}


@lru_cache(maxsize=4)
def _load_judge(path: Path) -> tuple[GPT2LMHeadModel, Any, dict[str, Any]]:
    """The judge's model, tokenizer and card, loaded once per process: every benchmark's env grades with
    the same (read-only) model, in the attention its grading was measured with (``ATTENTION``)."""
    card = json.loads((path / CARD).read_text(encoding="utf-8"))
    reads_prompt = bool(card["config"].get("reads_prompt", False))
    model = GPT2LMHeadModel.from_pretrained(path, attn_implementation=ATTENTION[reads_prompt]).eval()
    return model, AutoTokenizer.from_pretrained(path), card
