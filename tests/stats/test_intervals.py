"""The report's inference rules on synthetic tables whose right answer is known.

Each test would fail on a defect the committed report once had: rankings and crossings read off mean
curves, intervals from two seeds, no correction across fractions, fits on step-bound points, a fixed
limitation that contradicted the recipe selection.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from scipy import stats

from study.curves.efficiency import crossings, gap_trends, paired_gaps, power_law_table, summarise, too_wide
from study.stats.intervals import equivalence_bound, holm_intervals, holm_p, slope_interval, t_test_p
from study.report.setup import training_fit
from study.curves import report as F
from study.report.limitations import limitations
from study.train.budget import plan_budget
from study.train.convergence import convergence

SIZES = {0.01: 500, 0.03: 1500, 0.1: 5000, 0.3: 15000, 1.0: 50000}


def synthetic_runs(gap_of, seeds: int, noise: float = 0.0, rng_seed: int = 0, base=0.8) -> pd.DataFrame:
    """Runs of models ``a`` and ``b`` at every fraction: ``b`` at ``base``, ``a`` at ``base + gap_of(f) + noise``."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for fraction, n in SIZES.items():
        for seed in range(seeds):
            shared = rng.normal(0, 0.01)  # the seed's subset moves both models alike: pairing removes it
            for model, top1 in (("b", base + shared), ("a", base + shared + gap_of(fraction) + rng.normal(0, noise))):
                rows.append({"model": model, "fraction": fraction, "seed": seed, "train_images": n,
                             "test_top1": top1, "test_error": 1 - top1, "train_top1": 1.0,
                             "test_top1_cls": np.nan, "test_top1_dist": np.nan,
                             "under_trained": False, "step_bound": False, "budget_source": "epochs"})
    return pd.DataFrame(rows)


# --- Holm-adjusted intervals ------------------------------------------------------------------------


def holm_reject(p: list[float], alpha: float) -> list[bool]:
    """Holm's step-down procedure, written out directly."""
    order = np.argsort(p)
    reject = [False] * len(p)
    for rank, i in enumerate(order):
        if p[i] < alpha / (len(p) - rank):
            reject[i] = True
        else:
            break
    return reject


def test_adjusted_interval_excludes_zero_exactly_when_holm_rejects():
    rng = np.random.default_rng(1)
    for _ in range(200):
        samples = [rng.normal(rng.choice([0.0, 0.02, 0.05]), 0.02, size=rng.integers(3, 7)) for _ in range(5)]
        adjusted = holm_intervals(samples, 0.95)
        expected = holm_reject([t_test_p(s) for s in samples], 0.05)
        assert [a.significant for a in adjusted] == expected
        for a, s in zip(adjusted, samples):
            assert a.low <= s.mean() <= a.high
            assert (a.low > 0 or a.high < 0) == a.significant


def test_adjusted_interval_is_wider_than_the_raw_one():
    samples = [np.array([0.01, 0.03, 0.02, 0.025]), np.array([0.0, 0.01, -0.01, 0.002])]
    adjusted = holm_intervals(samples, 0.95)
    raw = paired_gaps(synthetic_runs(lambda f: 0.02, seeds=4, noise=0.005), [("a", "b")], 0.95)
    assert (raw["adj_ci_high"] - raw["adj_ci_low"] >= raw["gap_ci_high"] - raw["gap_ci_low"] - 1e-12).all()
    assert all(a.confidence >= 0.95 for a in adjusted)


# --- paired gaps ------------------------------------------------------------------------------------


def test_a_real_gap_is_claimed_and_a_noise_gap_is_not():
    real = paired_gaps(synthetic_runs(lambda f: 0.05, seeds=5, noise=0.005), [("a", "b")], 0.95)
    assert real["significant"].all() and real["inference"].all()
    noise = paired_gaps(synthetic_runs(lambda f: 0.0, seeds=5, noise=0.02, rng_seed=3), [("a", "b")], 0.95)
    assert not noise["significant"].any()
    text = " ".join(F.gap_sentences(noise))
    assert "no detectable difference" in text and "ahead" not in text
    assert "+5.0 points, a ahead" in " ".join(F.gap_sentences(real))


def test_the_equivalence_bound_is_the_larger_end_of_an_interval_that_includes_zero():
    assert equivalence_bound(-0.02, 0.03, False, 3) == 0.03
    assert equivalence_bound(-0.05, 0.01, False, 5) == 0.05
    assert math.isnan(equivalence_bound(0.01, 0.03, True, 3))  # a detected difference has no bound
    assert math.isnan(equivalence_bound(-0.02, 0.03, False, 2))  # too few seeds: nothing is inferred
    assert math.isnan(equivalence_bound(float("nan"), float("nan"), False, 3))


