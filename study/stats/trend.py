"""A comparison pooled over fractions, the seed as the unit of replication: its mean contrast and its trend with
the data, each from one value per seed.

Testing a contrast at every fraction separately (:func:`study.stats.intervals.holm_intervals`) spends the seeds of
each fraction on its own test and pays Holm's price across fractions. Where the question is "does arm A beat arm B
over this range of data, and does the gap grow or shrink with it", each seed gives one answer to each part:

- its **mean contrast**, the average of its paired differences ``diff`` (A − B, same subset, initialisation and data
  order) over the fractions it has;
- its **slope**, the least-squares slope of its differences on ``log10(images)`` (the change per decade of
  training images).

The study's mean contrast and slope are the means of these per-seed values, each with a one-sample Student-t
interval on ``seeds − 1`` degrees of freedom. A seed's runs at several fractions share its subset draw and
initialisation seed, so they are not independent observations (Hurlbert 1984; Lazic 2010): however many rows a
regression has, a between-seed quantity has at most ``seeds − 1`` degrees of freedom, and a seed variance
estimated at zero from 3 or 4 seeds is no evidence that seeds do not matter. In a balanced design the mean of the
seeds' means is the grand mean, and the interval is that of a paired t-test on per-seed means — the interval a
random-intercept model gives away from its boundary, without the boundary. ``tests/stats/test_coverage.py`` checks
the coverage by simulation with a seed effect, and that treating the rows as independent does not reach it.

:func:`trend_table` forms the Holm families (the means of the comparisons one family, their slopes another), with
the convention of :func:`study.stats.intervals.holm_levels`, so an adjusted interval excludes 0 exactly where Holm
rejects. Classifying an interval against the smallest effect of interest is :mod:`study.stats.verdicts`' job.

The trends of the curves and robustness stages (:func:`study.curves.efficiency.gap_trends`,
:func:`study.robustness.contrasts.contrast_trends`) are fitted by :func:`step_free_pairs`,
:func:`decade_slopes` and :func:`slope_rows`: one slope per seed over the fractions where neither model has a
step-bound run, each family of comparisons Holm-adjusted with :func:`study.stats.intervals.holm_intervals`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from study.stats.intervals import (MIN_SEEDS, equivalence_bound, holm_intervals, holm_levels, holm_p,
                                   seed_slopes, t_bounds, t_interval, t_p)


@dataclass(frozen=True)
class TrendFit:
    """One comparison pooled over fractions: the mean over seeds of each seed's mean contrast and of each seed's
    slope per decade, each with its standard error and ``seeds − 1`` degrees of freedom (NaN where undefined)."""

    mean: float
    mean_se: float
    mean_df: float  # seeds − 1
    slope: float  # per decade of training images; NaN with a single image count
    slope_se: float
    slope_df: float  # seeds with a slope − 1
    observations: int
    seeds: int
    fractions: int
    centre: float  # the geometric mean of the size column over the rows: the design's middle, in images or fraction
    seed_sd: float  # SD of the seeds' mean contrasts: what the power of the mean's test depends on
    seed_variance_share: float  # descriptive: the seed's share of the variance (two-way ANOVA; NaN if unbalanced)

    @property
    def p_mean(self) -> float:
        return t_p(self.mean, self.mean_se, self.mean_df)

    @property
    def p_slope(self) -> float:
        return t_p(self.slope, self.slope_se, self.slope_df)


def _sizes(frame: pd.DataFrame, size: str | None) -> str:
    if size is not None:
        return size
    for column in ("train_images", "fraction"):
        if column in frame:
            return column
    raise ValueError("trend_fit: the frame needs a column train_images or fraction (or name one with size=)")


def seed_means(frame: pd.DataFrame, value: str = "diff", seed: str = "seed") -> pd.Series:
    """Each seed's mean of ``value`` over its rows (its fractions, or its probes): the unit of replication."""
    return frame.dropna(subset=[value]).groupby(seed)[value].mean()


def _mean_se(values: np.ndarray) -> tuple[float, float, float]:
    """Mean, its standard error and degrees of freedom of a one-sample t over ``values`` (SE NaN below 2)."""
    n = values.size
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = float(values.mean())
    if n < 2:
        return mean, math.nan, math.nan
    return mean, float(values.std(ddof=1) / math.sqrt(n)), float(n - 1)


