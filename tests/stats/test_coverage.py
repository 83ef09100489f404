"""Coverage of the pooled mean contrast's interval when seeds share part of their variance (intraclass correlation
0.5): 2,000 simulated studies each with 3 and with 8 seeds over the default study's 5 fractions. The interval from
the seeds' means (df = seeds − 1, study.stats.trend) must cover the true mean in 93.5-96.5% of them (the binomial
SD of a 95% coverage over 2,000 studies is 0.49 points); treating a seed's fractions as independent rows (OLS with
observations − 2 degrees of freedom, the fallback the study once used where a mixed model put the seeds' variance
at zero) must not."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from study.stats import trend as T

IMAGES = np.array([140, 290, 570, 1140, 2280])
STUDIES, TRUE_MEAN, SD, ICC = 2000, 0.04, 0.05, 0.5


def studies(seeds: int, rng: np.random.Generator) -> np.ndarray:
    """``(STUDIES, seeds, fractions)`` paired differences: the true mean, a seed part shared by a seed's fractions
    and independent noise, their variances in the ratio ICC : 1 − ICC."""
    shared = rng.normal(0, SD * math.sqrt(ICC), size=(STUDIES, seeds, 1))
    noise = rng.normal(0, SD * math.sqrt(1 - ICC), size=(STUDIES, seeds, IMAGES.size))
    return TRUE_MEAN + shared + noise


def frame(values: np.ndarray) -> pd.DataFrame:
    """One study's ``(seeds, fractions)`` values as the long table trend_fit reads."""
    seeds, fractions = values.shape
    return pd.DataFrame({"seed": np.repeat(np.arange(seeds), fractions), "train_images": np.tile(IMAGES, seeds),
                         "diff": values.ravel()})


def covers(fit: T.TrendFit, confidence: float = 0.95) -> bool:
    half = stats.t.ppf(0.5 + confidence / 2, fit.mean_df) * fit.mean_se
    return fit.mean - half <= TRUE_MEAN <= fit.mean + half


def rows_as_independent(values: np.ndarray, confidence: float = 0.95) -> bool:
    """The fallback the study no longer has: OLS of diff on the centred log10 images over all rows, its intercept's
    t-interval with observations − 2 degrees of freedom."""
    y = values.ravel()
    c = np.tile(np.log10(IMAGES) - np.log10(IMAGES).mean(), values.shape[0])
    exog = np.column_stack([np.ones_like(c), c])
    coef, *_ = np.linalg.lstsq(exog, y, rcond=None)
    df = y.size - 2
    sigma2 = float(((y - exog @ coef) ** 2).sum()) / df
    se = math.sqrt(sigma2 * np.linalg.inv(exog.T @ exog)[0, 0])
    half = stats.t.ppf(0.5 + confidence / 2, df) * se
    return coef[0] - half <= TRUE_MEAN <= coef[0] + half


@pytest.mark.slow  # 2,000 trend fits: 45 to 48 s each on a 2-core EPYC of family 23
@pytest.mark.parametrize("seeds", [3, 8])
def test_the_seed_level_interval_covers_the_mean_with_a_seed_effect(seeds):
    simulated = studies(seeds, np.random.default_rng(seeds))
    fits = [T.trend_fit(frame(study)) for study in simulated]
    assert all(fit.mean_df == seeds - 1 for fit in fits)
    coverage = np.mean([covers(fit) for fit in fits])
    assert 0.935 <= coverage <= 0.965, coverage


@pytest.mark.parametrize("seeds", [3, 8])
def test_rows_taken_as_independent_do_not_cover_it(seeds):
    simulated = studies(seeds, np.random.default_rng(seeds))
    coverage = np.mean([rows_as_independent(study) for study in simulated])
    assert coverage < 0.935, coverage
