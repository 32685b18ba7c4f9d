"""``diagnose``: SetGRPO's promises measured on groups sampled from a policy, without training (DESIGN §9).

Groups are sampled once (observed grades, reference audits, true scores, K from the policy); then,
over repeated random splits of them:
  coverage   P(a ∈ C) on held-out groups vs 1 − α_a, for a = a* (reference) and a = a_true;
  risk       realised P(E = 1 | accepted) on held-out groups vs α, after LTT on a D2 split;
  violation  share of splits whose held-out risk (w.r.t. the reference) exceeds α, vs δ.
Held-out rates carry their own sampling noise, so the violation share slightly overstates the
LTT failure rate; Clopper–Pearson bars are those of one split's held-out count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure
from rich.console import Console
from rich.table import Table

from ..agents import setgrpo as sm
from ..agents.build import build_agent
from ..agents.coefficients import group_coefficients
from ..agents.config import SetGRPOSettings, TrainConfig
from ..agents.setgrpo import calibrate
from ..errors import ConfigError
from ..policy import load_policy
from .allocator import keep_freed_memory
from .audit import Auditor
from .collect import Collector
from .engines import make_engine
from .geometry import GradientGeometry
from .geometry_compare import compare_geometries
from .pooled import clopper_pearson
from .report import literal_text
from .rundir import write_json
from .seeds import torch_seed
from .suite import make_envs


@dataclass(frozen=True)
class GroupSample(sm.AuditedGroup):
    """One audited group: observed â, reference a*, scales σ, Gram K, the true a_true, and the Gram of the
    same responses under each other geometry asked for (name → K')."""

    a_true: np.ndarray = field(kw_only=True)
    alternatives: Mapping[str, np.ndarray] = field(default_factory=dict, kw_only=True)


def sample_groups(config: TrainConfig, n_groups: int, geometries: Sequence[str] = ()) -> list[GroupSample]:
    """Sample, grade, audit and measure ``n_groups`` groups from the config's policy (non-constant
    groups whose reference audit succeeded), exactly as a training step would, without training; with
    ``geometries``, K of the same responses under each of them too."""
    if config.coefficients.selector != "setgrpo":
        raise ConfigError("agent", config.run.agent, "a SetGRPO preset (selector: setgrpo)", "Try --agent setgrpo.")
    policy = load_policy(config.rollout.policy, config.rollout.device)
    envs = make_envs(config)
    torch.manual_seed(torch_seed(config.run.seed, "sampling"))  # the sampling stream a run starts from
    collector, auditor = Collector(config, make_engine(config, policy), envs), Auditor(config, envs)
    r, o = config.rollout, config.objective
    geometry, *others = (GradientGeometry(policy.model, spec, temperature=r.temperature, loss_type=o.loss_type,
                                          max_new_tokens=r.max_new_tokens) for spec in (config.setgrpo.geometry, *geometries))
    agent = build_agent(config)
    samples: list[GroupSample] = []
    while len(samples) < n_groups:
        batch = collector.collect(config.run.groups_per_step)
        groups = batch.groups
        needs = agent.needs(groups, auditor.rng, warmup=True)
        rows = {b: groups.rows(b)[valid] for b, valid in needs.grams.items()}
        grams = geometry.grams(groups.rollout, rows).grams
        alternatives = [other.grams(groups.rollout, rows).grams for other in others]
        audits = auditor.audit(groups, needs).grades
        for b in needs.audits:
            valid, a_hat, sigma = agent.observe(groups, b)
            a_ref = agent.reference_coefficients(audits[b], valid)
            if a_ref is None or len(samples) >= n_groups:
                continue
            a_true = group_coefficients("grpo", batch.true_scores[b][valid], std_floor=config.coefficients.std_floor)
            samples.append(GroupSample(a_hat, a_ref, sigma, grams[b], a_true=a_true,
                                       alternatives={spec: k[b] for spec, k in zip(geometries, alternatives)}))
    return samples


def _quantile(samples: Sequence[GroupSample], alpha_a: float, delta_a: float) -> float:
    scores = np.array([sm.conformal_score(s.a_hat, s.a_ref, s.sigma) for s in samples])
    return sm.conformal_quantile(scores, alpha_a, delta_a=delta_a or None)


def coverage_curve(samples: Sequence[GroupSample], alphas_a: Sequence[float], *, repeats: int, seed: int,
                   delta_a: float = 0.0) -> list[dict[str, float]]:
    """Mean held-out coverage of C (calibrated on a random half) for each α_a."""
    rng = np.random.default_rng(seed)
    n = len(samples)
    rows = []
    for alpha_a in alphas_a:
        ref, true = [], []
        for _ in range(repeats):
            order = rng.permutation(n)
            d1, test = [samples[i] for i in order[: n // 2]], [samples[i] for i in order[n // 2 :]]
            q = _quantile(d1, alpha_a, delta_a)
            ref.append(np.mean([sm.in_set(s.a_ref, s.a_hat, q * s.sigma) for s in test]))
            true.append(np.mean([sm.in_set(s.a_true, s.a_hat, q * s.sigma) for s in test]))
        n_test = n - n // 2
        rows.append({
            "alpha_a": alpha_a, "nominal": 1 - alpha_a, "n_test": n_test,
            "coverage_ref": float(np.mean(ref)), "coverage_true": float(np.mean(true)),
            "coverage_ref_ci": clopper_pearson(round(np.mean(ref) * n_test), n_test),
            "coverage_true_ci": clopper_pearson(round(np.mean(true) * n_test), n_test),
        })
    return rows


def risk_curve(samples: Sequence[GroupSample], alphas: Sequence[float], *, alpha_a: float, delta: float,
               repeats: int, seed: int, recovery: bool = True, delta_a: float = 0.0,
               levels: np.ndarray | None = None) -> list[dict[str, float]]:
    """Held-out conditional reversal risk of accepted groups after LTT, and the LTT violation share.
    Each split: q on D1, τ̂ by ``calibrate_threshold`` on D1 (grid at ``levels``) and D2, risk on the rest."""
    levels = sm.acceptance_levels() if levels is None else levels
    rng = np.random.default_rng(seed)
    n = len(samples)
    rows = []
    decide = sm.RememberedDecisions()  # q is an order statistic: its values repeat across splits

    for alpha in alphas:
        risk_ref, risk_true, accepted, violations = [], [], [], 0
        for _ in range(repeats):
            order = rng.permutation(n)
            d1, d2, test = ([samples[i] for i in part] for part in np.array_split(order, 3))
            q = _quantile(d1, alpha_a, delta_a)
            tau = sm.calibrate_threshold(d1, d2, q, alpha=alpha, delta=delta, levels=levels, recovery=recovery,
                                         decide=decide) if math.isfinite(q) else math.inf
            kept = [(d, s) for s in test
                    if (d := decide(s.gram, s.a_hat, q * s.sigma, recovery=recovery)).certifiable and d.score >= tau]
            accepted.append(len(kept) / len(test))
            if kept:
                r = float(np.mean([sm.reversal(d.coefficients, s.gram, s.a_ref) for d, s in kept]))
                risk_ref.append(r)
                risk_true.append(float(np.mean([sm.reversal(d.coefficients, s.gram, s.a_true) for d, s in kept])))
                violations += r > alpha
        rows.append({
            "alpha": alpha, "delta": delta, "acceptance": float(np.mean(accepted)),
            "risk_ref": float(np.mean(risk_ref)) if risk_ref else math.nan,
            "risk_true": float(np.mean(risk_true)) if risk_true else math.nan,
            "violation_rate": violations / repeats,
            "violation_ci": clopper_pearson(violations, repeats),
        })
    return rows


def compare_settings(samples: Sequence[GroupSample], variants: Mapping[str, SetGRPOSettings], *, repeats: int,
                     seed: int) -> list[dict[str, Any]]:
    """SetGRPO's gate under several settings on the same groups, as a training step meets it: each
    split draws D1 and D2 of ``window // 2`` groups each (a full window) and decides the rest (held
    out) with the (α_a, q, τ̂) the agent would calibrate. Per variant: the share of splits with
    nothing certified (τ̂ = ∞: a stalled step), the held-out acceptance, the chosen α_a, the reversal
    rates of accepted groups w.r.t. the reference and the true score, and the retained alignment with
    the true-score update, Σ_accepted cᵀK a_true / Σ_all âᵀK a_true (GRPO's own is 1)."""
    rng = np.random.default_rng(seed)
    decide = sm.RememberedDecisions()
    rows = []
    for name, s in variants.items():
        half = s.window // 2
        if 2 * half >= len(samples):
            raise ConfigError("groups", len(samples), f"more than the window of {name!r} ({2 * half} groups)",
                              "Sample more groups (--groups).")
        stalls, accepted, chosen, reversed_ref, reversed_true, kept_total, retained, grpo = 0, [], [], 0, 0, 0, 0.0, 0.0
        for _ in range(repeats):
            order = rng.permutation(len(samples))
            d1, d2, test = ([samples[i] for i in part] for part in (order[:half], order[half : 2 * half], order[2 * half :]))
            alpha_a, q, tau, _ = dataclasses.astuple(calibrate(s, d1, d2, decide=decide))
            stalls += math.isinf(tau) and tau > 0
            chosen.append(alpha_a)
            kept = [(sm.executed(d, g.a_hat, s.execute), g) for g in test
                    if (d := decide(g.gram, g.a_hat, q * g.sigma, recovery=s.recovery)).certifiable and d.score >= tau]
            accepted.append(len(kept) / len(test))
            kept_total += len(kept)
            reversed_ref += sum(sm.reversal(c, g.gram, g.a_ref) for c, g in kept)
            reversed_true += sum(sm.reversal(c, g.gram, g.a_true) for c, g in kept)
            retained += sum(float(c @ g.gram @ g.a_true) for c, g in kept)
            grpo += sum(float(g.a_hat @ g.gram @ g.a_true) for g in test)
        rows.append({
            "variant": name, "window": 2 * half, "stalled": stalls / repeats, "acceptance": float(np.mean(accepted)),
            "alpha_a": float(np.mean(chosen)), "reversal_ref": reversed_ref / kept_total if kept_total else math.nan,
            "reversal_true": reversed_true / kept_total if kept_total else math.nan,
            "retained_alignment": retained / grpo if grpo else math.nan,
        })
    return rows


@literal_text
def plot_diagnostics(result: dict[str, Any], path: Path) -> None:
    """Coverage vs 1 − α_a and risk vs α, with the identity line and Clopper–Pearson bars."""
    fig = Figure(figsize=(10, 4))  # no pyplot, no backend: savefig renders with Agg
    left, right = fig.subplots(1, 2)
    cov = result["coverage"]
    nominal = [r["nominal"] for r in cov]
    for key, label in (("coverage_ref", "w.r.t. reference a*"), ("coverage_true", "w.r.t. true a")):
        values = np.array([r[key] for r in cov])
        ci = np.array([r[f"{key}_ci"] for r in cov])
        left.errorbar(nominal, values, yerr=[values - ci[:, 0], ci[:, 1] - values], fmt="o-", capsize=3, label=label)
    left.plot([0, 1], [0, 1], "k--", lw=1, label="nominal")
    left.set(xlabel="1 − α_a", ylabel="held-out coverage of C", title="(a) joint coefficient set", xlim=(0.4, 1), ylim=(0, 1))
    left.legend(fontsize=8)
    risk = result["risk"]
    alphas = [r["alpha"] for r in risk]
    right.plot(alphas, [r["risk_ref"] for r in risk], "o-", label="risk w.r.t. reference")
    right.plot(alphas, [r["risk_true"] for r in risk], "s-", label="risk w.r.t. true score")
    right.plot(alphas, [r["acceptance"] for r in risk], "^:", label="acceptance")
    right.plot(alphas, [r["violation_rate"] for r in risk], "x-", label="LTT violation share (vs δ)")
    right.axhline(risk[0]["delta"], color="grey", lw=0.8, ls=":")
    right.plot([0, max(alphas)], [0, max(alphas)], "k--", lw=1, label="risk = α")
    right.set(xlabel="α", ylabel="rate", title="(c) risk-gated selection", ylim=(0, 1))
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def diagnose(config: TrainConfig, *, n_groups: int, alphas_a: Sequence[float], alphas: Sequence[float],
             repeats: int, out: str | Path, console: Console | None = None,
             compare: Mapping[str, SetGRPOSettings] | None = None, geometries: Sequence[str] = ()) -> dict[str, Any]:
    """Sample groups, measure coverage and risk curves (and, with ``compare``, the gate under each
    variant's settings; with ``geometries``, the decisions each changes against the exact K,
    ``geometry_compare.py``), write ``diagnose.json`` and ``diagnose.png``."""
    if n_groups < 12:
        raise ConfigError("groups", n_groups, "an integer >= 12", "Each of the three splits needs groups.")
    if config.run.eval_split != "dev":
        raise ConfigError("eval_split", config.run.eval_split, "'dev'", "diagnose chooses knobs, and knobs are chosen on "
                          "the dev split only: the test split is kept for a board's final numbers.")
    if geometries and n_groups <= 2 * (config.setgrpo.window // 2):
        raise ConfigError("groups", n_groups, f"more than the window ({2 * (config.setgrpo.window // 2)} groups)",
                          "Geometries are compared on the groups a full window leaves held out.")
    console = console or Console()
    keep_freed_memory()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with console.status(f"sampling {n_groups} audited groups from {config.rollout.policy}"):
        samples = sample_groups(config, n_groups, geometries)
    s = config.setgrpo
    result = {
        "agent": config.run.agent, "policy": config.rollout.policy, "noise": config.grading.noise,
        "reference": s.reference, "groups": len(samples), "repeats": repeats, "alpha_a": s.alpha_a, "delta": s.delta,
        "coverage": coverage_curve(samples, alphas_a, repeats=repeats, seed=config.run.seed, delta_a=s.delta_a),
        "risk": risk_curve(samples, alphas, alpha_a=s.alpha_a, delta=s.delta, repeats=repeats, seed=config.run.seed,
                           recovery=s.recovery, delta_a=s.delta_a, levels=sm.acceptance_levels(s.grid_start, s.grid_step)),
    }
    if compare:
        result["compare"] = compare_settings(samples, compare, repeats=repeats, seed=config.run.seed)
    if geometries:
        result["geometry"] = {"exact": s.geometry, "rows": compare_geometries(samples, s, repeats=repeats, seed=config.run.seed)}
    write_json(out / "diagnose.json", result)
    plot_diagnostics(result, out / "diagnose.png")
    console.print(_tables(result))
    if compare:
        console.print(_comparison(result))
    if geometries:
        console.print(_geometry_table(result["geometry"]["rows"], f"decisions against the exact K ({s.geometry}; "
                                     f"{len(samples)} groups, {repeats} splits, the rest of a full window held out)"))
    return result


def _comparison(result: dict[str, Any]) -> Table:
    table = Table(title=f"the gate under each variant ({result['groups']} groups, {result['repeats']} splits, "
                        "a full window of D1 + D2 each, the rest held out)")
    for column in ("variant", "window", "stalled", "acceptance", "α_a", "reversal ref", "reversal true", "retained"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for r in result["compare"]:
        table.add_row(r["variant"], str(r["window"]), f"{r['stalled']:.2f}", f"{r['acceptance']:.2f}", f"{r['alpha_a']:.2f}",
                      f"{r['reversal_ref']:.3f}", f"{r['reversal_true']:.3f}", f"{r['retained_alignment']:.2f}")
    return table


def _tables(result: dict[str, Any]) -> Table:
    table = Table(title=f"{result['agent']} on {result['groups']} groups ({result['noise']} judge, "
                        f"reference {result['reference']}, {result['repeats']} splits)")
    for column in ("level", "nominal", "reference", "true score", "acceptance", "LTT violations"):
        table.add_column(column, justify="right")
    for r in result["coverage"]:
        lo, hi = r["coverage_ref_ci"]
        table.add_row(f"α_a={r['alpha_a']:g}", f"cov ≥ {r['nominal']:.2f}", f"{r['coverage_ref']:.3f} [{lo:.2f}, {hi:.2f}]",
                      f"{r['coverage_true']:.3f}", "", "")
    for r in result["risk"]:
        table.add_row(f"α={r['alpha']:g}", f"risk ≤ {r['alpha']:.2f}", f"{r['risk_ref']:.3f}", f"{r['risk_true']:.3f}",
                      f"{r['acceptance']:.2f}", f"{r['violation_rate']:.3f} (δ={r['delta']:g})")
    return table


def _geometry_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    table = Table(title=title)
    for column in ("geometry", "agreement", "mean |Δλ*|", "acceptance", "reversal (exact K)", "reversal (true)"):
        table.add_column(column, justify="left" if column == "geometry" else "right")
    for r in rows:
        table.add_row(r["geometry"], f"{r['agreement']:.3f}", f"{r['lambda_delta']:.3f}", f"{r['acceptance']:.3f}",
                      f"{r['reversal']:.3f}", f"{r['reversal_true']:.3f}")
    return table