def seed_variance_share(frame: pd.DataFrame, value: str, size: str, seed: str) -> float:
    """The seed's share of the variance of ``value`` once each fraction's mean is removed: ``σ²_seed / (σ²_seed +
    σ²_residual)`` from the two-way additive ANOVA of a complete seeds × fractions table (variance components
    by the method of moments, σ²_seed clipped at 0). NaN where the table is incomplete or smaller than 2 × 2.
    Descriptive: the intervals never use it."""
    wide = frame.pivot_table(index=seed, columns=size, values=value)
    if wide.isna().any().any() or min(wide.shape) < 2:
        return math.nan
    y = wide.to_numpy(float)  # (seeds, fractions)
    n, k = y.shape
    residual = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    ms_error = float((residual ** 2).sum()) / ((n - 1) * (k - 1))
    ms_seed = k * float(((y.mean(1) - y.mean()) ** 2).sum()) / (n - 1)
    between = max(0.0, (ms_seed - ms_error) / k)
    total = between + ms_error
    return between / total if total > 0 else math.nan


def trend_fit(frame: pd.DataFrame, value: str = "diff", size: str | None = None, seed: str = "seed") -> TrendFit:
    """The mean contrast and the slope per decade of ``value`` over the fractions, each from one value per
    ``seed`` (module docstring). ``size``: the column of training-set sizes (``train_images`` if present, else
    ``fraction``: the slope is the same for sizes proportional to the fractions). Rows with a missing value are
    dropped. Raises ValueError with no observation."""
    size = _sizes(frame, size)
    data = frame[[size, seed, value]].dropna()
    if data.empty:
        raise ValueError("trend_fit: no observation")
    logs = np.log10(data[size].to_numpy(float))
    means = seed_means(data, value, seed).to_numpy(float)
    mean, mean_se, mean_df = _mean_se(means)
    slopes = []
    for _, g in data.assign(_log=logs).groupby(seed):
        if g["_log"].nunique() >= 2:
            slopes.append(np.polyfit(g["_log"].to_numpy(float), g[value].to_numpy(float), 1)[0])
    slope, slope_se, slope_df = _mean_se(np.asarray(slopes, dtype=float))
    return TrendFit(mean=mean, mean_se=mean_se, mean_df=mean_df, slope=slope, slope_se=slope_se, slope_df=slope_df,
                    observations=len(data), seeds=int(data[seed].nunique()), fractions=int(np.unique(logs).size),
                    centre=float(10 ** logs.mean()), seed_sd=float(means.std(ddof=1)) if means.size > 1 else math.nan,
                    seed_variance_share=seed_variance_share(data, value, size, seed))


TABLE_COLUMNS = ["comparison", "mean", "mean_ci_low", "mean_ci_high", "mean_adj_low", "mean_adj_high",
                 "mean_adj_confidence", "p_mean", "p_mean_holm", "slope_per_decade", "slope_ci_low", "slope_ci_high",
                 "slope_adj_low", "slope_adj_high", "slope_adj_confidence", "p_slope", "p_slope_holm", "mean_df",
                 "slope_df", "observations", "seeds", "fractions", "centre", "seed_sd", "seed_variance_share"]