def test_paired_gaps_bound_only_the_gaps_they_do_not_detect():
    real = paired_gaps(synthetic_runs(lambda f: 0.05 if f < 0.1 else 0.0, seeds=5, noise=0.005), [("a", "b")], 0.95)
    hit, null = real[real["significant"]], real[~real["significant"]]
    assert set(hit["fraction"]) == {0.01, 0.03} and hit["equivalence_bound"].isna().all()
    expected = np.maximum(null["adj_ci_low"].abs(), null["adj_ci_high"].abs())
    assert len(null) == 3 and np.allclose(null["equivalence_bound"], expected)


def test_a_null_gap_sentence_says_which_differences_are_excluded():
    row = {"comparison": "a - b", "fraction": 1.0, "train_images": 50000, "seeds": 3, "gap_mean": 0.005,
           "adj_ci_low": -0.02, "adj_ci_high": 0.03, "significant": False, "inference": True,
           "equivalence_bound": 0.03, "under_trained_a": 0, "under_trained_b": 0}
    sentence, = F.gap_sentences(pd.DataFrame([row]))
    assert sentence == ("a − b: at 50,000 images no detectable difference (+0.5 points, adjusted CI -2.0 to +3.0; "
                        "differences beyond ±3.0 points excluded). Intervals are Holm-adjusted across the 1 fraction.")


def test_two_seeds_give_descriptive_sentences_only():
    gaps = paired_gaps(synthetic_runs(lambda f: 0.05, seeds=2, noise=0.001), [("a", "b")], 0.95)
    assert not gaps["inference"].any()
    text = " ".join(F.gap_sentences(gaps))
    assert "descriptive" in text and "ahead" not in text
    summary = summarise(synthetic_runs(lambda f: 0.05, seeds=2), 0.95)
    assert "no inference is drawn" in F.seeds_statement(summary)[0]


def test_ranking_alone_never_claims_a_winner():
    summary = summarise(synthetic_runs(lambda f: 0.001, seeds=5, noise=0.03), 0.95)
    assert all("beats" not in s and ">" not in s for s in F.ranking(summary))


# --- crossings -----------------------------------------------------------------------------------------


def test_noisy_sign_changes_are_listed_but_no_crossing_is_claimed():
    # The mean gap alternates in sign around zero with noise larger than it: a rule reading the means' signs
    # alone would report a crossing.
    wiggle = {0.01: -0.004, 0.03: 0.004, 0.1: -0.004, 0.3: 0.004, 1.0: -0.004}
    gaps = paired_gaps(synthetic_runs(lambda f: wiggle[f], seeds=4, noise=0.0005, rng_seed=5), [("a", "b")], 0.95)
    gaps["gap_mean"] = gaps["fraction"].map(wiggle)  # pin the means' signs; keep the wide noise intervals
    gaps["significant"] = False
    table = crossings(gaps)
    assert table["sign_changes"].iloc[0] == 4 and not table["crossing_claimed"].iloc[0]
    sentence = F.crossing_sentences(table)[0]
    assert "No crossing" in sentence and "changes sign 4 times" in sentence


def test_crossing_sentences_read_a_single_sign_change_back_from_csv(tmp_path):
    table = pd.DataFrame([{"comparison": "a - b", "sign_changes": 1, "sign_change_train_images": "3953",
                           "crossing_claimed": False, "direction": "", "significant_from_images": np.nan,
                           "significant_to_images": np.nan}])
    table.to_csv(tmp_path / "c.csv", index=False)
    assert "near 3,953 images" in F.crossing_sentences(pd.read_csv(tmp_path / "c.csv"))[0]


def test_a_real_crossing_is_claimed_with_its_direction():
    shape = {0.01: -0.08, 0.03: -0.05, 0.1: 0.0, 0.3: 0.05, 1.0: 0.08}
    gaps = paired_gaps(synthetic_runs(lambda f: shape[f], seeds=5, noise=0.004), [("a", "b")], 0.95)
    table = crossings(gaps)
    assert table["crossing_claimed"].iloc[0]
    assert table["direction"].iloc[0] == "a overtakes b"
    assert table["significant_from_images"].iloc[0] == 500 and table["significant_to_images"].iloc[0] == 50000


def test_a_crossing_needs_three_seeds():
    shape = {0.01: -0.08, 0.03: -0.05, 0.1: 0.0, 0.3: 0.05, 1.0: 0.08}
    gaps = paired_gaps(synthetic_runs(lambda f: shape[f], seeds=2, noise=0.0001), [("a", "b")], 0.95)
    assert not crossings(gaps)["crossing_claimed"].iloc[0]


