"""Data-efficiency curves: test accuracy against training-set size, over seeds.

From every run's ``metrics.json``: a tidy table (one row per run), per model × fraction the mean, std and
a t-interval over seeds, the paired gaps between models (same fraction, same seed, hence the same
subset), a power-law fit of error against data size and the point where two curves cross.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import optimize, stats


def t_interval(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """Mean and the half-width of a Student-t confidence interval; half-width is NaN for one value."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if values.size < 2:
        return mean, float("nan"), float("nan")
    sd = float(values.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, df=values.size - 1) * sd / np.sqrt(values.size))
    return mean, sd, half


def summarise(runs: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model × fraction: seeds, mean/std/CI of test top-1 (and of each DeiT head)."""
    rows = []
    for (model, fraction), group in runs.groupby(["model", "fraction"], sort=True):
        mean, sd, half = t_interval(group["test_top1"].to_numpy(), confidence)
        row = {
            "model": model, "fraction": fraction, "train_images": int(group["train_images"].median()),
            "seeds": len(group), "top1_mean": mean, "top1_std": sd,
            "top1_ci_low": mean - half, "top1_ci_high": mean + half, "error_mean": 1.0 - mean,
        }
        for head in ("cls", "dist"):
            values = group[f"test_top1_{head}"].dropna().to_numpy()
            row[f"top1_{head}_mean"] = values.mean() if values.size else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def paired_gaps(runs: pd.DataFrame, pairs: list[tuple[str, str]], confidence: float) -> pd.DataFrame:
    """``a − b`` test top-1 per fraction, paired by seed (same subset), with a t-interval."""
    wide = runs.pivot_table(index=["fraction", "seed"], columns="model", values="test_top1")
    rows = []
    for a, b in pairs:
        if a not in wide or b not in wide:
            continue
        diff = (wide[a] - wide[b]).dropna()
        for fraction, d in diff.groupby(level="fraction"):
            mean, sd, half = t_interval(d.to_numpy(), confidence)
            rows.append({"comparison": f"{a} - {b}", "fraction": fraction, "seeds": d.size,
                         "gap_mean": mean, "gap_ci_low": mean - half, "gap_ci_high": mean + half})
    return pd.DataFrame(rows, columns=["comparison", "fraction", "seeds", "gap_mean", "gap_ci_low", "gap_ci_high"])


def _power_law(n, a, b, c):
    return a * np.power(n, -b) + c


def fit_power_law(train_images: np.ndarray, error: np.ndarray) -> dict[str, float]:
    """Least-squares fit of ``error ≈ a·n^(−b) + c`` (c ≥ 0: the irreducible error)."""
    n, e = np.asarray(train_images, dtype=float), np.asarray(error, dtype=float)
    if np.unique(n).size < 3:
        return {"a": np.nan, "b": np.nan, "c": np.nan, "rmse": np.nan}
    # Start from a straight line in log-log space with c = 0.
    slope, intercept = np.polyfit(np.log(n), np.log(np.maximum(e, 1e-6)), 1)
    p0 = (float(np.exp(intercept)), float(max(-slope, 1e-3)), 0.0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (a, b, c), _ = optimize.curve_fit(
                _power_law, n, e, p0=p0, bounds=([0, 0, 0], [np.inf, 5, 1]), maxfev=20000
            )
    except (RuntimeError, ValueError):
        return {"a": np.nan, "b": np.nan, "c": np.nan, "rmse": np.nan}
    rmse = float(np.sqrt(np.mean((_power_law(n, a, b, c) - e) ** 2)))
    return {"a": float(a), "b": float(b), "c": float(c), "rmse": rmse}


def power_law_table(runs: pd.DataFrame) -> pd.DataFrame:
    rows = [{"model": model, **fit_power_law(g["train_images"], g["test_error"])}
            for model, g in runs.groupby("model", sort=True)]
    return pd.DataFrame(rows)


def crossover(summary: pd.DataFrame, a: str, b: str) -> float | None:
    """Training images where ``a``'s mean accuracy curve crosses ``b``'s (log-linear interpolation).

    Returns the first crossing from small to large data, or None if the curves do not cross.
    """
    wide = summary.pivot_table(index="train_images", columns="model", values="top1_mean")
    if a not in wide or b not in wide:
        return None
    diff = (wide[a] - wide[b]).dropna()
    n, d = np.log(diff.index.to_numpy(dtype=float)), diff.to_numpy()
    for i in range(len(d) - 1):
        if d[i] == 0:
            return float(np.exp(n[i]))
        if d[i] * d[i + 1] < 0:
            t = d[i] / (d[i] - d[i + 1])
            return float(np.exp(n[i] + t * (n[i + 1] - n[i])))
    return None
