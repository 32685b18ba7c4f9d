"""``judges pages``: one documentation page per judge profile, written from what was measured (DESIGN §4).

A page holds the profile's own words (its YAML's opening comment) and fields, every ``judges measure``
result given that covers it (one row per file: whose samples it graded), the judge's hack table, and,
for a learned judge, the card of its build (held-out accuracy per category, calibration, AUROC). The
pages are generated, never edited: ``docs/judges/`` is rewritten by

    python -m setgrpo_bench judges pages docs/judges/measured/*.json --out docs/judges
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..graders.judge_profiles import judge_profile
from ..graders.profile_files import profile_files
from ..tasks.yamlio import load_yaml
from .judges import flat_measures

MEASURES = {"error_rms": "error RMS", "verdict_error": "verdicts wrong", "confidence_auroc": "confidence AUROC",
            "true_spearman": "Spearman(judge, true)", "label_accuracy": "P(yes) accuracy", "label_ece": "ECE",
            "label_auroc": "P(yes) AUROC", "length_effect": "judge − true per 2× length",
            "feature_rate": "feature rate", "bias_share": "bias share"}


def samples_label(measured: Mapping[str, Any]) -> str:
    """Whose responses a ``judges measure`` result graded, in words."""
    policies = str(measured["policy"]).split(",")
    who = f"`{policies[0]}`" if len(policies) == 1 else f"each of {len(policies)} policies"
    counts = f"{measured['prompts']} × {measured['group_size']} samples of {who} (seed {measured['seed']})"
    return f"{measured['label']}: {counts}" if measured.get("label") else counts


def judge_page(name: str, measured: Sequence[Mapping[str, Any]]) -> str:
    """The page of profile ``name`` from ``measured`` (``judges measure`` results; those without it are skipped)."""
    path = _profile_file(name)
    text = path.read_text(encoding="utf-8")
    intro = " ".join(line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#"))
    fields = "\n".join(line for line in text.splitlines() if line.strip() and not line.startswith("#"))
    lines = [f"# `{name}`", "", intro or load_yaml(path)[0].get("description", ""), "",
             f"Profile (`graders/{path.name}`):", "", "```yaml", fields, "```", ""]
    rows = [(samples_label(m), m["profiles"][name]) for m in measured if name in m["profiles"]]
    if rows:
        flat = [(label, flat_measures(row)) for label, row in rows]
        keys = [k for k in MEASURES if any(k in row for _, row in flat)]
        lines += ["## Measured", "", "`python -m setgrpo_bench judges measure` (see the judges overview for each column):", "",
                  "| samples | " + " | ".join(MEASURES[k] for k in keys) + " |", "| --- |" + " --- |" * len(keys)]
        lines += [f"| {label} | " + " | ".join(_number(row.get(k), k) for k in keys) + " |" for label, row in flat]
        lines += [""]
        lines += _hack_lines(rows[0])
    card = _card(name)
    if card:
        lines += _card_lines(card)
    return "\n".join(lines).rstrip() + "\n"


def write_judge_pages(measured_files: Sequence[str | Path], out: str | Path) -> list[Path]:
    """One page per profile any of ``measured_files`` covers, written to ``out/<name>.md``."""
    measured = [json.loads(Path(f).read_text(encoding="utf-8")) for f in measured_files]
    names = sorted({n for m in measured for n in m["profiles"]})
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        (out / f"{name}.md").write_text(judge_page(name, measured), encoding="utf-8")
        written.append(out / f"{name}.md")
    return written


def _profile_file(name: str) -> Path:
    path = profile_files().get(name)
    if path is not None:
        return path
    judge_profile(name)  # an unknown name: the error lists the known ones
    raise FileNotFoundError(f"judge profile {name!r} has no YAML file in the catalog")


def _number(value: Any, key: str) -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):  # absent, or NaN (JSON keeps it as a string)
        return "—"
    return f"{value:+.3f}" if key == "length_effect" else f"{value:.3f}"


def _hack_lines(first: tuple[str, Mapping[str, Any]]) -> list[str]:
    label, row = first
    if "hack_table" not in row:
        return []
    table = row["hack_table"]
    order = sorted(table["hacks"], key=lambda k: -table["hacks"][k]["judge_score"])
    verdict = "outscores every hack" if table["perfect_wins"] else "does **not** outscore every hack"
    return ["## Hack table", "", (f"Responses written to fool a judge (`graders/hacks.py`) on {table['tasks']} dev instances "
                                  f"(with {label}): a perfect answer {verdict}."), "", "| response | judge score | true score |", "| --- | --- | --- |",
            *(f"| {k} | {table['hacks'][k]['judge_score']:.3f} | {table['hacks'][k]['true_score']:.3f} |" for k in order), ""]


def _card(name: str) -> dict[str, Any] | None:
    """The card of a learned profile's build (None for any other judge, or a build not made yet)."""
    profile = judge_profile(name)
    if not profile.model_backed or profile.source.get("kind") != "learned":
        return None
    from ..judges.learned_paths import CARD, JudgeBuildConfig, judge_path

    path = judge_path(JudgeBuildConfig.from_profile(profile.source)) / CARD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _card_lines(card: Mapping[str, Any]) -> list[str]:
    c = card["config"]
    lines = ["## Card", "", (f"The build's own measurements (`judge_card.json`): {card['parameters']:,} parameters "
                             f"({c['n_layer']} blocks of {c['n_embd']}), {card['labels_train']:,} training labels, "
                             f"{card['labels_held_out']:,} held out {'by task' if c.get('split_by_task') else 'by label'}; "
                             f"{'reads the prompt' if c.get('reads_prompt') else 'does not read the prompt'}."), "",
             f"Held-out accuracy **{card['accuracy']:.3f}**, ECE {card['ece']:.3f}"
             + (f", AUROC {card['auroc']:.3f}" if "auroc" in card else "") + ".", "",
             "| category | labels | accuracy | false positive | false negative |", "| --- | --- | --- | --- | --- |"]
    for category, r in card["categories"].items():
        lines.append(f"| {category} | {r['labels']} | {_number(r['accuracy'], '')} | {r['false_positive']:.3f} | "
                     f"{r['false_negative']:.3f} |")
    return [*lines, ""]
