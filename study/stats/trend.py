"""One model over fractions, paired by seed: a comparison's mean contrast and its trend with the data, tested once.

Testing a contrast at every fraction separately (:func:`study.stats.intervals.holm_intervals`) spends the seeds of
each fraction on its own test and pays Holm's price across fractions. Where the question is "does arm A beat arm B
over this range of data, and does the gap grow or shrink with it", one model over every fraction answers it with
all the observations:

    diff ~ 1 + c,   c = log10(images) − mean(log10(images)),   random intercept per seed

``diff`` is the paired per-seed difference of two arms at one fraction (same subset, initialisation and data
order). Centring ``c`` makes the intercept the mean contrast at the geometric-mean image count of the design (in a
balanced design, the mean of the contrasts over fractions), and the slope the change of the contrast per decade
of training images. The random intercept lets a seed's contrasts share a common part (a seed whose subset favours
one arm at every fraction): the seed stays the unit of replication for the mean contrast.

Fit and degrees of freedom (:func:`trend_fit`), decided here once:

- **mixed model** (statsmodels MixedLM, REML): standard errors from the fit; t quantiles with the containment
  degrees of freedom, ``seeds − 1`` for the mean (a between-seed quantity) and ``observations − seeds − 1`` for
  the slope (a within-seed one). In a balanced design these are exact (the REML estimates equal the ANOVA ones
  away from the boundary), so the intervals are those of a paired t-test on per-seed means and of a within-seed
  regression;
- **OLS fallback**: where the seeds' variance is estimated at the boundary (below 1e-6 of the residual variance:
  REML then gives the OLS fit anyway), the fit fails or does not converge, or no seed has two fractions, the
  observations are treated as independent: OLS with ``observations − 2`` degrees of freedom. The row's ``method``
  says which fit was used and ``note`` why. statsmodels' warnings are caught and summarised in the note, never
  printed.

Families (:func:`trend_table`): the means of the comparisons form one Holm family and their slopes another, each
adjusted with the convention of :func:`study.stats.intervals.holm_intervals` (the hypothesis ranked ``j`` by
p-value among ``K`` gets the level ``1 − α/(K − j)`` with j from 0, and from the first one Holm keeps every later
one gets that step's level), so an adjusted interval excludes 0 exactly where Holm rejects.

:func:`effect_verdict` words nothing: it classifies an adjusted interval against the smallest effect of interest
(``analysis.effects``) and returns the classification and the bound the data support.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats

# Below this share of the residual variance, the seeds' variance counts as estimated at the boundary (zero).
BOUNDARY = 1e-6

MIXED, OLS = "mixed", "ols"


@dataclass(frozen=True)
class TrendFit:
    """One comparison's pooled fit: the mean contrast at the centre and the slope per decade, each with its
    standard error and degrees of freedom, and what was fitted."""

    mean: float
    mean_se: float
    mean_df: float
    slope: float  # per decade of training images; NaN with a single image count
    slope_se: float
    slope_df: float
    method: str  # MIXED or OLS
    note: str  # why OLS, where it is; empty for the mixed model
    observations: int
    seeds: int
    fractions: int
    centre: float  # the geometric mean of the size column (images or fraction): where the mean contrast refers to
    seed_variance_share: float  # the random intercept's share of the variance (0 for OLS)

    @property
    def p_mean(self) -> float:
        return _p(self.mean, self.mean_se, self.mean_df)

    @property
    def p_slope(self) -> float:
        return _p(self.slope, self.slope_se, self.slope_df)


def _p(estimate: float, se: float, df: float) -> float:
    """Two-sided t-test p-value of estimate = 0; 1 for 0/0, 0 for a non-zero estimate with a zero SE, NaN where
    undefined."""
    if not (math.isfinite(estimate) and math.isfinite(se) and df > 0):
        return math.nan
    if se == 0:
        return 1.0 if estimate == 0 else 0.0
    return float(2 * stats.t.sf(abs(estimate / se), df))


def _sizes(frame: pd.DataFrame, size: str | None) -> str:
    if size is not None:
        return size
    for column in ("train_images", "fraction"):
        if column in frame:
            return column
    raise ValueError("trend_fit: the frame needs a column train_images or fraction (or name one with size=)")


def trend_fit(frame: pd.DataFrame, value: str = "diff", size: str | None = None, seed: str = "seed") -> TrendFit:
    """Fit ``value ~ 1 + c`` with a random intercept per ``seed`` (module docstring), ``c`` the centred log10 of
    column ``size`` (``train_images`` if present, else ``fraction``: the slope and the centre are the same for
    sizes proportional to the fractions). Rows with a missing value are dropped. Raises ValueError with fewer than
    2 observations."""
    size = _sizes(frame, size)
    data = frame[[size, seed, value]].dropna()
    y = data[value].to_numpy(float)
    logs = np.log10(data[size].to_numpy(float))
    centre = float(logs.mean()) if logs.size else math.nan
    c = logs - centre
    n_obs, n_seeds, n_fractions = len(data), int(data[seed].nunique()), int(np.unique(logs).size)
    if n_obs < 2:
        raise ValueError(f"trend_fit: {n_obs} observation(s); at least 2 are needed")
    sloped = n_fractions >= 2
    exog = np.column_stack([np.ones(n_obs), c]) if sloped else np.ones((n_obs, 1))
    groups = data[seed].to_numpy()
    common = {"observations": n_obs, "seeds": n_seeds, "fractions": n_fractions, "centre": float(10 ** centre)}

    repeated = n_obs > n_seeds  # some seed has two observations: the seeds' variance is identifiable
    reason = "no seed has two fractions" if not repeated else ""
    if repeated:
        fit, reason = _mixed(y, exog, groups)
        if fit is not None:
            params, bse, share = fit
            slope_df = n_obs - n_seeds - 1 if sloped else math.nan
            return TrendFit(params[0], bse[0], n_seeds - 1, params[1] if sloped else math.nan,
                            bse[1] if sloped else math.nan, slope_df, MIXED, "", seed_variance_share=share, **common)
    params, bse, df = _ols(y, exog)
    return TrendFit(params[0], bse[0], df, params[1] if sloped else math.nan, bse[1] if sloped else math.nan,
                    df if sloped else math.nan, OLS, f"OLS: {reason}", seed_variance_share=0.0, **common)


def _mixed(y: np.ndarray, exog: np.ndarray, groups: np.ndarray):
    """The REML mixed model's fixed effects, their SEs and the seeds' variance share, or ``(None, reason)`` where
    the OLS fallback applies. statsmodels' warnings are recorded, not shown."""
    from statsmodels.regression.mixed_linear_model import MixedLM

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = MixedLM(y, exog, groups).fit(reml=True)
        except (np.linalg.LinAlgError, ValueError) as err:
            return None, f"the mixed model failed ({type(err).__name__}: {err})"
    heard = sorted({str(w.message).split(".")[0] for w in caught})
    variance, scale = float(np.asarray(result.cov_re).ravel()[0]), float(result.scale)
    params = np.asarray(result.fe_params, dtype=float)
    bse = np.asarray(result.bse_fe, dtype=float)
    if not result.converged:
        return None, "the mixed model did not converge" + (f" ({'; '.join(heard)})" if heard else "")
    if not (np.isfinite(variance) and scale > 0 and variance > BOUNDARY * scale):
        return None, "the seeds' variance was estimated at zero (the boundary), where REML gives the OLS fit"
    if not (np.all(np.isfinite(params)) and np.all(np.isfinite(bse))):
        return None, "the mixed model gave no finite standard errors"
    return (params, bse, variance / (variance + scale)), ""


