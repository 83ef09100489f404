"""Data-efficiency curves: test accuracy against training-set size, over seeds, and what they support.

From every run's ``metrics.json`` (one row per run, :func:`study.runs.table.collect_runs`):

- :func:`summarise` — per model × fraction: mean, std and t-interval over seeds, and how many runs were
  under-trained or step-bound.
- :func:`paired_gaps` — ``a − b`` per fraction, paired by seed (same subset), with the raw t-interval, the
  Holm-adjusted one across the fractions of the comparison (:func:`study.stats.intervals.holm_intervals`) and,
  where that includes 0, the equivalence bound (:func:`study.stats.intervals.equivalence_bound`).
- :func:`crossings` — every sign change of the mean gap, and a crossing *claimed* only when the gap is
  significantly negative at one fraction and significantly positive at a larger one (or the reverse).
- :func:`gap_trends` — slope of the per-seed gap against log₁₀(training images), on the accuracy scale and
  on the error-ratio scale, with a t-interval over seeds and one Holm-adjusted across the comparisons of a scale
  (fitted by :mod:`study.stats.trend`, as the robustness stage's contrast trends are).
- :func:`power_law_table` — ``error ≈ a·n^(−b) + c`` fitted to the runs that are not step-bound, with
  parameter intervals from a bootstrap over seeds, a flag on every parameter that sits on its bound or whose
  interval is too wide to determine it, and whether the fit is identified at all (:func:`identified`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import optimize

from study.stats.intervals import MIN_SEEDS, equivalence_bound, holm_intervals, t_interval
from study.stats.resampling import MIN_BOOTSTRAP_SEEDS
from study.stats.trend import decade_slopes, slope_rows, step_free_pairs

# Bounds of the power-law fit: a ≥ 0, 0 ≤ b ≤ 5, 0 ≤ c ≤ 1 (c is an error rate).
_LOWER, _UPPER = np.array([0.0, 0.0, 0.0]), np.array([np.inf, 5.0, 1.0])
_BOUND_TOLERANCE = 1e-4
_BOOTSTRAP = 200
# A bootstrap interval wider than this leaves its parameter undetermined: half the allowed range for b (0 to 5)
# and c (0 to 1); a, unbounded above, is a scale factor and is judged as a ratio: at most a factor of 10.
_MAX_WIDTH = {"b": 0.5 * (_UPPER[1] - _LOWER[1]), "c": 0.5 * (_UPPER[2] - _LOWER[2])}
_MAX_RATIO_A = 10.0


def summarise(runs: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model × fraction: seeds, mean/std/CI of test top-1, each DeiT head's mean, flagged runs."""
    rows = []
    for (model, fraction), group in runs.groupby(["model", "fraction"], sort=True):
        mean, sd, half = t_interval(group["test_top1"].to_numpy(), confidence)
        row = {
            "model": model, "fraction": fraction, "train_images": int(group["train_images"].median()),
            "seeds": len(group), "top1_mean": mean, "top1_std": sd,
            "top1_ci_low": mean - half, "top1_ci_high": mean + half, "error_mean": 1.0 - mean,
            "train_top1_mean": group["train_top1"].mean(),
            "under_trained": int(group["under_trained"].sum()), "step_bound": int(group["step_bound"].sum()),
        }
        for head in ("cls", "dist"):
            values = group[f"test_top1_{head}"].dropna().to_numpy()
            row[f"top1_{head}_mean"] = values.mean() if values.size else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _wide(runs: pd.DataFrame, value: str) -> pd.DataFrame:
    return runs.pivot_table(index=["fraction", "seed"], columns="model", values=value)


GAP_COLUMNS = ["comparison", "fraction", "train_images", "seeds", "gap_mean", "gap_ci_low", "gap_ci_high",
               "adj_ci_low", "adj_ci_high", "adj_confidence", "p", "p_holm", "significant", "inference",
               "equivalence_bound", "under_trained_a", "under_trained_b", "step_bound"]


