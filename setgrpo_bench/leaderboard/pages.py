"""The board's two pages, Markdown and a self-contained HTML page (tables and figures inline, no scripts,
no network), from the tables, verdicts and figures (DESIGN §10)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .figures import plots
from .layout import FINDINGS
from .tables import (
    APART,
    DRIFT,
    HACKING,
    HELD_OUT,
    apart_frame,
    columns,
    controls_of,
    drift_frame,
    entry_provenance,
    hacking_frame,
    held_out_frame,
    judge_table,
    protocols_of,
    provenance,
)
from .verdicts import (
    BASELINE,
    VERDICT_RULE,
    checks_display,
    noise_order,
    verdict_display,
    verdict_heading,
    verdicts,
)


def no_verdicts(frame: pd.DataFrame) -> str:
    """Why a board shows no verdict: no baseline to compare with yet, or entries without their seeds' scores."""
    if BASELINE not in set(frame["agent"]):
        return f"No verdicts against the baseline yet: {BASELINE} is not on the board."
    return ("No verdicts against the baseline: they need each seed's macro score under the same judge as the "
            "baseline's, which these entries do not hold (an archived board kept its seeds' means only).")


def _sections(submissions: list[dict[str, Any]]) -> list[tuple[str, str, pd.DataFrame]]:
    """The sections after the judge tables, each (title, what it shows, its table; empty when no entry holds it)."""
    return [("Held-out curves", HELD_OUT, held_out_frame(submissions)),
            ("SetGRPO's certificate as the policy moves", DRIFT, drift_frame(submissions)),
            ("Reward hacking", HACKING, hacking_frame(submissions))]


def _markdown_table(shown: pd.DataFrame) -> list[str]:
    return (["| " + " | ".join(shown.columns) + " |", "|" + "|".join("---" for _ in shown.columns) + "|"]
            + ["| " + " | ".join(row) + " |" for row in shown.astype(str).values.tolist()])


def markdown(frame: pd.DataFrame, rejected: list[tuple[str, str]], submissions: list[dict[str, Any]], *,
             note: str | None = None, earlier: Sequence[str] = (), missing: Sequence[str] = (),
             apart: Sequence[dict[str, Any]] = (), findings: bool = False) -> str:
    """The board as Markdown; ``note`` (an archived board's) opens it, ``earlier`` boards are linked. It
    opens with where each method wins, ties or loses against GRPO, then one table per judge profile, the
    held-out curves, SetGRPO's reversal by block of steps and the hacking anatomy (entries that logged
    them), the column definitions, the protocol with the cells it still lacks, and each entry's provenance."""
    lines = ["# setgrpo_bench leaderboard", ""]
    if note:
        lines += [note, ""]
    if findings:
        lines += [f"What the board shows, written by hand: [{FINDINGS}]({FINDINGS}).", ""]
    if earlier:
        lines += ["Earlier boards: " + ", ".join(f"[{name}]({name}/README.md)" for name in earlier), ""]
    if frame.empty:
        lines.append("No submissions yet.")
    else:
        profiles = sorted(set(frame["noise"]), key=noise_order)
        table, checks = verdicts(frame, controls_of(submissions))
        if not table.empty:
            lines += [f"## {verdict_heading(table)}", "", VERDICT_RULE, "",
                      *_markdown_table(verdict_display(table)), "", "Equal seed variances under each judge:", "",
                      *_markdown_table(checks_display(checks)), ""]
        else:
            lines += [no_verdicts(frame), ""]
        for profile in profiles:
            lines += [f"## Judge profile `{profile}`", "", *_markdown_table(judge_table(frame[frame["noise"] == profile])), ""]
        for title, text, table in _sections(submissions):
            if not table.empty:
                lines += [f"## {title}", "", text, "", *_markdown_table(table), ""]
        lines += ["## Columns", "", *(f"- **{k}**: {v}" for k, v in columns(submissions).items()),
                  "- the domain columns: the mean true score of the domain's benchmarks", ""]
        if protocols := protocols_of(submissions):
            lines += ["## Protocol", "", *(f"- {p}" for p in protocols), ""]
        if missing:
            lines += [f"Not yet on the board ({len(missing)} cells): " + "; ".join(missing) + ".", ""]
        lines += ["## Provenance", "", *_markdown_table(entry_provenance(submissions))]
        if note := provenance(submissions):
            lines += ["", f"**{note}**"]
    if apart:
        lines += ["", "## Not ranked: runs not on this board", "", APART, "", *_markdown_table(apart_frame(list(apart)))]
    if rejected:
        lines += ["", "## Rejected files", ""] + [f"- `{f}`: {reason}" for f, reason in rejected]
    return "\n".join(lines) + "\n"


