"""Statistical tests of the simulated judge: observed error rates vs the profile, at a declared level."""

import numpy as np
import pytest
from conftest import binomial_ok

from setgrpo_bench.errors import ConfigError, SpecError, UnknownNameError
from setgrpo_bench.graders import (
    NoiseProfile,
    RubricGrader,
    load_profile,
    make_reference,
    profile_names,
)
from setgrpo_bench.tasks import CATEGORIES, Criterion, TaskInstance

N_GRADINGS = 20_000


def _probe_task() -> TaskInstance:
    """Per category, one criterion truly met ("yes<category>") and one truly not met ("no<category>")."""
    rubric = []
    for cat in CATEGORIES:
        points = -1 if cat == "pitfall" else 1
        for truth in ("yes", "no"):
            rubric.append(Criterion(f"{truth}_{cat}", f"{truth} {cat}", points, cat, check=None))
    rubric = [
        Criterion(c.id, c.text, c.points, c.category, check=_kw(f"{c.id.split('_')[0]}{c.category}"))
        for c in rubric
    ]
    return TaskInstance("probe", "probe prompt", tuple(rubric))


def _kw(term):
    from setgrpo_bench.tasks.checks import build_check

    return build_check({"type": "keyword_any", "terms": [term]})


def _responses(n, words, start=0):
    """Distinct responses of exactly ``words`` words that meet every "yes" criterion."""
    fixed = [f"yes{c}" for c in CATEGORIES]
    return [" ".join(fixed + [f"w{start + i}"] + ["pad"] * (words - len(fixed) - 1)) for i in range(n)]


def _error_counts(profile, words, seed=0):
    task = _probe_task()
    grader = RubricGrader(profile)
    grades = grader.grade_group(task, _responses(N_GRADINGS, words), np.random.default_rng(seed))
    errors = np.stack([g.verdicts != g.true_verdicts for g in grades])
    return task, errors


@pytest.mark.parametrize("name", ["clean", "mild", "realistic", "harsh", "sparse", "expert"])
def test_observed_error_rates_match_profile(name):
    profile = load_profile(name)
    task, errors = _error_counts(name, profile.reference_words)
    assert (task.true_verdicts(_responses(1, profile.reference_words)[0]) == [True, False] * 4).all()
    for j, criterion in enumerate(task.rubric):
        truly_met = criterion.id.startswith("yes")
        table = profile.false_negative if truly_met else profile.false_positive
        expected = profile.expected_error_rate(table[criterion.category], toward_met=not truly_met)
        k = int(errors[:, j].sum())
        # 8 cells per profile: Bonferroni-adjusted two-sided level 1e-4 / 8
        assert binomial_ok(k, N_GRADINGS, expected, alpha=1e-4 / 8), (criterion.id, k / N_GRADINGS, expected)


def test_leniency_free_rates_equal_the_stated_rates():
    profile = NoiseProfile(
        "flat", false_positive=dict.fromkeys(CATEGORIES, 0.1), false_negative=dict.fromkeys(CATEGORIES, 0.2)
    )
    assert profile.expected_error_rate(0.1, toward_met=True) == pytest.approx(0.1)
    task, errors = _error_counts(profile, profile.reference_words)
    assert binomial_ok(int(errors[:, 0].sum()), N_GRADINGS, 0.2)  # yes_essential: false negatives
    assert binomial_ok(int(errors[:, 1].sum()), N_GRADINGS, 0.1)  # no_essential: false positives


def test_length_bias_makes_long_answers_look_better():
    profile = load_profile("harsh")
    task, errors = _error_counts("harsh", 4 * profile.reference_words, seed=1)
    j = [c.id for c in task.rubric].index("no_important")
    expected = profile.expected_error_rate(profile.false_positive["important"], 4 * profile.reference_words)
    assert expected > profile.expected_error_rate(profile.false_positive["important"])
    assert binomial_ok(int(errors[:, j].sum()), N_GRADINGS, expected, alpha=1e-4)


def test_clean_profile_is_exactly_the_true_score(medication, rng):
    grader = RubricGrader("clean")
    for i in range(20):
        task = medication.instance("eval", i)
        for grade in grader.grade_group(task, medication.examples(task, rng, 6), rng):
            assert grade.valid and grade.score == grade.true_score and (grade.verdicts == grade.true_verdicts).all()


