"""Statistical power over training seeds: how many seeds a design needs to detect the smallest effect of interest.

The study's comparisons are paired by seed (same subset, initialisation and data order), and each is tested with
a two-sided t-test on the per-seed differences (:mod:`study.stats.intervals`). The power of that test is exact
under normal differences: the t statistic follows a noncentral t with ``df`` degrees of freedom and noncentrality
``δ / SE`` (Cohen 1988, §2.5; scipy.stats.nct), so no normal approximation is used; with few seeds the normal
approximation overstates the power noticeably (at δ/σ = 1 it asks for 8 seeds where 10 are needed).

- :func:`paired_power`, :func:`seeds_for_power` — a t-test on ``n`` per-seed values (``df = n − 1``): one paired
  difference per seed at one fraction, or each seed's mean contrast over the fractions (:mod:`study.stats.trend`),
  with ``sd`` the SD of those per-seed values. For a contrast pooled over fractions that SD is the seed-level one
  (:attr:`study.stats.trend.TrendFit.seed_sd`), which holds the seed's shared part of the variance: the SD of one
  difference divided by √fractions would take the fractions as independent and overstate the power;
- :func:`sd_from_t_interval` — the SD backed out of a reported t-interval.

A family of ``m`` comparisons (Holm's correction, as the report applies it) is planned at ``α / m``: Holm tests
its first-ranked hypothesis at that level and the others at less strict ones, so ``α / m`` (Bonferroni's level)
is the conservative per-test level — the seeds it asks for suffice for every member of the family.
"""

from __future__ import annotations

import math

from scipy import stats


def _power(effect: float, se: float, df: float, level: float) -> float:
    """Power of a two-sided t-test at ``level`` when the estimate has standard error ``se`` and ``df`` degrees of
    freedom: P(|T| > t_{1−level/2}) with T noncentral t of noncentrality ``effect / se``."""
    if not (df > 0 and se > 0):
        return math.nan
    critical = stats.t.ppf(1.0 - level / 2.0, df)
    noncentrality = abs(effect) / se
    upper = stats.nct.sf(critical, df, noncentrality)
    # The lower tail, P(T < −critical), is below 1e-10 once the noncentrality passes a few units, where scipy's
    # noncentral t (SciPy 1.x) can return NaN for it: it adds nothing to the power there.
    lower = stats.nct.cdf(-critical, df, noncentrality)
    return float(upper + (lower if math.isfinite(lower) else 0.0))


def _check(effect: float, sd: float, alpha: float, family: int) -> float:
    """The per-test level ``alpha / family``, after checking the arguments."""
    if not (sd > 0 and math.isfinite(sd)):
        raise ValueError(f"sd = {sd}: the SD of the paired differences must be positive and finite")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha = {alpha}: must lie in (0, 1)")
    if family < 1:
        raise ValueError(f"family = {family}: a family has at least one comparison")
    if not math.isfinite(effect):
        raise ValueError(f"effect = {effect}: must be finite")
    return alpha / family


def paired_power(n: int, effect: float, sd: float, alpha: float = 0.05, family: int = 1) -> float:
    """Power of the two-sided t-test on ``n`` per-seed values to detect a mean ``effect`` when those values have
    SD ``sd``: ``df = n − 1``, ``SE = sd / √n``, at the per-test level ``alpha / family``
    (Bonferroni's, the level Holm applies to the first-ranked of ``family`` comparisons: conservative). NaN below
    2 seeds (no SD, no test)."""
    level = _check(effect, sd, alpha, family)
    if n < 2:
        return math.nan
    return _power(effect, sd / math.sqrt(n), n - 1, level)


def seeds_for_power(effect: float, sd: float, power: float = 0.8, alpha: float = 0.05, family: int = 1,
                    most: int = 10_000) -> int | None:
    """The fewest seeds (at least 2) at which :func:`paired_power` reaches ``power``; ``None`` where more than
    ``most`` would be needed (or ``effect`` is 0). Example (a textbook value, Cohen 1988 Table 2.4.1 for the
    one-sample/paired case): δ/σ = 1, α = 0.05 two-sided, 80% power: 10 seeds."""
    return _smallest(lambda n: paired_power(n, effect, sd, alpha, family), power, 2, most)


def _smallest(power_at, target: float, first: int, most: int) -> int | None:
    """The smallest n in [first, most] with power_at(n) ≥ target (power rises with n: bisection after doubling)."""
    if not 0.0 < target < 1.0:
        raise ValueError(f"power = {target}: must lie in (0, 1)")

    def enough(n: int) -> bool:
        value = power_at(n)
        return math.isfinite(value) and value >= target

    high = first
    while not enough(high):
        if high >= most:
            return None
        high = min(2 * high, most)
    low = first - 1  # not enough (or below the range)
    while high - low > 1:
        mid = (low + high) // 2
        if mid >= first and enough(mid):
            high = mid
        else:
            low = mid
    return high


def sd_from_t_interval(low: float, high: float, n: int, confidence: float) -> float:
    """The sample SD behind an unadjusted Student-t interval ``[low, high]`` of a mean over ``n`` values:
    ``half-width · √n / t_{(1+confidence)/2, n−1}`` (the inverse of :func:`study.stats.intervals.t_interval`)."""
    if n < 2:
        return math.nan
    return float((high - low) / 2.0 * math.sqrt(n) / stats.t.ppf(0.5 + confidence / 2.0, n - 1))