# --- trends and fits ----------------------------------------------------------------------------------


def test_gap_trend_recovers_a_known_slope_per_decade():
    # gap = 2 points per tenfold data: log10(500) .. log10(50000) spans 2 decades, 4 points in all.
    runs = synthetic_runs(lambda f: 0.02 * math.log10(SIZES[f] / 500), seeds=4, noise=0.001)
    trends = gap_trends(runs, [("a", "b")], 0.95).set_index("scale")
    accuracy = trends.loc["gap (accuracy points)"]
    assert accuracy["slope_per_decade"] == pytest.approx(2.0, abs=0.15)
    assert accuracy["ci_low"] > 0 and accuracy["inference"]
    assert "no detectable trend" not in F.trend_sentences(trends.reset_index())[0].split(";")[0]


def three_model_runs(slopes: dict[str, list[float]]) -> pd.DataFrame:
    """Runs of ``b`` at 80% everywhere and of every other model at 80% + slope·log10(n / 500) points, one slope per
    seed: each seed's fitted gap slope against ``b`` is exactly its slope."""
    runs = []
    for seed in range(3):
        for fraction, n in SIZES.items():
            for model, per_seed in {"b": [0.0] * 3, **slopes}.items():
                top1 = 0.8 + per_seed[seed] * math.log10(n / 500) / 100
                runs.append({"model": model, "fraction": fraction, "seed": seed, "train_images": n, "test_top1": top1,
                             "step_bound": False, "under_trained": False})
    return pd.DataFrame(runs)


def test_gap_trends_are_holm_adjusted_across_the_comparisons_of_a_scale():
    steep, flat = [2.0, 2.1, 1.9], [0.1, -0.2, 0.05]
    runs = three_model_runs({"a": steep, "c": flat})
    trends = gap_trends(runs, [("a", "b"), ("c", "b"), ("a", "c")], 0.95)
    gap = trends[trends["scale"] == "gap (accuracy points)"].set_index("comparison")
    # p-values: a − b smallest, a − c next, both rejected (levels α/3, α/2); c − b last, tested at α itself.
    assert gap["adj_confidence"].to_dict() == pytest.approx({"a - b": 1 - 0.05 / 3, "c - b": 0.95, "a - c": 0.975})
    assert gap.loc["a - b", "significant"] and gap.loc["a - c", "significant"] and not gap.loc["c - b", "significant"]
    half = stats.t.ppf(0.975, 2) * np.std(flat, ddof=1) / np.sqrt(3)
    assert gap.loc["c - b", "adj_ci_high"] == pytest.approx(np.mean(flat) + half)
    assert gap.loc["c - b", "equivalence_bound"] == pytest.approx(half - np.mean(flat))  # the lower end is larger
    assert gap.loc["a - b", "adj_ci_high"] - gap.loc["a - b", "adj_ci_low"] > \
        gap.loc["a - b", "ci_high"] - gap.loc["a - b", "ci_low"]
    text = " ".join(F.trend_sentences(trends))
    assert (f"gap (accuracy points): no detectable trend (-0.0 points per tenfold data, Holm-adjusted 95.0% CI "
            f"{np.mean(flat) - half:+.1f} to {np.mean(flat) + half:+.1f}; trends beyond ±{half - np.mean(flat):.1f} "
            "points per tenfold data excluded)") in text
    assert "Intervals are Holm-adjusted across the 3 comparisons of each scale." in text


def test_slope_interval_of_a_flat_line_contains_zero():
    rng = np.random.default_rng(0)
    x = np.arange(5.0)
    slope, low, high, seeds = slope_interval(x, [rng.normal(0, 1, 5) for _ in range(4)], 0.95)
    assert seeds == 4 and low < 0 < high


def pure_power_law_runs(seeds: int, step_bound_fraction: float | None = None) -> pd.DataFrame:
    runs = synthetic_runs(lambda f: 0.0, seeds=seeds)
    runs = runs[runs["model"] == "b"].copy()
    rng = np.random.default_rng(0)
    # A curve that bends down faster than any a·n^-b + c with c >= 0 can follow: the best c is negative,
    # so the fit pins c at its bound 0, as it did for every model of the committed default study.
    runs["test_error"] = (2.0 * runs["train_images"] ** -0.3 - 0.01) * np.exp(rng.normal(0, 0.01, len(runs)))
    runs["test_top1"] = 1 - runs["test_error"]
    if step_bound_fraction is not None:
        at = runs["fraction"] == step_bound_fraction
        runs.loc[at, ["step_bound", "under_trained"]] = True
        runs.loc[at, "test_error"] = 0.9  # what a step-bound point looks like: far above the curve
    return runs