def test_persistent_errors_repeat_on_the_same_response():
    """Two calls on the same response err together far more often than independence allows."""
    task = _probe_task()
    grader = RubricGrader("realistic")
    responses = _responses(N_GRADINGS, 50)
    first = np.stack([g.verdicts != g.true_verdicts for g in grader.grade_group(task, responses, np.random.default_rng(1))])
    second = np.stack([g.verdicts != g.true_verdicts for g in grader.grade_group(task, responses, np.random.default_rng(2))])
    j = [c.id for c in task.rubric].index("yes_pitfall")
    p1, p2 = first[:, j].mean(), second[:, j].mean()
    both = int((first[:, j] & second[:, j]).sum())
    assert not binomial_ok(both, N_GRADINGS, p1 * p2, alpha=1e-6) and both > N_GRADINGS * p1 * p2


def test_group_grading_equals_one_by_one(medication):
    grader = RubricGrader("harsh")
    for i in range(10):
        task = medication.instance("train", i)
        responses = medication.examples(task, np.random.default_rng(i), 8)
        batched = grader.grade_group(task, responses, np.random.default_rng(100 + i))
        one_rng = np.random.default_rng(100 + i)
        single = [grader.grade(task, r, one_rng) for r in responses]
        for a, b in zip(batched, single):
            assert (a.verdicts == b.verdicts).all()
            assert a.valid == b.valid and a.judge_calls == b.judge_calls
            assert np.array_equal([a.score, a.true_score, a.spread], [b.score, b.true_score, b.spread], equal_nan=True)


def test_invalid_outputs_are_invalid_not_zero():
    profile = NoiseProfile(
        "flaky", false_positive=dict.fromkeys(CATEGORIES, 0.0), false_negative=dict.fromkeys(CATEGORIES, 0.0),
        invalid_rate=0.4, max_retries=1,
    )
    task = _probe_task()
    grades = RubricGrader(profile).grade_group(task, _responses(5000, 20), np.random.default_rng(0))
    invalid = [g for g in grades if not g.valid]
    assert binomial_ok(len(invalid), 5000, 0.4**2)  # both attempts failed
    assert all(np.isnan(g.score) and g.judge_calls == 2 * len(task.rubric) for g in invalid)
    retried = [g for g in grades if g.valid and g.judge_calls == 2 * len(task.rubric)]
    assert binomial_ok(len(retried), 5000, 0.4 * 0.6)


def test_likert_quantisation():
    grades = RubricGrader("harsh").grade_group(_probe_task(), _responses(500, 50), np.random.default_rng(0))
    scores = np.array([g.score for g in grades if g.valid])
    assert set(np.round(scores * 4, 9)) <= {0.0, 1.0, 2.0, 3.0, 4.0}


def test_consensus_reference_is_less_noisy_than_one_call(medication, rng):
    grader = RubricGrader("realistic")
    reference = make_reference("consensus:5", grader)
    single, consensus = [], []
    for i in range(60):
        task = medication.instance("calib", i)
        responses = medication.examples(task, rng, 8)
        single += [abs(g.score - g.true_score) for g in grader.grade_group(task, responses, rng) if g.valid]
        graded = reference.grade_group(task, responses, rng)
        consensus += [abs(g.score - g.true_score) for g in graded]
        assert all(g.judge_calls >= 5 * len(task.rubric) for g in graded)
    assert np.mean(consensus) < 0.8 * np.mean(single)
    assert isinstance(make_reference("profile:mild", grader), RubricGrader)


def test_profiles_in_catalog_and_bad_profiles():
    assert {"clean", "mild", "realistic", "harsh"} <= set(profile_names())
    with pytest.raises(UnknownNameError, match="Did you mean 'realistic'"):
        load_profile("realistc")
    with pytest.raises(SpecError, match=r"false_positive.essential: expected a rate in \[0, 0.5\)"):
        NoiseProfile("bad", false_positive={**dict.fromkeys(CATEGORIES, 0.1), "essential": 0.7},
                     false_negative=dict.fromkeys(CATEGORIES, 0.1))


def test_a_later_catalogs_profile_file_overrides_a_name_for_every_reader(tmp_path, monkeypatch):
    """One scan decides which file a name means: a user's ``clean`` of another kind replaces the built-in
    noise profile everywhere, and a user's new noise profile joins the noise profiles only."""
    from setgrpo_bench.catalog import ENV_VAR
    from setgrpo_bench.graders.llm_judge import judge_profile_names
    from setgrpo_bench.graders.profile_files import profile_files

    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "mine.yaml").write_text("name: clean\nkind: judge\n")
    (tmp_path / "graders" / "calm.yaml").write_text(profile_files()["clean"].read_text().replace("name: clean", "name: calm"))
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert profile_files()["clean"] == tmp_path / "graders" / "mine.yaml"
    assert "clean" in judge_profile_names() and "clean" not in profile_names()
    assert "calm" in profile_names() and "calm" not in judge_profile_names()
    assert profile_files({"noise"})["calm"] == tmp_path / "graders" / "calm.yaml"


