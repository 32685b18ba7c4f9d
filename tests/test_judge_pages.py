"""``judges pages``: one generated page per judge — the profile's words and fields, a row per measurement
file, the hack table, a learned judge's card — and the shipped pages are the ones the measurements give."""

import json
from pathlib import Path

import pytest

from setgrpo_bench.errors import UnknownNameError
from setgrpo_bench.harness.judge_pages import (
    judge_page,
    samples_label,
    write_judge_pages,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "judges"


def _measured(label, rms, perfect_wins=True):
    hacks = {"perfect answer": {"judge_score": 0.7, "true_score": 0.99}, "keyword list": {"judge_score": 0.8 - 0.2 * perfect_wins,
                                                                                         "true_score": 0.3}}
    row = {"error_rms": rms, "verdict_error": 0.2, "confidence_auroc": "nan", "true_spearman": 0.5, "length_effect": 0.01,
           "labels": {"accuracy": 0.81, "ece": 0.05, "auroc": 0.88},
           "hack_table": {"tasks": 40, "hacks": hacks, "perfect_wins": perfect_wins}}
    return {"policy": "a,b", "seed": 0, "prompts": 16, "group_size": 8, "label": label,
            "profiles": {"realistic": row, "learned": dict(row, error_rms=rms + 0.1)}}


def test_a_page_has_the_profile_a_row_per_measurement_the_hack_table_and_a_learned_judges_card():
    first, second = _measured("the initial policy", 0.123, perfect_wins=False), _measured("trained ones", 0.456)
    assert samples_label(first) == "the initial policy: 16 × 8 samples of each of 2 policies (seed 0)"
    page = judge_page("realistic", [first, second])
    assert page.startswith("# `realistic`\n") and "name: realistic" in page and "false_positive:" in page
    assert "| the initial policy: 16 × 8" in page and "| 0.123 | 0.200 | — | 0.500 | 0.810 | 0.050 | 0.880 | +0.010 |" in page
    assert "| trained ones: 16 × 8" in page and "0.456" in page
    assert "does **not** outscore every hack" in page and page.index("| keyword list |") < page.index("| perfect answer |")
    assert "## Card" not in page
    learned = judge_page("learned", [second])
    card = json.loads((Path(__file__).resolve().parents[1] / "setgrpo_bench/judges/learned_judge/judge_card.json").read_text())
    assert "## Card" in learned and f"Held-out accuracy **{card['accuracy']:.3f}**" in learned and "| pitfall |" in learned
    assert "a perfect answer outscores every hack" in learned and "0.556" in learned
    with pytest.raises(UnknownNameError, match="realistic"):
        judge_page("no-such-judge", [first])


def test_the_shipped_judge_pages_are_generated_from_the_shipped_measurements(tmp_path):
    """Regenerate with ``python -m setgrpo_bench judges pages docs/judges/measured/*.json --out docs/judges``."""
    measured = sorted((DOCS / "measured").glob("*.json"))
    written = write_judge_pages(measured, tmp_path)
    assert {p.name for p in written} == {p.name for p in DOCS.glob("*.md")}
    for page in written:
        assert page.read_text() == (DOCS / page.name).read_text(), f"docs/judges/{page.name} is stale"
