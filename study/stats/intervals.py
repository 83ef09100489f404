"""Statistics over training seeds: the rules that decide what the report may claim.

Seeds are the unit of replication: each seed draws its own nested subsets, initialisation and data order, so
a per-seed difference between two models (same subset, same seed) is one paired observation.

- :func:`t_interval` — Student-t interval of a mean over seeds.
- :func:`holm_levels`, :func:`holm_p` — Holm's per-test levels and adjusted p-values for any family of p-values;
  :func:`t_p`, :func:`t_bounds` — a t-test and t-interval from an estimate, its SE and degrees of freedom.
- :func:`holm_intervals` — a family of paired comparisons (one comparison at every fraction) with Holm's
  step-down correction (Holm 1979), reported as intervals: the hypothesis ranked ``j`` (by p-value) among
  ``K`` gets the confidence level Holm tests it at, ``1 − α/(K − j + 1)``; from the first hypothesis Holm does
  not reject onward, every remaining one gets that step's level. An interval then excludes 0 exactly when
  Holm rejects, because a two-sided t-test rejects at level ``a`` exactly when the ``1 − a`` t-interval
  excludes 0.
- :func:`equivalence_bound` — where an adjusted interval includes 0, the largest difference it leaves possible:
  "no detectable difference" is then stated with the differences the data exclude.
- :func:`holm_differences` — several Holm families of paired differences at once (one per model, say), each
  sample's adjusted interval and equivalence bound as the columns of a contrast table.
- :func:`seed_slopes`, :func:`slope_interval` — a trend over training-set sizes fitted per seed, and its t-interval.
- :func:`seeds_within` — a projection: the seeds at which an interval of the same mean and spread would lie
  within a bound (the budget check's cost of settling an undetermined cell).
- :data:`MIN_SEEDS` — fewer seeds than this and the report describes, never infers: with two seeds the
  t-interval has one degree of freedom (t₀.₉₇₅ = 12.7) and a zero spread gives a zero-width interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_SEEDS = 3


def t_interval(values, confidence: float) -> tuple[float, float, float]:
    """Mean, sample std and the half-width of a Student-t interval; std and half-width are NaN for one value."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if values.size < 2:
        return mean, float("nan"), float("nan")
    sd = float(values.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, df=values.size - 1) * sd / np.sqrt(values.size))
    return mean, sd, half


def t_test_p(values) -> float:
    """Two-sided one-sample t-test p-value of mean = 0; NaN below 2 values, 1 when all values are 0.

    With a zero spread and a non-zero mean the test statistic is infinite; p is then 0.
    """
    values = np.asarray(values, dtype=float)
    if values.size < 2:
        return float("nan")
    sd = values.std(ddof=1)
    if sd == 0:
        return 1.0 if values.mean() == 0 else 0.0
    t = values.mean() / (sd / np.sqrt(values.size))
    return float(2 * stats.t.sf(abs(t), df=values.size - 1))


@dataclass(frozen=True)
class Adjusted:
    """One comparison of a Holm family: mean, adjusted interval and p-value, and whether it is significant."""

    mean: float
    low: float
    high: float
    p: float
    p_holm: float
    confidence: float  # the confidence level the adjusted interval uses
    significant: bool


def holm_levels(p_values, alpha: float) -> list[float]:
    """The per-test level Holm gives each p-value of a family, in input order: ranked ``j`` (0 = smallest p) among
    the ``K`` finite p-values, ``α/(K − j)`` while Holm rejects, and from the first hypothesis it keeps onward that
    step's level for every later one. NaN for a NaN p-value (outside the family)."""
    p = np.asarray(p_values, dtype=float)
    order = [i for i in np.argsort(p, kind="stable") if np.isfinite(p[i])]
    levels = [math.nan] * len(p)
    kept_at = None  # the level at which Holm first kept a hypothesis
    for rank, i in enumerate(order):
        step = alpha / (len(order) - rank)
        if kept_at is None and p[i] >= step:
            kept_at = step
        levels[i] = step if kept_at is None else kept_at
    return levels