def test_bad_profile_file_names_file_and_line(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nfalse_positive: {essential: 0.1, important: 0.1, optional: 0.1, pitfall: 0.1}\n"
        "false_negative: {essential: 0.1, important: 0.1, optional: 0.1, pitfall: 0.1}\nleniency_sd: lots\n"
    )
    with pytest.raises(SpecError, match=r"mine.yaml:4: leniency_sd: expected a number"):
        load_profile(path)


def test_gross_errors_flip_most_verdicts_of_a_few_calls():
    """Under ``sparse``, the share of calls with at least 6 of 8 verdicts wrong is the gross-error rate
    times the chance that ≥ 6 of 8 flip (ordinary errors almost never do that)."""
    from scipy.stats import binom

    profile = load_profile("sparse")
    _, errors = _error_counts("sparse", profile.reference_words, seed=2)
    expected = profile.gross_error_rate * binom.sf(5, 8, profile.gross_flip)
    assert binomial_ok(int((errors.sum(axis=1) >= 6).sum()), N_GRADINGS, expected, alpha=1e-3)


def test_the_expert_references_persistent_errors_are_independent_of_the_judges():
    """Persistent errors are fixed per (judge, response, criterion); the expert's are drawn with its
    own seed, so they coincide with the realistic judge's no more often than chance: the count of
    cells where both err persistently is Binomial(n, p_judge · p_expert)."""
    from setgrpo_bench.graders.noise import persistent_uniforms

    judge, expert = load_profile("realistic"), load_profile("expert")
    ids = tuple(f"c{j}" for j in range(10))
    responses = [f"response {i}" for i in range(4_000)]
    p_judge, p_expert = 0.3, 0.3  # thresholds on the persistent draws: the events' probabilities
    a = np.stack([persistent_uniforms(judge.judge_seed, r, ids) for r in responses]) < p_judge
    b = np.stack([persistent_uniforms(expert.judge_seed, r, ids) for r in responses]) < p_expert
    n = a.size
    assert binomial_ok(int(a.sum()), n, p_judge) and binomial_ok(int(b.sum()), n, p_expert)
    assert binomial_ok(int((a & b).sum()), n, p_judge * p_expert)
    same = np.stack([persistent_uniforms(judge.judge_seed, r, ids) for r in responses]) < p_judge
    assert (same == a).all()  # the same judge repeats its persistent errors exactly


def test_reference_cost_is_stated_by_its_profile():
    assert load_profile("expert").cost == 10.0 and load_profile("realistic").cost == 1.0


def test_an_averaged_reference_pays_for_every_call_and_errs_less(medication):
    from setgrpo_bench.agents import resolve_config
    from setgrpo_bench.agents.budget import budget_matched_repeats
    from setgrpo_bench.errors import ConfigError
    from setgrpo_bench.graders.reference import AveragedReference, parse_reference

    grader = RubricGrader("realistic")
    single, averaged = make_reference("profile:harsh", grader), make_reference("profile:harsh*4", grader)
    assert isinstance(averaged, AveragedReference) and averaged.cost_per_call == single.cost_per_call
    task = medication.instance("train", 2)
    responses = [f"Take {k} mg of it twice a day and call your doctor." for k in range(400)]
    one = single.grade_group(task, responses, np.random.default_rng(0))
    four = averaged.grade_group(task, responses, np.random.default_rng(0))
    assert all(f.judge_calls >= 4 * len(task.rubric) for f in four)
    err = lambda grades: np.mean([(g.score - g.true_score) ** 2 for g in grades if g.valid])  # noqa: E731
    assert err(four) < 0.7 * err(one), (err(four), err(one))
    with pytest.raises(ConfigError, match=r"'profile:NAME\*N' with an integer N >= 1"):
        parse_reference("profile:expert*0")
    base = {"protocol": "board-v1"}
    ratio = budget_matched_repeats(resolve_config("setgrpo", {**base, "reference": "profile:expert*3"}))
    steps = resolve_config("setgrpo", base).run.steps
    assert ratio == pytest.approx((steps * 16 + 48 * (1 + 30) + steps * 4 * 30) / (steps * 16))