def paired_gaps(runs: pd.DataFrame, pairs: list[tuple[str, str]], confidence: float,
                value: str = "test_top1") -> pd.DataFrame:
    """``a − b`` of ``value`` (test top-1 unless told) per fraction, paired by seed (same subset), with raw and
    Holm-adjusted intervals.

    The family for Holm's correction is one comparison's fractions. ``significant`` means the adjusted
    interval excludes 0; ``inference`` is False with fewer than ``MIN_SEEDS`` paired seeds, and then no
    sentence may rest on ``significant``. ``equivalence_bound``: where a gap is not detected, the largest one
    the adjusted interval leaves possible. ``under_trained_*`` / ``step_bound`` count the flagged runs.
    """
    top1, flags, step = _wide(runs, value), _wide(runs, "under_trained"), _wide(runs, "step_bound")
    sizes = runs.groupby("fraction")["train_images"].median()
    rows = []
    for a, b in pairs:
        if a not in top1 or b not in top1:
            continue
        diff = (top1[a] - top1[b]).dropna()
        groups = list(diff.groupby(level="fraction"))
        adjusted = holm_intervals([d.to_numpy() for _, d in groups], confidence)
        for (fraction, d), adj in zip(groups, adjusted):
            mean, _, half = t_interval(d.to_numpy(), confidence)
            at = d.index
            rows.append({
                "comparison": f"{a} - {b}", "fraction": fraction, "train_images": int(sizes[fraction]),
                "seeds": d.size, "gap_mean": mean, "gap_ci_low": mean - half, "gap_ci_high": mean + half,
                "adj_ci_low": adj.low, "adj_ci_high": adj.high, "adj_confidence": adj.confidence,
                "p": adj.p, "p_holm": adj.p_holm, "significant": adj.significant, "inference": d.size >= MIN_SEEDS,
                "equivalence_bound": equivalence_bound(adj.low, adj.high, adj.significant, d.size),
                "under_trained_a": int(flags[a].loc[at].sum()), "under_trained_b": int(flags[b].loc[at].sum()),
                "step_bound": int(step[a].loc[at].sum() + step[b].loc[at].sum()),
            })
    return pd.DataFrame(rows, columns=GAP_COLUMNS)


def crossings(gaps: pd.DataFrame) -> pd.DataFrame:
    """Per comparison: every sign change of the mean gap (log-interpolated training images) and whether a
    crossing is claimed (adjusted-significant gaps of opposite signs, the negative one at fewer images, or the
    reverse), with the fractions that show it."""
    rows = []
    for comparison, g in gaps.groupby("comparison", sort=False):
        g = g.sort_values("train_images")
        n, d = np.log(g["train_images"].to_numpy(float)), g["gap_mean"].to_numpy()
        changes = []
        for i in range(len(d) - 1):
            if d[i] * d[i + 1] < 0:
                t = d[i] / (d[i] - d[i + 1])  # where the straight line between the two points hits 0
                changes.append(float(np.exp(n[i] + t * (n[i + 1] - n[i]))))
        usable = g[g["significant"] & g["inference"]]
        below = usable.loc[usable["gap_mean"] < 0, "train_images"]
        above = usable.loc[usable["gap_mean"] > 0, "train_images"]
        a, b = comparison.split(" - ")
        claims = []  # (who overtakes whom, significant behind at, significant ahead at)
        if len(below) and len(above) and below.min() < above.max():
            claims.append((f"{a} overtakes {b}", below.min(), above.max()))
        if len(below) and len(above) and above.min() < below.max():
            claims.append((f"{b} overtakes {a}", above.min(), below.max()))
        claim, first, second = claims[0] if claims else ("", np.nan, np.nan)
        rows.append({"comparison": comparison, "sign_changes": len(changes),
                     "sign_change_train_images": ";".join(f"{c:.0f}" for c in changes),
                     "crossing_claimed": bool(claims), "direction": "; ".join(c[0] for c in claims),
                     "significant_from_images": first, "significant_to_images": second})
    return pd.DataFrame(rows, columns=["comparison", "sign_changes", "sign_change_train_images", "crossing_claimed",
                                       "direction", "significant_from_images", "significant_to_images"])


TREND_COLUMNS = ["comparison", "scale", "slope_per_decade", "ci_low", "ci_high", "adj_ci_low", "adj_ci_high",
                 "adj_confidence", "p_holm", "significant", "equivalence_bound", "seeds", "fractions_used", "inference"]
TREND_SCALES = ("gap (accuracy points)", "error ratio")


def gap_trends(runs: pd.DataFrame, pairs: list[tuple[str, str]], confidence: float) -> pd.DataFrame:
    """Slope per decade of training images of the per-seed gap ``a − b`` (accuracy points) and of the error
    ratio ``error_a / error_b``, fitted per seed and summarised over seeds; step-bound fractions are left out.

    ``ci_low``/``ci_high``: the raw t-interval. The family for Holm's correction is one scale's comparisons
    (every pair is asked the same question, "does the gap change with data?"): ``adj_*``, ``significant`` and,
    where no trend is detected, ``equivalence_bound`` (per decade, in the scale's unit) come from it.
    """
    top1, step = _wide(runs, "test_top1"), _wide(runs, "step_bound")
    sizes = runs.groupby("fraction")["train_images"].median()
    rows, slopes = [], []
    for a, b, fractions in step_free_pairs(pairs, top1.columns, step):
        for scale, values in zip(TREND_SCALES, (100 * (top1[a] - top1[b]), (1 - top1[a]) / (1 - top1[b]))):
            slopes.append(decade_slopes(values, fractions, sizes))
            rows.append({"comparison": f"{a} - {b}", "scale": scale, "fractions_used": len(fractions)})
    for row, statistics in zip(rows, slope_rows(slopes, [row["scale"] for row in rows], confidence)):
        row.update(statistics)
    return pd.DataFrame(rows, columns=TREND_COLUMNS)


