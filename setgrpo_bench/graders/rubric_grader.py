"""The programmatic rubric grader with a noise profile: a simulated stochastic judge (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit, ndtri
from scipy.stats import norm

from ..errors import ConfigError
from ..tasks.model import TaskInstance
from ..tasks.response import ResponseView
from ..tasks.scoring import SCORE_RULES, rubric_score
from .bias import biased, has_feature
from .grade import Grade
from .noise import HERMITE, NoiseProfile, load_profile, persistent_uniforms


def _shifted(rate: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """sigmoid(logit(rate) + shift), exactly 0 where rate is 0."""
    with np.errstate(divide="ignore"):
        return np.where(rate > 0, expit(logit(np.maximum(rate, 1e-300)) + shift), 0.0)


class RubricGrader:
    """Grades with the rubric's programmatic checks, then corrupts the verdicts with a noise profile
    (and the score with the profile's injected bias, if it has one).

    Every call draws exactly ``(max_retries + 1) × (J + 2)`` uniforms per response from ``rng``
    (invalid-output draw, leniency draw, one error draw per criterion, per attempt), plus ``J + 1``
    more when the profile has gross errors (whether the call misreads, and one flip draw per
    criterion), so grading a group at once equals grading its responses one by one from the same
    stream.

    >>> from setgrpo_bench.envs import load_env_benchmark
    >>> task = load_env_benchmark("MedicationGuide").instance("eval", 0)
    >>> RubricGrader("clean").grade(task, "ok", np.random.default_rng(0)).valid
    True
    """

    def __init__(self, profile: str | Path | NoiseProfile = "realistic", score_rule: str = "healthbench") -> None:
        if score_rule not in SCORE_RULES:
            raise ConfigError("score_rule", score_rule, f"one of {list(SCORE_RULES)}")
        self.profile = load_profile(profile)
        self.score_rule = score_rule
        self.name = self.profile.name
        self.cost_per_call = self.profile.cost
        self.separation = confidence_separation(self.profile) if self.profile.confidence_auroc else 0.0

    def grade(self, task: TaskInstance, response: str, rng: np.random.Generator) -> Grade:
        """Grade one response."""
        return self.grade_group(task, [response], rng)[0]

    def grade_group(self, task: TaskInstance, responses: Sequence[str], rng: np.random.Generator) -> list[Grade]:
        """Grade the responses of one group (G responses to the same task) with numpy."""
        p = self.profile
        J, G, R = len(task.rubric), len(responses), p.max_retries + 1
        views = [ResponseView(r) for r in responses]
        true = np.stack([task.true_verdicts(v.text) for v in views]) if G else np.zeros((0, J), bool)
        extra = ((J + 1 if p.gross_error_rate > 0 else 0) + (J if p.repetition_missed > 0 else 0)
                 + (J + 1 if p.confidence_auroc > 0 else 0) + (1 if p.difficulty_sd > 0 else 0))
        u = rng.random((G, R, J + 2 + extra))
        n_words = np.array([len(v.words) for v in views], dtype=float)

        invalid = u[:, :, 0] < p.invalid_rate
        valid = ~invalid.all(axis=1)
        attempt = np.where(valid, np.argmax(~invalid, axis=1), R - 1)
        draws = u[np.arange(G), attempt]

        fp, fn = p.base_rates(task.categories)
        observed, gross_call, hard, tail = self._judged(task, views, true, draws, n_words, (fp, fn))
        score, raw = rubric_score(task.points, observed, self.score_rule)
        if p.bias:  # an injected bias: (s + α·b) / (1 + α), on the scale the judge reports
            score = biased(score, [has_feature(p.bias, v) for v in views], p.bias["strength"])
        if p.likert_levels:
            score = np.round(score * (p.likert_levels - 1)) / (p.likert_levels - 1)
        true_score, true_raw = rubric_score(task.points, true, self.score_rule)
        stated = np.where(observed, fp, fn)  # the stated rate of the error that would give each verdict
        if p.confidence_auroc > 0:
            confidence = reported_confidence(observed != true, draws[:, tail : tail + J + 1], p, gross_call, hard,
                                             self.separation)
            spread = self._spread(task, observed, 1 - confidence)
        else:
            confidence = 1 - stated
            spread = self._spread(task, observed)
        if p.bias:
            spread = spread / (1.0 + p.bias["strength"])  # the bias is certain: only the rescaled gold part varies
        calls = (attempt + 1) * J
        return [
            Grade(
                score=float(score[i]) if valid[i] else float("nan"),
                raw_score=float(raw[i]) if valid[i] else float("nan"),
                verdicts=observed[i], true_score=float(true_score[i]), true_raw_score=float(true_raw[i]),
                true_verdicts=true[i], valid=bool(valid[i]), judge_calls=int(calls[i]), spread=float(spread[i]),
                confidence=confidence[i],
            )
            for i in range(G)
        ]

    def _judged(self, task: TaskInstance, views: list[ResponseView], true: np.ndarray, draws: np.ndarray,
                n_words: np.ndarray, rates: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
        """The judge's verdicts from the true ones and a call's uniforms ``draws``: the stated error rates
        shifted by length, leniency and difficulty, persistent and fresh errors, gross misreadings and
        missed repetitions. Returns (verdicts, gross calls, difficulty, the next unused draw column)."""
        p, (fp, fn), (G, J) = self.profile, rates, true.shape
        rate = np.where(true, fn, fp)
        toward_met = np.where(true, -1.0, 1.0)
        length = p.length_shift(n_words)[:, None] * (_favour(task) if p.length_favours else 1.0) + _verbosity(p, task, views)
        leniency = p.leniency_sd * ndtri(np.clip(draws[:, 1], 1e-12, 1 - 1e-12))[:, None]
        hard = ndtri(np.clip(draws[:, -1:], 1e-12, 1 - 1e-12)) if p.difficulty_sd > 0 else np.zeros((G, 1))
        p_base = _shifted(rate, toward_met * length)
        p_call = _shifted(rate, toward_met * (length + leniency) + p.difficulty_sd * hard)  # difficulty: towards error
        anchor = p.persistent_share * p_base
        persistent = np.stack(
            [persistent_uniforms(p.judge_seed, v.text, tuple(c.id for c in task.rubric)) for v in views]
        ) < anchor if p.persistent_share > 0 and G else np.zeros((G, J), bool)
        fresh = draws[:, 2 : J + 2] < np.clip((p_call - anchor) / (1.0 - anchor), 0.0, 1.0)
        observed = true ^ (persistent | fresh)
        if p.gross_error_rate > 0:  # a misread response: most verdicts flipped at once
            gross = draws[:, J + 2] < p.gross_error_rate
            observed = np.where(gross[:, None], true ^ (draws[:, J + 3 : 2 * J + 3] < p.gross_flip), observed)
        gross_call = gross if p.gross_error_rate > 0 else np.zeros(G, bool)
        tail = J + 2 + (J + 1 if p.gross_error_rate > 0 else 0)
        if p.repetition_missed > 0:  # a repetition the judge does not notice
            repeats = np.array([type(c.check).__name__ == "Repetition" for c in task.rubric])
            missed = draws[:, tail : tail + J] < p.repetition_missed
            observed = np.where(repeats & true & missed, False, observed)
            tail += J
        return observed, gross_call, hard, tail

    def stated_rates(self, task: TaskInstance) -> tuple[np.ndarray, np.ndarray]:
        """The judge's stated (false-positive, false-negative) rate per criterion of ``task``:
        test-time knowledge a practitioner has of a calibrated judge."""
        return self.profile.base_rates(task.categories)

    def fingerprint(self) -> dict:
        """What defines this judge's behaviour, for suite hashes."""
        return self.profile.fingerprint()

    def _spread(self, task: TaskInstance, observed: np.ndarray, error: np.ndarray | None = None) -> np.ndarray:
        """Judge-side standard deviation of the score: √Σ w_j² r_j(1 − r_j), where r_j is the judge's
        probability that verdict j is wrong — one minus its reported confidence, or (by default) the
        stated rate of the error that would have produced the observed verdict."""
        fp, fn = self.profile.base_rates(task.categories)
        r = np.where(observed, fp, fn) if error is None else error
        points = task.points
        w = points / points[points > 0].sum() if self.score_rule == "healthbench" else np.abs(points) / np.abs(points).sum()
        return np.sqrt((w**2 * r * (1 - r)).sum(axis=-1))


def injected_bias(grader: Any) -> Mapping[str, Any]:
    """The injected bias of a simulated judge's profile (empty for none, and for any other grader)."""
    return grader.profile.bias if isinstance(grader, RubricGrader) else {}


DIFFICULTY_IN_CONFIDENCE = 1.5
"""How far a call's latent difficulty (in sd) lowers the latent confidence score of each of its verdicts."""


def confidence_separation(p: NoiseProfile) -> float:
    """d of the latent confidence score s = η − d·wrong − c·z (η ~ N(0, 1), z the call's difficulty,
    c = ``DIFFICULTY_IN_CONFIDENCE``) such that, pooled over verdicts, P(s of a right one > s of a wrong
    one) is the profile's ``confidence_auroc``:
        AUROC(d) = E[Φ((d + c(z_W − z_R))/√2)],  z_W ~ φ(z)·r̄(z), z_R ~ φ(z)·(1 − r̄(z)),
    r̄(z) the mean stated error rate at difficulty z (leniency integrated out, persistent errors kept). Wrong verdicts come
    from harder calls, so difficulty alone separates them a little; d supplies the rest."""
    nodes, weights = HERMITE
    rates = np.array([r for r in (*p.false_positive.values(), *p.false_negative.values()) if r > 0] or [0.1])
    shift = p.leniency_sd * nodes[:, None, None] + p.difficulty_sd * nodes[None, :, None]
    per_call = np.maximum(expit(logit(rates) + shift), p.persistent_share * rates)  # persistent errors ignore z
    error = (weights[:, None, None] * per_call).sum(0).mean(-1) / weights.sum()
    w_wrong, w_right = weights * error, weights * (1 - error)
    w_wrong, w_right = w_wrong / w_wrong.sum(), w_right / w_right.sum()
    c = DIFFICULTY_IN_CONFIDENCE if p.difficulty_sd else 0.0
    gap = c * (nodes[None, :] - nodes[:, None])  # [right node, wrong node]

    def pooled(d: float) -> float:
        return float(w_right @ norm.cdf((d + gap) / np.sqrt(2.0)) @ w_wrong)

    floor = pooled(0.0)
    if p.confidence_auroc <= floor:
        raise ConfigError("confidence_auroc", p.confidence_auroc, f"more than {floor:.3f}, what the difficulty "
                          f"(difficulty_sd {p.difficulty_sd}) of profile {p.name!r} gives on its own")
    return brentq(lambda d: pooled(d) - p.confidence_auroc, 0.0, 20.0)


def reported_confidence(wrong: np.ndarray, u: np.ndarray, p: NoiseProfile, gross: np.ndarray, hard: np.ndarray,
                        separation: float) -> np.ndarray:
    """Confidences that separate wrong verdicts from right ones with the profile's AUROC: a verdict's
    latent score s = η − d·wrong − c·z (``confidence_separation``; a hard call lowers the score of every
    verdict it makes, so a response's spread tells how wrong its score is likely to be). The reported
    confidence is P(right | s) for a binormal pair at that AUROC (right N(0, 1), wrong N(−√2Φ⁻¹(AUROC), 1),
    s standardised) under the profile's mean stated error rate r̄ — one prior for every verdict, so that
    the confidence stays a monotone function of the score and pooling criteria does not change the AUROC.
    A gross call is visible (every verdict scored as a wrong one's) with probability ``gross_visible``.
    ``u``: (G, J + 1) uniforms; ``hard``: (G, 1) standard-normal difficulties."""
    c = DIFFICULTY_IN_CONFIDENCE if p.difficulty_sd else 0.0
    visible = gross & (u[:, -1] < p.gross_visible)
    score = ndtri(np.clip(u[:, :-1], 1e-12, 1 - 1e-12)) - separation * (wrong | visible[:, None]) - c * hard
    score = score / np.sqrt(1.0 + c**2)
    d = np.sqrt(2.0) * ndtri(p.confidence_auroc)
    prior = float(np.mean([*p.false_positive.values(), *p.false_negative.values()]))
    right = (1 - prior) * np.exp(-0.5 * score**2)
    return right / (right + prior * np.exp(-0.5 * (score + d) ** 2))


_LIMITS = ("WordCount", "Count")
_STOP = frozenset("the a an and or of to in on for with at by from is are be it its this that your you".split())


def _favour(task: TaskInstance) -> np.ndarray:
    """+1 for a criterion (met is in the response's favour), −1 for a pitfall, shape (J,)."""
    return np.where(task.points > 0, 1.0, -1.0)


def _verbosity(p: NoiseProfile, task: TaskInstance, views: Sequence[ResponseView]) -> np.ndarray | float:
    """Logit shifts towards "met" of what verbose LLM judges miss or reward (shape (G, J)): a length or
    count limit looks kept the more the longer the response (``limit_blindness`` per doubling over the
    reference length), and a criterion looks met the more of its words the response restates
    (``keyword_credit`` × the share; pitfalls excluded)."""
    if not (p.limit_blindness or p.keyword_credit):
        return 0.0
    limits = np.array([type(c.check).__name__ in _LIMITS for c in task.rubric])
    doublings = np.maximum(np.log2(np.maximum([len(v.words) for v in views], 1) / p.reference_words), 0.0)
    shift = p.limit_blindness * doublings[:, None] * limits
    if p.keyword_credit:
        terms = [{w for w in ResponseView(c.text).words if len(w) > 2 and w not in _STOP} for c in task.rubric]
        said = [set(v.words) for v in views]
        share = np.array([[len(t & s) / len(t) if t and c.points > 0 else 0.0 for t, c in zip(terms, task.rubric)]
                          for s in said])
        shift = shift + p.keyword_credit * share
    return shift