def test_the_expert_errs_at_most_half_as_much_as_the_realistic_judge(medication):
    """DESIGN §4: the reference's score error RMS against the truth is at most half the training judge's."""
    task, rng = medication.instance("train", 1), np.random.default_rng(3)
    responses = _responses(2000, 20)
    rms = {name: np.sqrt(np.mean([(g.score - g.true_score) ** 2 for g in RubricGrader(name).grade_group(task, responses, rng)
                                  if g.valid])) for name in ("expert", "realistic")}
    assert rms["expert"] <= 0.5 * rms["realistic"], rms


def _verbose_profile(**fields):
    return NoiseProfile(**{"name": "v", "false_positive": dict.fromkeys(CATEGORIES, 0.1),
                           "false_negative": dict.fromkeys(CATEGORIES, 0.1), "reference_words": 10, "length_bias": 0.0,
                           **fields})


def _task(*criteria):
    return TaskInstance("verbose", "prompt", tuple(criteria))


@pytest.mark.parametrize("field, value", [("limit_blindness", 1.0), ("keyword_credit", 2.0), ("length_favours", True)])
def test_the_verbose_judges_shifts_by_hand(field, value):
    """Each verbosity field moves the error probability on the logit scale by exactly its stated amount:
    a violated 10-word limit read in a 40-word response (2 doublings) is judged kept with
    sigmoid(logit 0.1 + 2·1.0); an unmet criterion whose two content words are both restated, with
    sigmoid(logit 0.1 + 2.0); with the length bias favouring, a pitfall of a long response is missed more."""
    from scipy.special import expit, logit

    from setgrpo_bench.tasks.checks import build_check

    n = 20_000
    if field == "limit_blindness":
        criterion = Criterion("short", "Uses at most 10 words.", 1, "important", check=build_check({"type": "word_count", "max": 10}))
        responses, expected = [" ".join(f"w{i}" for i in range(39)) + f" x{k}" for k in range(n)], expit(logit(0.1) + 2.0)
    elif field == "keyword_credit":
        criterion = Criterion("dish", "Saffron risotto.", 1, "important",
                              check=build_check({"type": "keyword_all", "terms": ["saffron", "risotto", "parmesan"]}))
        responses, expected = [f"saffron risotto tonight {k}" for k in range(n)], expit(logit(0.1) + 2.0)
    else:
        criterion = Criterion("burn", "Burns the food.", -1, "pitfall", check=build_check({"type": "keyword_any", "terms": ["burn"]}))
        long = " ".join(["fine"] * 79)  # 80 words: 3 doublings over 10, bias 0.5 per doubling towards the response's favour
        responses, expected = [f"{long} {k}" for k in range(n)], expit(logit(0.1) - 1.5)
    profile = _verbose_profile(**{field: value, **({"length_bias": 0.5} if field == "length_favours" else {})})
    task = _task(criterion, Criterion("other", "x", 1, "essential", check=build_check({"type": "keyword_any", "terms": ["qqq"]})))
    grades = RubricGrader(profile).grade_group(task, responses, np.random.default_rng(4))
    wrong = sum(bool(g.verdicts[0] != g.true_verdicts[0]) for g in grades)
    assert binomial_ok(wrong, n, expected), (wrong / n, expected)


def test_a_verbose_judge_misses_repetition_and_a_field_left_off_stays_out_of_the_fingerprint():
    from setgrpo_bench.tasks.checks import build_check

    profile = _verbose_profile(repetition_missed=0.7)
    pitfall = Criterion("rep", "Repeats itself.", -1, "pitfall", check=build_check({"type": "repetition"}))
    task = _task(pitfall, Criterion("c", "x", 1, "essential", check=build_check({"type": "keyword_any", "terms": ["x"]})))
    response = "the same words again " * 12
    assert task.true_verdicts(response)[0]
    n = 20_000
    grades = RubricGrader(profile).grade_group(task, [response + str(k) for k in range(n)], np.random.default_rng(5))
    missed = sum(not g.verdicts[0] for g in grades)
    assert binomial_ok(missed, n, 0.7 + 0.3 * 0.1)  # missed, or not missed but a false negative
    from setgrpo_bench.graders.noise import VERBOSITY_FIELDS

    assert not set(VERBOSITY_FIELDS) & set(load_profile("clean").fingerprint())
    for name in ("mild", "realistic", "harsh", "sparse", "expert"):
        assert not {"limit_blindness", "keyword_credit", "repetition_missed"} & set(load_profile(name).fingerprint())


def _hanley_mcneil_se(auc, n_pos, n_neg):
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    return np.sqrt((auc * (1 - auc) + (n_pos - 1) * (q1 - auc**2) + (n_neg - 1) * (q2 - auc**2)) / (n_pos * n_neg))