def holm_p(p_values) -> list[float]:
    """Holm-adjusted p-values, in input order, over the finite ones (NaN for a NaN p-value): the running maximum of
    (K − rank)·p over the ascending p-values, capped at 1 (Holm 1979). It equals statsmodels'
    ``multipletests(method="holm")`` (tests/stats/test_intervals.py), which is not called because its Holm branch
    runs ``gc.collect()`` on every call: 0.2 s over a stage's heap, minutes over a stage's hundreds of families."""
    p = np.asarray(p_values, dtype=float)
    finite = np.flatnonzero(np.isfinite(p))
    adjusted = np.full(p.shape, math.nan)
    order = finite[np.argsort(p[finite], kind="stable")]  # ascending, ties in input order
    stepped = p[order] * np.arange(len(order), 0, -1)  # (K − rank)·p, rank from 0
    adjusted[order] = np.minimum(np.maximum.accumulate(stepped), 1.0)
    return adjusted.tolist()


def t_p(estimate: float, se: float, df: float) -> float:
    """Two-sided t-test p-value of estimate = 0; 1 for 0/0, 0 for a non-zero estimate with a zero SE, NaN where
    undefined (no SE or no degrees of freedom)."""
    if not (math.isfinite(estimate) and math.isfinite(se) and df > 0):
        return math.nan
    if se == 0:
        return 1.0 if estimate == 0 else 0.0
    return float(2 * stats.t.sf(abs(estimate / se), df))


def t_bounds(estimate: float, se: float, df: float, level: float) -> tuple[float, float]:
    """The two-sided ``1 − level`` t-interval of an estimate with standard error ``se`` and ``df`` degrees of
    freedom; NaN bounds where any of them is undefined."""
    if not (math.isfinite(level) and math.isfinite(se) and df > 0):
        return math.nan, math.nan
    half = float(stats.t.ppf(1 - level / 2, df)) * se
    return estimate - half, estimate + half


def holm_intervals(samples: list, confidence: float) -> list[Adjusted]:
    """Holm-adjusted t-intervals for a family of per-seed samples (e.g. one paired gap per fraction).

    ``samples[i]`` holds the per-seed values of comparison ``i``. Returns one :class:`Adjusted` per sample, in
    the input order, each at the level :func:`holm_levels` gives it. A sample of fewer than 2 values gets NaN
    bounds and is never significant.
    """
    p = [t_test_p(s) for s in samples]
    levels, adjusted = holm_levels(p, 1.0 - confidence), holm_p(p)
    out = []
    for i, sample in enumerate(samples):
        values = np.asarray(sample, dtype=float)
        if not math.isfinite(levels[i]):
            mean = float(values.mean()) if values.size else float("nan")
            out.append(Adjusted(mean, float("nan"), float("nan"), float("nan"), float("nan"), float("nan"), False))
            continue
        mean, _, half = t_interval(values, 1.0 - levels[i])
        significant = bool(mean - half > 0 or mean + half < 0)
        out.append(Adjusted(mean, mean - half, mean + half, float(p[i]), float(adjusted[i]), 1.0 - levels[i],
                            significant))
    return out


def equivalence_bound(low: float, high: float, significant: bool, seeds: int) -> float:
    """The largest |difference| an interval ``(low, high)`` that includes 0 leaves possible: max(|low|, |high|).

    By the duality of confidence intervals and tests, every difference outside a ``1 − a`` interval is rejected
    at level ``a``, and a ``1 − 2α`` interval inside ``±δ`` shows equivalence within the margin ``δ`` by two
    one-sided tests at level ``α`` (Schuirmann 1987; Lakens 2017). So "no detectable difference" comes with the
    margin the data support: differences beyond ±bound are excluded at the interval's level. NaN where a
    difference is detected (``significant``), where the interval is undefined, or with fewer than
    :data:`MIN_SEEDS` seeds (nothing is inferred then).
    """
    if significant or seeds < MIN_SEEDS or not (np.isfinite(low) and np.isfinite(high)):
        return float("nan")
    return float(max(abs(low), abs(high)))