def trend_table(comparisons: dict[str, pd.DataFrame], confidence: float, value: str = "diff",
                size: str | None = None, seed: str = "seed") -> pd.DataFrame:
    """One row per comparison (:data:`TABLE_COLUMNS`, in the order of ``comparisons``, which maps a name such as
    ``"vit - resnet"`` to its frame of per-seed differences, :func:`trend_fit`): the mean contrast and the slope per
    decade, each with its unadjusted ``confidence`` t-interval and its Holm-adjusted one across the comparisons
    (means one family, slopes another; :func:`~study.stats.intervals.holm_levels`), p-values raw and Holm-adjusted,
    degrees of freedom, and the design's size."""
    alpha = 1.0 - confidence
    fits = {name: trend_fit(frame, value, size, seed) for name, frame in comparisons.items()}
    p_mean = [f.p_mean for f in fits.values()]
    p_slope = [f.p_slope for f in fits.values()]
    levels_mean, levels_slope = holm_levels(p_mean, alpha), holm_levels(p_slope, alpha)
    holm_mean, holm_slope = holm_p(p_mean), holm_p(p_slope)
    rows = []
    for i, (name, f) in enumerate(fits.items()):
        record = asdict(f)
        mean_ci = t_bounds(f.mean, f.mean_se, f.mean_df, alpha)
        slope_ci = t_bounds(f.slope, f.slope_se, f.slope_df, alpha)
        mean_adj = t_bounds(f.mean, f.mean_se, f.mean_df, levels_mean[i])
        slope_adj = t_bounds(f.slope, f.slope_se, f.slope_df, levels_slope[i])
        rows.append({
            "comparison": name, "mean": f.mean, "mean_ci_low": mean_ci[0], "mean_ci_high": mean_ci[1],
            "mean_adj_low": mean_adj[0], "mean_adj_high": mean_adj[1], "mean_adj_confidence": 1 - levels_mean[i],
            "p_mean": p_mean[i], "p_mean_holm": holm_mean[i], "slope_per_decade": f.slope,
            "slope_ci_low": slope_ci[0], "slope_ci_high": slope_ci[1], "slope_adj_low": slope_adj[0],
            "slope_adj_high": slope_adj[1], "slope_adj_confidence": 1 - levels_slope[i], "p_slope": p_slope[i],
            "p_slope_holm": holm_slope[i],
            **{k: record[k] for k in ("mean_df", "slope_df", "observations", "seeds", "fractions", "centre",
                                      "seed_sd", "seed_variance_share")},
        })
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def step_free_pairs(pairs: list[tuple[str, str]], measured, step_bound: pd.DataFrame) -> list[tuple[str, str, list]]:
    """``(a, b, fractions)`` for each pair of ``pairs`` whose two models are both ``measured`` (a collection of model
    names), in order: the fractions at which no run of ``a`` or ``b`` is step-bound, in the order of
    ``step_bound``'s index.

    ``step_bound``: one row per (fraction, seed), one column per model, true (or 1) where that run is step-bound:
    still improving on the min_steps floor, so that more steps, not more data, would have raised it
    (:mod:`study.runs.table`). A slope over fractions that includes one would mix the budget into the trend."""
    out = []
    for a, b in pairs:
        if a not in measured or b not in measured:
            continue
        flagged = (step_bound[a] + step_bound[b]).groupby(level="fraction").sum()
        out.append((a, b, [f for f in flagged.index if flagged[f] == 0]))
    return out


def decade_slopes(values: pd.Series, fractions: list, sizes: pd.Series) -> np.ndarray:
    """Each seed's least-squares slope of ``values`` (index (fraction, seed)) on log₁₀ of its training images
    (``sizes``: training images per fraction), over ``fractions`` (:func:`study.stats.intervals.seed_slopes`: a
    seed with fewer than 2 of them contributes no slope)."""
    x = np.log10(sizes[fractions].to_numpy(float))
    per_seed = values.unstack("seed").reindex(fractions)  # (fractions, seeds)
    return seed_slopes(x, [per_seed[s].to_numpy() for s in per_seed])


def slope_rows(slopes: list[np.ndarray], families: list, confidence: float, inferred_only: bool = False
               ) -> list[dict]:
    """One dict of statistics per sample of per-seed slopes, in input order: the mean slope and its raw
    ``confidence`` t-interval (``slope_per_decade``, ``ci_*``), the Holm-adjusted interval across the samples of
    the same family (``families[i]`` labels sample ``i``'s; ``adj_*``, ``p_holm``, ``significant``), ``seeds``,
    ``inference`` (at least :data:`~study.stats.intervals.MIN_SEEDS` slopes) and, where no trend is detected, the
    ``equivalence_bound``. ``inferred_only``: ``significant`` also needs ``inference``."""
    out: list[dict] = [{} for _ in slopes]
    for family in dict.fromkeys(families):
        members = [i for i, label in enumerate(families) if label == family]
        for i, adj in zip(members, holm_intervals([slopes[i] for i in members], confidence)):
            values = slopes[i]
            mean, _, half = t_interval(values, confidence) if values.size else (np.nan, np.nan, np.nan)
            inference = values.size >= MIN_SEEDS
            out[i] = {"slope_per_decade": mean, "ci_low": mean - half, "ci_high": mean + half, "adj_ci_low": adj.low,
                      "adj_ci_high": adj.high, "adj_confidence": adj.confidence, "p_holm": adj.p_holm,
                      "significant": bool(inference and adj.significant) if inferred_only else adj.significant,
                      "seeds": values.size, "inference": inference,
                      "equivalence_bound": equivalence_bound(adj.low, adj.high, adj.significant, values.size)}
    return out