@pytest.mark.parametrize(("target", "difficulty"), [(0.7, 0.0), (0.85, 0.0), (0.7, 1.0), (0.8, 0.5)])
def test_reported_confidence_separates_wrong_verdicts_at_the_stated_auroc(target, difficulty):
    """Over 20,000 calls × 8 criteria, the AUROC of (1 − confidence) for wrong verdicts is the profile's
    within 4 standard errors (Hanley & McNeil 1982), with and without a latent call difficulty (which
    separates wrong verdicts a little by itself: the rest is calibrated)."""
    from setgrpo_bench.graders.measure import auroc

    profile = NoiseProfile(**{**load_profile("realistic").to_dict(), "name": "conf", "confidence_auroc": target,
                              "difficulty_sd": difficulty})
    task = _probe_task()
    grades = RubricGrader(profile).grade_group(task, _responses(N_GRADINGS, 40), np.random.default_rng(8))
    wrong = np.concatenate([g.verdicts != g.true_verdicts for g in grades if g.valid])
    confidence = np.concatenate([g.confidence for g in grades if g.valid])
    measured = auroc(1 - confidence, wrong)
    assert abs(measured - target) <= 4 * _hanley_mcneil_se(target, int(wrong.sum()), int((~wrong).sum())), measured


def test_a_hard_call_shows_in_the_spread_of_its_score():
    """Under ``realistic`` (confidence AUROC 0.70, call difficulty sd 1), the judge's stated spread of a
    score ranks how wrong the score is on the embedded policy's own samples (160 train prompts × 8, each
    graded 4 times: about 5,000 gradings, standard error of Spearman's ρ about 0.013):
    Spearman(σ, |r̃ − true|) ≥ 0.3. Without the difficulty the same AUROC ranks them at about 0.1."""
    from scipy.stats import spearmanr

    from setgrpo_bench.agents import resolve_config
    from setgrpo_bench.harness.judges import sample_responses

    samples = sample_responses(resolve_config("grpo"), 160, 8, ["tiny"])

    def spearman(profile):
        grader, rng, spread, error = RubricGrader(profile), np.random.default_rng(9), [], []
        for _ in range(4):
            for task, responses in samples:
                valid = [g for g in grader.grade_group(task, responses, rng) if g.valid]
                spread += [g.spread for g in valid]
                error += [abs(g.score - g.true_score) for g in valid]
        return spearmanr(spread, error).statistic

    realistic = load_profile("realistic")
    assert realistic.confidence_auroc == 0.7 and realistic.difficulty_sd == 1.0
    assert spearman(realistic) >= 0.3
    assert spearman(NoiseProfile(**{**realistic.to_dict(), "name": "flat", "difficulty_sd": 0.0})) < 0.2


def test_an_auroc_below_what_difficulty_alone_gives_is_refused():
    profile = NoiseProfile(**{**load_profile("realistic").to_dict(), "name": "x", "confidence_auroc": 0.55,
                              "difficulty_sd": 2.0})
    with pytest.raises(ConfigError, match="confidence_auroc.*what the difficulty"):
        RubricGrader(profile)


def test_a_judge_profile_name_is_resolved_in_one_place_whatever_its_kind():
    """``judge_profile`` says for either kind whether a model backs it, its cost and its fingerprint;
    a judge budget, a reference and a training judge of the model-backed kind work like any other."""
    from setgrpo_bench.agents import resolve_config
    from setgrpo_bench.agents.budget import budget_matched_repeats
    from setgrpo_bench.errors import UnknownNameError
    from setgrpo_bench.graders.judge_profiles import judge_profile, judge_profile_names

    learned, expert = judge_profile("learned"), judge_profile("expert")
    assert learned.model_backed and not expert.model_backed and expert.cost == 10.0
    assert {"learned", "realistic", "expert"} <= set(judge_profile_names())
    assert "build" in learned.fingerprint() and "cost" not in expert.fingerprint()
    with pytest.raises(UnknownNameError, match=r"unknown judge profile 'lerned'\. Did you mean 'learned'\?"):
        judge_profile("lerned")
    for reference, k_ref in (("profile:learned", learned.cost), ("profile:expert", 10.0)):
        config = resolve_config("setgrpo", {"reference": reference, "steps": 10, "groups_per_step": 4,
                                            "warmup_groups": 8, "audit_fraction": 0.25})
        assert budget_matched_repeats(config) == pytest.approx((40 + 8 * (1 + k_ref) + 10 * 1 * k_ref) / 40)
    with pytest.raises(Exception, match="unknown judge profile 'nosie'"):
        resolve_config("grpo", {"noise": "nosie"})  # refused when the config is made, not when a run starts