def holm_differences(families: list[list], confidence: float) -> list[dict]:
    """For families of per-seed samples of paired differences (``families[k][i]``: comparison ``i`` of family
    ``k``), each family Holm-adjusted on its own (:func:`holm_intervals`): one dict per sample, in the order of the
    families and then of their samples, with the columns ``difference`` (the mean), ``ci_low``, ``ci_high``,
    ``confidence`` (the adjusted interval and its level), ``p_holm``, ``significant`` and ``equivalence_bound``
    (:func:`equivalence_bound`, over the sample's seeds)."""
    out = []
    for family in families:
        for sample, a in zip(family, holm_intervals(family, confidence)):
            out.append({"difference": a.mean, "ci_low": a.low, "ci_high": a.high, "confidence": a.confidence,
                        "p_holm": a.p_holm, "significant": a.significant,
                        "equivalence_bound": equivalence_bound(a.low, a.high, a.significant, len(sample))})
    return out


def seed_slopes(x, per_seed_y: list) -> np.ndarray:
    """Least-squares slope of y on x, one per seed: ``per_seed_y[s]`` holds seed ``s``'s values at the points
    ``x`` (NaN where missing); a seed with fewer than 2 points contributes no slope. Fitting per seed keeps the
    seed the unit of replication, so the slopes can be tested like any per-seed sample."""
    x = np.asarray(x, dtype=float)
    slopes = []
    for y in per_seed_y:
        y = np.asarray(y, dtype=float)
        ok = np.isfinite(y)
        if ok.sum() >= 2:
            slopes.append(np.polyfit(x[ok], y[ok], 1)[0])
    return np.array(slopes, dtype=float)


def slope_interval(x, per_seed_y: list, confidence: float) -> tuple[float, float, float, int]:
    """The slopes of :func:`seed_slopes` summarised over seeds: ``(mean slope, low, high, seeds)`` with a
    Student-t interval."""
    slopes = seed_slopes(x, per_seed_y)
    if not slopes.size:
        return float("nan"), float("nan"), float("nan"), 0
    mean, _, half = t_interval(slopes, confidence)
    return mean, mean - half, mean + half, len(slopes)


def seeds_within(deltas, tolerance: float, confidence: float, family: int, most: int = 1000) -> float:
    """Projection, not a measurement (the budget check's ``seeds_to_converge``): the fewest seeds (at least
    ``MIN_SEEDS``) at which the t-interval of the mean
    of ``deltas`` would lie within ``±tolerance`` if their mean and sample SD held, at Holm's strictest level for a
    family of ``family`` cells (``1 − (1 − confidence)/family``, Bonferroni's: the level the cell would face if its
    p-value ranked first). ``inf`` where ``|mean| ≥ tolerance`` (no number of seeds would do) or more than ``most``
    seeds would be needed; NaN below 2 values (no SD).

    The SD of a handful of seeds is itself rough (with 3 seeds its 95% interval spans about 0.5x to 6x the
    estimate), so the number is an order of magnitude, the cost of settling the verdict, not a promise.
    """
    values = np.asarray(deltas, dtype=float)
    if values.size < 2:
        return math.nan
    mean, sd = abs(float(values.mean())), float(values.std(ddof=1))
    if mean >= tolerance:
        return math.inf
    level = 1.0 - (1.0 - confidence) / max(1, family)
    for n in range(MIN_SEEDS, most + 1):
        # the half-width t_interval would give n seeds of this SD (same quantile convention)
        if mean + stats.t.ppf(0.5 + level / 2, df=n - 1) * sd / math.sqrt(n) <= tolerance:
            return float(n)
    return math.inf