def html_page(frame: pd.DataFrame, rejected: list[tuple[str, str]], submissions: list[dict[str, Any]], *,
              note: str | None = None, earlier: Sequence[str] = (), missing: Sequence[str] = (),
              apart: Sequence[dict[str, Any]] = (), findings: bool = False) -> str:
    """A self-contained page: the table and plots inline, no scripts, no network."""
    body = ["<h1>setgrpo_bench leaderboard</h1>"]
    if note:
        body += [f"<p class='archived'>{html.escape(paragraph)}</p>" for paragraph in note.split("\n\n")]
    if findings:
        body.append(f"<p>What the board shows, written by hand: <a href='{FINDINGS}'>{FINDINGS}</a>.</p>")
    if earlier:
        body.append("<p>Earlier boards: " + ", ".join(
            f"<a href='{html.escape(name)}/index.html'>{html.escape(name)}</a>" for name in earlier) + "</p>")
    if frame.empty:
        body.append("<p>No submissions yet.</p>")
    else:
        if note := provenance(submissions):
            body.append(f"<p><strong>{html.escape(note)}</strong></p>")
        figures = plots(frame, submissions)
        figure = lambda key: f'<figure><img id="plot-{key}" alt="{key}" src="data:image/png;base64,{figures.pop(key)}"></figure>'
        table, checks = verdicts(frame, controls_of(submissions))
        if not table.empty:
            body.append(f"<h2>{html.escape(verdict_heading(table))}</h2><p>{html.escape(VERDICT_RULE)}</p>"
                        + verdict_display(table).to_html(index=False, escape=True, classes="board", border=0)
                        + "<p>Equal seed variances under each judge:</p>"
                        + checks_display(checks).to_html(index=False, escape=True, classes="board", border=0))
        else:
            body.append(f"<p>{html.escape(no_verdicts(frame))}</p>")
        if "robustness" in figures:
            body.append(figure("robustness"))
        profiles = sorted(set(frame["noise"]), key=noise_order)
        for profile in profiles:
            body.append(f"<h2>Judge profile <code>{html.escape(profile)}</code></h2>")
            body.append(judge_table(frame[frame["noise"] == profile]).to_html(index=False, escape=True, classes="board", border=0))
        body += [figure(key) for key in list(figures)]
        body += [f"<h2>{html.escape(title)}</h2><p>{html.escape(text)}</p>"
                 + table.to_html(index=False, escape=True, classes="board", border=0)
                 for title, text, table in _sections(submissions) if not table.empty]
        body.append("<h2>Columns</h2><dl>" + "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>"
                                                      for k, v in columns(submissions).items()) + "</dl>")
        if protocols := protocols_of(submissions):
            body.append("<h2>Protocol</h2><ul>" + "".join(f"<li>{html.escape(p)}</li>" for p in protocols) + "</ul>")
        if missing:
            body.append(f"<p id='missing'>Not yet on the board ({len(missing)} cells): {html.escape('; '.join(missing))}.</p>")
        body.append("<h2>Provenance</h2>" + entry_provenance(submissions).to_html(index=False, escape=True, classes="board",
                                                                                 border=0))
    if apart:
        body.append(f"<h2 id='apart'>Not ranked: runs not on this board</h2><p>{html.escape(APART)}</p>"
                    + apart_frame(list(apart)).to_html(index=False, escape=True, classes="board", border=0))
    if rejected:
        body.append("<h2>Rejected files</h2><ul>" + "".join(
            f"<li><code>{html.escape(f)}</code>: {html.escape(r)}</li>" for f, r in rejected) + "</ul>")
    style = ("body{font-family:sans-serif;margin:2em}table.board{border-collapse:collapse;font-size:13px}"
             "table.board td,table.board th{padding:4px 8px;border-bottom:1px solid #ddd;text-align:right}"
             "img{max-width:100%}dt{font-weight:bold}dd{margin:0 0 .5em 1.5em}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>setgrpo_bench leaderboard</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