def test_power_law_flags_a_parameter_on_its_bound_and_brackets_the_exponent():
    fits = power_law_table(pure_power_law_runs(seeds=8), 0.95, bootstrap=50).iloc[0]
    assert fits["c_on_bound"]  # no irreducible error in the data: c pinned at 0
    assert fits["b_ci_low"] < fits["b"] < fits["b_ci_high"]
    assert not fits["identified"]
    sentence, = F.power_law_sentences(pd.DataFrame([fits]))
    assert sentence == ("b: no power law is quoted, as the data do not identify error ≈ a·n^(−b) + c: c sits on the "
                        "fit's bound (c = 0.000).")


def test_a_power_law_with_an_irreducible_error_is_identified_and_quoted():
    runs = pure_power_law_runs(seeds=8)
    rng = np.random.default_rng(1)
    runs["test_error"] = (2.0 * runs["train_images"] ** -0.5 + 0.05) * np.exp(rng.normal(0, 0.005, len(runs)))
    fits = power_law_table(runs, 0.95, bootstrap=50).iloc[0]
    assert fits["identified"] and not fits[["a_on_bound", "b_on_bound", "c_on_bound"]].any()
    assert fits["b"] == pytest.approx(0.5, abs=0.05) and fits["c"] == pytest.approx(0.05, abs=0.005)
    sentence, = F.power_law_sentences(pd.DataFrame([fits]))
    assert sentence.startswith(f"b: error ≈ {fits['a']:.3g}·n^(−{fits['b']:.2f}) + {fits['c']:.3f} (bootstrap CIs")


def test_a_parameter_interval_too_wide_or_missing_leaves_the_fit_unidentified():
    assert too_wide("b", 0.1, 2.7) and not too_wide("b", 0.1, 2.5)  # half of b's range 0..5
    assert too_wide("c", 0.0, 0.6) and not too_wide("c", 0.0, 0.4)  # half of c's range 0..1
    assert too_wide("a", 1.0, 11.0) and not too_wide("a", 1.0, 9.0) and too_wide("a", 0.0, 1.0)  # a factor of 10
    assert too_wide("b", float("nan"), float("nan"))
    one_seed = power_law_table(pure_power_law_runs(seeds=1), 0.95).iloc[0]  # no bootstrap over one seed
    assert not one_seed["identified"] and one_seed[["a_too_wide", "b_too_wide", "c_too_wide"]].all()
    sentence = F.power_law_sentences(pd.DataFrame([one_seed]))[0]
    assert "a has no bootstrap interval (1 seed: too few to resample); b has no bootstrap interval" in sentence


def test_no_bootstrap_interval_from_fewer_than_eight_seeds():
    """3 seeds give 10 distinct resamples, 4 give 35: the percentile "interval" of a handful of repeated fits is
    not an interval, so below 8 seeds there is none and the fit is not quoted (it was, from 4, before)."""
    few = power_law_table(pure_power_law_runs(seeds=4), 0.95).iloc[0]
    assert few["bootstrap_seeds"] == 4 and np.isnan(few[["a_ci_low", "b_ci_low", "c_ci_high"]].astype(float)).all()
    assert not few["identified"]
    assert "too few to resample" in F.power_law_sentences(pd.DataFrame([few]))[0]
    enough = power_law_table(pure_power_law_runs(seeds=8), 0.95, bootstrap=20).iloc[0]
    assert enough["bootstrap_seeds"] == 8 and np.isfinite(enough["b_ci_low"])


@pytest.mark.slow
def test_power_law_leaves_step_bound_runs_out():
    fits = power_law_table(pure_power_law_runs(seeds=4, step_bound_fraction=0.01), 0.95).iloc[0]
    assert fits["runs_step_bound"] == 4 and fits["runs_used"] == 16
    with_outliers = pure_power_law_runs(seeds=4, step_bound_fraction=0.01)
    with_outliers["step_bound"] = False
    bent = power_law_table(with_outliers, 0.95).iloc[0]
    clean = power_law_table(pure_power_law_runs(seeds=4), 0.95).iloc[0]
    assert fits["b"] == pytest.approx(clean["b"], abs=0.02) and abs(bent["b"] - clean["b"]) > 0.05


# --- convergence, budget source, limitations ---------------------------------------------------------------


