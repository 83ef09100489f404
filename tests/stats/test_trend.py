"""The pooled model over fractions (diff ~ 1 + centred log10 images, random intercept per seed) on simulated data
whose mean contrast and slope are known; its Holm family; its OLS fallback; the verdict against an effect."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from study.stats import trend as T
from study.stats.intervals import holm_intervals

IMAGES = (140, 290, 570, 1140, 2280)  # the default study's image counts


def simulated(rng, seeds: int = 5, mean: float = 0.05, slope: float = -0.03, between: float = 0.02,
              within: float = 0.03, images=IMAGES) -> pd.DataFrame:
    """Per-seed differences at every image count: ``mean + slope·c + seed part + noise``, c the centred log10."""
    c = np.log10(images) - np.log10(images).mean()
    rows = []
    for seed in range(seeds):
        shared = rng.normal(0, between)
        rows += [{"train_images": n, "fraction": n / 57_000, "seed": seed, "diff": mean + slope * x + shared
                  + rng.normal(0, within)} for n, x in zip(images, c)]
    return pd.DataFrame(rows)


def test_the_intervals_cover_the_known_mean_and_slope():
    rng = np.random.default_rng(0)
    covered_mean = covered_slope = 0
    trials = 150
    for _ in range(trials):
        row = T.trend_table({"a": simulated(rng)}, 0.95).iloc[0]
        covered_mean += row["mean_ci_low"] <= 0.05 <= row["mean_ci_high"]
        covered_slope += row["slope_ci_low"] <= -0.03 <= row["slope_ci_high"]
    # 95% intervals: the binomial SD of the coverage over 150 trials is 1.8 points
    assert 0.89 <= covered_mean / trials <= 0.99
    assert 0.89 <= covered_slope / trials <= 0.99


def test_the_fit_of_a_balanced_design_is_the_paired_t_test_on_seed_means():
    """Away from the boundary the mixed model's mean and its interval are those of a t-test on the seeds' means
    over fractions (df seeds − 1), and the centre is the geometric-mean image count."""
    from study.stats.intervals import t_interval

    frame = simulated(np.random.default_rng(3), between=0.05)
    fit = T.trend_fit(frame)
    assert fit.method == T.MIXED and fit.note == "" and (fit.mean_df, fit.slope_df) == (4, 19)
    means = frame.groupby("seed")["diff"].mean()
    mean, sd, half = t_interval(means, 0.95)
    row = T.trend_table({"a": frame}, 0.95).iloc[0]
    assert row["mean"] == pytest.approx(mean, abs=1e-6)
    assert row["mean_ci_high"] - row["mean"] == pytest.approx(half, rel=1e-3)
    assert fit.centre == pytest.approx(math.exp(np.log(IMAGES).mean()))
    assert (fit.observations, fit.seeds, fit.fractions) == (25, 5, 5)
    # fractions instead of image counts: the same slope and mean
    by_fraction = T.trend_fit(frame.drop(columns="train_images"))
    assert (by_fraction.mean, by_fraction.slope) == (pytest.approx(fit.mean), pytest.approx(fit.slope))


def test_the_ols_fallback_at_the_boundary_and_without_repeats():
    # every seed's contrasts centred on the same value: the seeds' variance is estimated at zero
    frame = simulated(np.random.default_rng(1), between=0.0)
    frame["diff"] -= frame.groupby("seed")["diff"].transform("mean") - frame["diff"].mean()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # statsmodels' warnings must not reach the caller
        fit = T.trend_fit(frame)
    assert fit.method == T.OLS and "boundary" in fit.note and fit.mean_df == fit.slope_df == 25 - 2
    assert fit.seed_variance_share == 0.0
    x = np.log10(frame["train_images"]) - np.log10(frame["train_images"]).mean()
    slope, intercept = np.polyfit(x, frame["diff"], 1)
    assert (fit.mean, fit.slope) == (pytest.approx(intercept), pytest.approx(slope))
    one_each = frame.drop_duplicates("seed").assign(seed=range(5))
    one_each = pd.concat([one_each, frame.iloc[[7, 13]].assign(seed=[5, 6])])
    alone = T.trend_fit(one_each)
    assert alone.method == T.OLS and "no seed has two fractions" in alone.note
    single = T.trend_fit(frame[frame["train_images"] == 570])  # one image count: no slope
    assert math.isnan(single.slope) and math.isfinite(single.mean)
    with pytest.raises(ValueError):
        T.trend_fit(frame.iloc[:1])


def test_holm_levels_follow_the_intervals_convention_and_are_monotone():
    p = [0.001, 0.04, 0.013, 0.3, float("nan")]
    levels = T.holm_levels(p, 0.05)
    # ranked 0, 2, 1, 3 among 4: 0.05/4 rejects, 0.05/3 rejects, 0.05/2 keeps 0.04, so 0.3 also gets 0.025
    assert levels[:4] == pytest.approx([0.05 / 4, 0.05 / 2, 0.05 / 3, 0.05 / 2]) and math.isnan(levels[4])
    # the same levels as study.stats.intervals.holm_intervals gives per-seed samples with these p-values
    rng = np.random.default_rng(2)
    samples = [rng.normal(m, 0.02, 5) for m in (0.05, 0.01, 0.03, 0.0)]
    ref = holm_intervals(samples, 0.95)
    assert T.holm_levels([a.p for a in ref], 0.05) == pytest.approx([1 - a.confidence for a in ref])
    assert T._holm_p([a.p for a in ref]) == pytest.approx([a.p_holm for a in ref])
    # monotone: a smaller p never gets a wider interval (a stricter level), and adjusted p-values keep the order
    table = T.trend_table({name: simulated(rng, mean=m) for name, m in
                           (("big", 0.08), ("mid", 0.03), ("none", 0.0))}, 0.95)
    order = table.sort_values("p_mean")
    assert order["mean_adj_confidence"].is_monotonic_decreasing
    assert order["p_mean_holm"].is_monotonic_increasing
    assert (table["mean_adj_low"] <= table["mean_ci_low"]).all() and \
        (table["mean_adj_high"] >= table["mean_ci_high"]).all()
    assert (table["p_mean_holm"] >= table["p_mean"]).all()
    assert list(table.columns) == T.TABLE_COLUMNS and list(table["comparison"]) == ["big", "mid", "none"]


def test_the_verdict_against_the_smallest_effect_of_interest():
    v = T.effect_verdict
    supported = v(0.01, 0.09, 0.05, +1)
    assert supported.label == "supported" and math.isnan(supported.bound)  # CI excludes 0 on the claimed side
    assert v(-0.09, -0.01, 0.05, 0).label == "supported" and v(-0.09, -0.01, 0.05, -1).label == "supported"
    assert v(-0.02, 0.03, 0.05, +1) == T.EffectVerdict("refuted", 0.03)  # inside ±5 points
    assert v(-0.02, 0.03, 0.05, 0) == T.EffectVerdict("no effect", 0.03)
    assert v(-0.04, -0.01, 0.05, +1) == T.EffectVerdict("refuted", 0.04)  # small and the wrong way: inside ±e
    assert v(-0.12, -0.06, 0.05, +1) == T.EffectVerdict("reversed", 0.12)
    assert v(-0.02, 0.08, 0.05, +1) == T.EffectVerdict("inconclusive", 0.08)  # beyond ±8 points excluded
    assert v(-0.09, 0.02, 0.05, -1) == T.EffectVerdict("inconclusive", 0.09)
    assert v(math.nan, math.nan, 0.05).label == "undefined"
    with pytest.raises(ValueError):
        v(0.0, 0.1, 0.0)
