"""A comparison pooled over fractions, one value per seed, on simulated data whose mean contrast and slope are
known; its Holm family; no degrees of freedom beyond the seeds'."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.stats import trend as T
from study.stats.intervals import holm_intervals, holm_levels, holm_p

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


def test_the_mean_and_slope_are_t_tests_on_one_value_per_seed():
    """The mean contrast is a one-sample t on the seeds' means over fractions and the slope one on the seeds'
    own slopes, both on seeds − 1 degrees of freedom; the centre is the geometric-mean image count."""
    from study.stats.intervals import t_interval

    frame = simulated(np.random.default_rng(3), between=0.05)
    fit = T.trend_fit(frame)
    assert (fit.mean_df, fit.slope_df) == (4, 4)
    means = frame.groupby("seed")["diff"].mean()
    mean, sd, half = t_interval(means, 0.95)
    row = T.trend_table({"a": frame}, 0.95).iloc[0]
    assert row["mean"] == pytest.approx(mean) and fit.seed_sd == pytest.approx(sd)
    assert row["mean_ci_high"] - row["mean"] == pytest.approx(half)
    x = np.log10(IMAGES)
    slopes = [np.polyfit(x, g["diff"], 1)[0] for _, g in frame.groupby("seed")]
    slope, _, slope_half = t_interval(slopes, 0.95)
    assert row["slope_per_decade"] == pytest.approx(slope)
    assert row["slope_ci_high"] - row["slope_per_decade"] == pytest.approx(slope_half)
    assert fit.centre == pytest.approx(math.exp(np.log(IMAGES).mean()))
    assert (fit.observations, fit.seeds, fit.fractions) == (25, 5, 5)
    # fractions instead of image counts: the same slope and mean
    by_fraction = T.trend_fit(frame.drop(columns="train_images"))
    assert (by_fraction.mean, by_fraction.slope) == (pytest.approx(fit.mean), pytest.approx(fit.slope))


def test_no_seed_variance_estimated_at_zero_buys_degrees_of_freedom():
    """Every seed's contrasts centred on the same value (a zero seed variance, where a mixed model sits at its
    boundary): the mean still has seeds − 1 degrees of freedom, never observations − 2."""
    frame = simulated(np.random.default_rng(1), between=0.0)
    frame["diff"] -= frame.groupby("seed")["diff"].transform("mean") - frame["diff"].mean()
    fit = T.trend_fit(frame)
    assert fit.mean_df == 4 and fit.seed_sd == pytest.approx(0.0, abs=1e-12)
    assert fit.seed_variance_share == 0.0
    # the seed's share of the variance, from the two-way ANOVA, when it is there
    shared = T.trend_fit(simulated(np.random.default_rng(4), seeds=40, between=0.04, within=0.04))
    assert 0.3 < shared.seed_variance_share < 0.7
    assert math.isnan(T.trend_fit(frame.iloc[:-1]).seed_variance_share)  # an incomplete table
    single = T.trend_fit(frame[frame["train_images"] == 570])  # one image count: no slope
    assert math.isnan(single.slope) and math.isfinite(single.mean) and single.mean_df == 4
    one_seed = T.trend_fit(frame[frame["seed"] == 0])  # one seed: a mean, no interval
    assert math.isfinite(one_seed.mean) and math.isnan(one_seed.mean_se) and math.isnan(T.trend_table(
        {"a": frame[frame["seed"] == 0]}, 0.95)["mean_ci_low"].iloc[0])
    with pytest.raises(ValueError):
        T.trend_fit(frame.iloc[:0])


def test_holm_levels_follow_the_intervals_convention_and_are_monotone():
    p = [0.001, 0.04, 0.013, 0.3, float("nan")]
    levels = holm_levels(p, 0.05)
    # ranked 0, 2, 1, 3 among 4: 0.05/4 rejects, 0.05/3 rejects, 0.05/2 keeps 0.04, so 0.3 also gets 0.025
    assert levels[:4] == pytest.approx([0.05 / 4, 0.05 / 2, 0.05 / 3, 0.05 / 2]) and math.isnan(levels[4])
    # the same levels as study.stats.intervals.holm_intervals gives per-seed samples with these p-values
    rng = np.random.default_rng(2)
    samples = [rng.normal(m, 0.02, 5) for m in (0.05, 0.01, 0.03, 0.0)]
    ref = holm_intervals(samples, 0.95)
    assert holm_levels([a.p for a in ref], 0.05) == pytest.approx([1 - a.confidence for a in ref])
    assert holm_p([a.p for a in ref]) == pytest.approx([a.p_holm for a in ref])
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