def history(losses: list[float], steps: int = 100) -> list[dict]:
    return [{"step": (i + 1) * steps // len(losses), "val_loss": loss} for i, loss in enumerate(losses)]


def test_convergence_without_an_earlier_point_counts_as_still_improving():
    assert convergence(history([0.5]))["still_improving"]


def test_convergence_flags_a_run_whose_validation_loss_still_falls():
    assert convergence(history([1.0, 0.8, 0.6, 0.5]))["still_improving"]
    settled = convergence(history([1.0, 0.6, 0.5, 0.499]))
    assert not settled["still_improving"] and settled["val_loss_change_last_quarter"] == pytest.approx(-0.002)
    assert not convergence(history([1.0, 0.6, 0.5, 0.55]))["still_improving"]  # overfitting: rising


def test_budget_records_when_the_floor_set_the_steps():
    assert plan_budget(500, 50000, 128, 2.0, "epochs", 40).source == "floor"
    assert plan_budget(50000, 50000, 128, 2.0, "epochs", 40).source == "epochs"
    assert plan_budget(500, 50000, 128, 2.0, "images", 0).source == "images"


def test_limitations_say_recipes_were_selected_on_validation_when_they_were():
    runs = synthetic_runs(lambda f: 0.0, seeds=2)
    runs["params"] = 1000
    tuned = limitations(dataset="digits", seeds=[0, 1], convention="epochs", min_steps=40, runs=runs,
                        selection={"a": {"lr": [0.1, 0.2]}, "b": {}})
    text = " ".join(tuned)
    assert "compared on the validation split (a: lr among 0.1, 0.2)" in text and "never used" not in text
    assert "Which criterion decided each choice" in text  # validation top-1 is not assumed to have decided
    assert "too few for inference" in text
    untuned = " ".join(limitations(dataset="digits", seeds=[0, 1, 2], convention="epochs", min_steps=40, runs=runs,
                                   selection={"a": {}}))
    assert "set a priori" in untuned and "too few" not in untuned


def _fit_runs(train_top1: list[float], improving: list[bool]) -> pd.DataFrame:
    return pd.DataFrame({"model": ["vit", "vit", "resnet", "resnet"], "fraction": [0.01, 0.1, 0.01, 0.1],
                         "seed": 0, "train_top1": train_top1, "under_trained": improving})


def test_fit_sentence_says_gaps_are_generalisation_only_when_every_run_fit_and_settled():
    settled = F.fit_sentences(training_fit(_fit_runs([1.0, 0.995, 1.0, 1.0], [False] * 4)))
    assert len(settled) == 1 and "at least 99% in all 4 runs" in settled[0] and "measures generalisation" in settled[0]
    improving = F.fit_sentences(training_fit(_fit_runs([1.0, 0.995, 1.0, 1.0], [False, True, False, False])))
    assert "generalisation" not in improving[0]


def test_fit_sentence_names_each_model_and_fraction_that_did_not_fit():
    [sentence] = F.fit_sentences(training_fit(_fit_runs([1.0, 0.85, 1.0, 1.0], [False] * 4)))
    assert "vit at fraction 0.1 (85.0% mean, lowest 85.0%)" in sentence
    assert "resnet" not in sentence and "generalisation from the same data" not in sentence


def test_fit_sentence_blames_the_budget_only_for_unfit_runs_still_improving():
    [settled] = F.fit_sentences(training_fit(_fit_runs([0.9, 0.85, 1.0, 1.0], [False, False, True, False])))
    assert "all 2 of these runs had stopped falling" in settled and "not the step budget" in settled
    [improving] = F.fit_sentences(training_fit(_fit_runs([0.9, 0.85, 1.0, 1.0], [True, True, False, False])))
    assert "optimisation as much as generalisation" in improving and "not the step budget" not in improving
    [mixed] = F.fit_sentences(training_fit(_fit_runs([0.9, 0.85, 1.0, 1.0], [True, False, False, False])))
    assert "1 of these 2 runs had stopped falling" in mixed and "the other runs'" in mixed


def test_convergence_sentence_agrees_in_number():
    runs = _fit_runs([1.0] * 4, [True, False, False, False]).assign(step_bound=[True, False, False, False])
    [sentence] = F.convergence_sentences(runs)
    assert "1 of them was on the min_steps floor (step-bound) and is left out" in sentence


def test_holm_p_equals_statsmodels_and_keeps_nan_in_place():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(0)
    for size in (1, 2, 7, 40):
        p = rng.uniform(0, 0.2, size)
        p[rng.integers(size)] = p[0]  # a tie
        assert holm_p(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-15)
    mixed = holm_p([0.04, math.nan, 0.01, 0.9])
    assert math.isnan(mixed[1])
    assert [mixed[0], mixed[2], mixed[3]] == pytest.approx(multipletests([0.04, 0.01, 0.9], method="holm")[1])