def _ols(y: np.ndarray, exog: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Least squares: coefficients, their SEs and the residual degrees of freedom (SEs NaN without any)."""
    coef, *_ = np.linalg.lstsq(exog, y, rcond=None)
    df = len(y) - exog.shape[1]
    if df <= 0:
        return coef, np.full(coef.shape, math.nan), df
    residual = y - exog @ coef
    sigma2 = float(residual @ residual) / df
    bse = np.sqrt(np.diag(sigma2 * np.linalg.inv(exog.T @ exog)))
    return coef, bse, df


def holm_levels(p_values, alpha: float) -> list[float]:
    """The per-test level Holm gives each p-value of a family, in input order (the convention of
    :func:`study.stats.intervals.holm_intervals`): ranked ``j`` (0 = smallest p) among the ``K`` finite p-values,
    ``α/(K − j)`` while Holm rejects, and from the first hypothesis it keeps onward that step's level for every
    later one. NaN for a NaN p-value (outside the family)."""
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


def _interval(estimate: float, se: float, df: float, level: float) -> tuple[float, float]:
    if not (math.isfinite(level) and math.isfinite(se) and df > 0):
        return math.nan, math.nan
    half = float(stats.t.ppf(1 - level / 2, df)) * se
    return estimate - half, estimate + half


TABLE_COLUMNS = ["comparison", "mean", "mean_ci_low", "mean_ci_high", "mean_adj_low", "mean_adj_high",
                 "mean_adj_confidence", "p_mean", "p_mean_holm", "slope_per_decade", "slope_ci_low", "slope_ci_high",
                 "slope_adj_low", "slope_adj_high", "slope_adj_confidence", "p_slope", "p_slope_holm", "mean_df",
                 "slope_df", "method", "note", "observations", "seeds", "fractions", "centre",
                 "seed_variance_share"]


def _holm_p(p_values) -> list[float]:
    """Holm-adjusted p-values: the running maximum of (K − rank)·p over the ordered finite p-values, capped at 1."""
    p = np.asarray(p_values, dtype=float)
    order = [i for i in np.argsort(p, kind="stable") if np.isfinite(p[i])]
    adjusted, running = [math.nan] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def trend_table(comparisons: dict[str, pd.DataFrame], confidence: float, value: str = "diff",
                size: str | None = None, seed: str = "seed") -> pd.DataFrame:
    """One row per comparison (:data:`TABLE_COLUMNS`, in the order of ``comparisons``, which maps a name such as
    ``"vit - resnet"`` to its frame of per-seed differences, :func:`trend_fit`): the mean contrast at the centre
    and the slope per decade, each with its unadjusted ``confidence`` t-interval and its Holm-adjusted one across
    the comparisons (means one family, slopes another; :func:`holm_levels`), p-values raw and Holm-adjusted,
    degrees of freedom, the fit used and why, and the design's size."""
    alpha = 1.0 - confidence
    fits = {name: trend_fit(frame, value, size, seed) for name, frame in comparisons.items()}
    p_mean = [f.p_mean for f in fits.values()]
    p_slope = [f.p_slope for f in fits.values()]
    levels_mean, levels_slope = holm_levels(p_mean, alpha), holm_levels(p_slope, alpha)
    holm_mean, holm_slope = _holm_p(p_mean), _holm_p(p_slope)
    rows = []
    for i, (name, f) in enumerate(fits.items()):
        record = asdict(f)
        mean_ci = _interval(f.mean, f.mean_se, f.mean_df, alpha)
        slope_ci = _interval(f.slope, f.slope_se, f.slope_df, alpha)
        mean_adj = _interval(f.mean, f.mean_se, f.mean_df, levels_mean[i])
        slope_adj = _interval(f.slope, f.slope_se, f.slope_df, levels_slope[i])
        rows.append({
            "comparison": name, "mean": f.mean, "mean_ci_low": mean_ci[0], "mean_ci_high": mean_ci[1],
            "mean_adj_low": mean_adj[0], "mean_adj_high": mean_adj[1], "mean_adj_confidence": 1 - levels_mean[i],
            "p_mean": p_mean[i], "p_mean_holm": holm_mean[i], "slope_per_decade": f.slope,
            "slope_ci_low": slope_ci[0], "slope_ci_high": slope_ci[1], "slope_adj_low": slope_adj[0],
            "slope_adj_high": slope_adj[1], "slope_adj_confidence": 1 - levels_slope[i], "p_slope": p_slope[i],
            "p_slope_holm": holm_slope[i],
            **{k: record[k] for k in ("mean_df", "slope_df", "method", "note", "observations", "seeds", "fractions",
                                      "centre", "seed_variance_share")},
        })
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


SUPPORTED, REFUTED, NO_EFFECT, REVERSED, INCONCLUSIVE, UNDEFINED = (
    "supported", "refuted", "no effect", "reversed", "inconclusive", "undefined")


@dataclass(frozen=True)
class EffectVerdict:
    """What an adjusted interval says about an effect of interest: ``label`` and ``bound``, the largest |effect| the
    interval leaves possible (max(|low|, |high|); NaN where the effect is supported or the interval undefined)."""

    label: str
    bound: float


def effect_verdict(low: float, high: float, smallest_effect: float, direction: int = 0) -> EffectVerdict:
    """Classify an adjusted interval ``[low, high]`` of an effect against the smallest effect of interest
    ``smallest_effect`` (> 0, ``analysis.effects``), for a claim in ``direction`` (+1: the effect is positive, −1:
    negative, 0: any difference):

    - **supported** — the interval excludes 0 on the claimed side (either side for direction 0);
    - **refuted** (a directional claim) / **no effect** (direction 0) — the interval lies inside
      ``±smallest_effect``: every effect of interest is excluded (an equivalence statement: a ``1 − a`` interval
      inside the margin is a TOST at level ``a/2``, Schuirmann 1987);
    - **reversed** — a directional claim whose interval lies wholly on the other side of 0, beyond the margin;
    - **inconclusive** — anything else: effects beyond ``±bound`` are excluded, smaller ones are not;
    - **undefined** — no interval (NaN bounds).

    ``bound`` = max(|low|, |high|) for every label but supported and undefined (NaN), so that "no effect" and
    "inconclusive" both come with the effects the data exclude.
    """
    if direction not in (-1, 0, 1):
        raise ValueError(f"direction = {direction}: +1, -1 or 0")
    if not smallest_effect > 0:
        raise ValueError(f"smallest_effect = {smallest_effect}: must be positive")
    if not (math.isfinite(low) and math.isfinite(high)):
        return EffectVerdict(UNDEFINED, math.nan)
    bound = float(max(abs(low), abs(high)))
    if (direction >= 0 and low > 0) or (direction <= 0 and high < 0):
        return EffectVerdict(SUPPORTED, math.nan)
    if -smallest_effect < low and high < smallest_effect:
        return EffectVerdict(REFUTED if direction else NO_EFFECT, bound)
    if (direction > 0 and high < 0) or (direction < 0 and low > 0):
        return EffectVerdict(REVERSED, bound)
    return EffectVerdict(INCONCLUSIVE, bound)