def power_law(n, a, b, c):
    """``a·n^(−b) + c``: the curve :func:`fit_power_law` fits, to evaluate a row of :func:`power_law_table`."""
    return a * np.power(n, -b) + c


def fit_power_law(train_images: np.ndarray, error: np.ndarray) -> dict[str, float]:
    """Least-squares fit of ``error ≈ a·n^(−b) + c`` (c: the irreducible error), NaN with < 3 sizes."""
    n, e = np.asarray(train_images, dtype=float), np.asarray(error, dtype=float)
    nan = {"a": np.nan, "b": np.nan, "c": np.nan, "rmse": np.nan}
    if np.unique(n).size < 3:
        return nan
    # Start from a straight line in log-log space with c = 0.
    slope, intercept = np.polyfit(np.log(n), np.log(np.maximum(e, 1e-6)), 1)
    p0 = (float(np.exp(intercept)), float(np.clip(-slope, 1e-3, 5.0 - 1e-3)), 0.0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (a, b, c), _ = optimize.curve_fit(power_law, n, e, p0=p0, bounds=(_LOWER, _UPPER), maxfev=20000)
    except (RuntimeError, ValueError):
        return nan
    rmse = float(np.sqrt(np.mean((power_law(n, a, b, c) - e) ** 2)))
    return {"a": float(a), "b": float(b), "c": float(c), "rmse": rmse}


def on_bound(name: str, value: float) -> bool:
    """Whether fitted parameter ``name`` (a, b or c) sits on its bound: the data did not determine it."""
    index = "abc".index(name)
    if not np.isfinite(value):
        return False
    return bool(value - _LOWER[index] <= _BOUND_TOLERANCE or _UPPER[index] - value <= _BOUND_TOLERANCE)


def too_wide(name: str, low: float, high: float) -> bool:
    """Whether the bootstrap interval ``(low, high)`` of parameter ``name`` is missing or too wide to determine it:
    b and c when it spans more than half their allowed range (b: 0 to 5, c: 0 to 1), a (unbounded above, a scale
    factor) when its upper end is more than 10 times its lower one."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return True
    if name == "a":
        return bool(low <= 0 or high > _MAX_RATIO_A * low)
    return bool(high - low > _MAX_WIDTH[name])


def identified(row: dict) -> bool:
    """Whether a row of :func:`power_law_table` is a fit the data determine: it exists, no parameter sits on its
    bound (the constrained optimum, not the data, set it) and no parameter's bootstrap interval is
    :func:`too_wide`. Only an identified fit may be quoted as a law: a, b and c trade off against each other
    (a c pinned at 0 pushes b to absorb the curvature), so one undetermined parameter unsettles the others."""
    return bool(np.isfinite(row["b"]) and not any(row[f"{k}_on_bound"] or row[f"{k}_too_wide"] for k in "abc"))


def power_law_table(runs: pd.DataFrame, confidence: float, bootstrap: int = _BOOTSTRAP, seed: int = 0) -> pd.DataFrame:
    """Per model: the fit on every run that is not step-bound, percentile intervals from ``bootstrap``
    resamples of whole seeds (a seed's runs stay together: its subsets are nested; none below
    :data:`~study.stats.resampling.MIN_BOOTSTRAP_SEEDS` seeds, ``bootstrap_seeds`` records how many), per parameter
    ``<p>_on_bound`` (:func:`on_bound`) and ``<p>_too_wide`` (:func:`too_wide`), and ``identified``
    (:func:`identified`)."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, g in runs.groupby("model", sort=True):
        used = g[~g["step_bound"].astype(bool)]
        fit = fit_power_law(used["train_images"], used["test_error"])
        seeds = used["seed"].unique()
        row = {"model": model, **fit, "runs_used": len(used), "runs_step_bound": len(g) - len(used),
               "bootstrap_seeds": len(seeds)}
        samples = []
        for _ in range(bootstrap if len(seeds) >= MIN_BOOTSTRAP_SEEDS else 0):
            chosen = pd.concat([used[used["seed"] == s] for s in rng.choice(seeds, size=len(seeds))])
            samples.append([fit_power_law(chosen["train_images"], chosen["test_error"])[k] for k in "abc"])
        samples = np.array(samples, dtype=float).reshape(-1, 3)
        tail = 100 * (1 - confidence) / 2
        for i, name in enumerate("abc"):
            finite = samples[np.isfinite(samples[:, i]), i]
            low, high = np.percentile(finite, [tail, 100 - tail]) if finite.size else (np.nan, np.nan)
            row[f"{name}_ci_low"], row[f"{name}_ci_high"] = float(low), float(high)
            row[f"{name}_on_bound"] = on_bound(name, fit[name])
            row[f"{name}_too_wide"] = too_wide(name, row[f"{name}_ci_low"], row[f"{name}_ci_high"])
        row["identified"] = identified(row)
        rows.append(row)
    return pd.DataFrame(rows)
