"""Power of the t-test over seeds, at one fraction and pooled over fractions: textbook values and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from study.stats import power as P


def test_the_textbook_paired_t_value():
    # δ/σ = 1, α = 0.05 two-sided, 80%: 10 pairs (the exact noncentral t; the normal approximation says 8)
    assert P.seeds_for_power(0.05, 0.05, power=0.8, alpha=0.05) == 10
    assert P.paired_power(10, 1.0, 1.0) == pytest.approx(0.803, abs=0.002)
    assert P.paired_power(9, 1.0, 1.0) < 0.8
    # δ/σ = 0.5: 34 pairs (G*Power's value for the matched-pairs t-test)
    assert P.seeds_for_power(0.5, 1.0) == 34
    # the sign of the effect does not matter (two-sided)
    assert P.paired_power(7, -0.03, 0.02) == P.paired_power(7, 0.03, 0.02)


def test_power_matches_a_simulation():
    rng = np.random.default_rng(0)
    n, effect, sd, trials = 6, 0.04, 0.03, 20_000
    samples = rng.normal(effect, sd, size=(trials, n))
    t = samples.mean(axis=1) / (samples.std(axis=1, ddof=1) / math.sqrt(n))
    simulated = np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1))
    assert P.paired_power(n, effect, sd) == pytest.approx(simulated, abs=0.01)


def test_a_family_asks_for_more_seeds_at_the_bonferroni_level():
    one = P.seeds_for_power(0.05, 0.05)
    five = P.seeds_for_power(0.05, 0.05, family=5)
    assert five > one
    # α/m is the per-test level: the same as asking α = 0.01 of a single test
    assert five == P.seeds_for_power(0.05, 0.05, alpha=0.01)
    assert P.paired_power(five, 0.05, 0.05, family=5) >= 0.8 > P.paired_power(five - 1, 0.05, 0.05, family=5)
    assert math.isnan(P.paired_power(1, 0.05, 0.05))
    assert P.seeds_for_power(1e-6, 1.0, most=50) is None
    with pytest.raises(ValueError):
        P.paired_power(5, 0.05, 0.0)


def test_power_from_the_seed_level_sd_matches_a_simulation_with_a_seed_effect():
    """Random intercept per seed (ρ = 0.5), 5 seeds x 3 fractions, a t-test on the seeds' means: its power is that
    of paired_power with the SD of a seed's mean, √(ρσ² + (1 − ρ)σ²/k), not σ/√k (the fractions taken as
    independent), which overstates it."""
    rng = np.random.default_rng(1)
    n, k, effect, sd, rho, trials = 5, 3, 0.03, 0.04, 0.5, 20_000
    seed_part = rng.normal(0, sd * math.sqrt(rho), size=(trials, n, 1))
    within = rng.normal(0, sd * math.sqrt(1 - rho), size=(trials, n, k))
    means = (effect + seed_part + within).mean(axis=2)
    t = means.mean(axis=1) / (means.std(axis=1, ddof=1) / math.sqrt(n))
    simulated = np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1))
    seed_sd = sd * math.sqrt(rho + (1 - rho) / k)
    assert P.paired_power(n, effect, seed_sd) == pytest.approx(simulated, abs=0.01)
    assert P.paired_power(n, effect, sd / math.sqrt(k)) > simulated + 0.1


def test_the_sd_behind_an_interval():
    # backing the SD out of a t-interval inverts study.stats.intervals.t_interval
    from study.stats.intervals import t_interval

    values = [0.02, -0.01, 0.05, 0.03]
    mean, sample_sd, half = t_interval(values, 0.95)
    assert P.sd_from_t_interval(mean - half, mean + half, 4, 0.95) == pytest.approx(sample_sd)


def test_power_is_defined_far_in_the_tail():
    """scipy's noncentral t returns NaN for the negligible lower tail at some noncentralities (about 10 with 13
    degrees of freedom): the power is then the upper tail alone, not NaN."""
    assert P.paired_power(14, 0.05, 0.019) == pytest.approx(1.0, abs=1e-9)
