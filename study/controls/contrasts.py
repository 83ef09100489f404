"""The controls' statistics, all exploratory (intervals, no verdicts; the plan's claims are judged by stage
``plan``): each comparison's paired differences, their mean over the fractions with the seed as the unit
(:func:`study.stats.trend.trend_table`), the same per fraction, each on-grid probe beside its off-grid control with
their interaction, the retained accuracy of each pair under the patch-grid shuffle per fraction, and what the
seeds can detect.

Input: the robustness stage's per-run table (one row per run and condition, ``top1`` a share; the ViTs scored with
uniform attention under ``<model>@uniform``). Every difference is ``a − b`` of test top-1 in the same seed (the
same training subset, initialisation seed and data order) on the same probe images, so a seed is one paired
observation per fraction. Families for Holm's adjustment: the comparisons of one condition (the pooled table);
the fractions of one comparison and condition (the per-fraction table, :func:`study.robustness.contrasts.contrasts`).
"""

from __future__ import annotations

import math
from typing import Iterable

import pandas as pd

from study.controls import UNIFORM_SUFFIX
from study.controls.conditions import CLEAN, GridPair, condition_label
from study.robustness.contrasts import contrasts
from study.stats.power import paired_power, seeds_for_power
from study.stats.trend import trend_fit, trend_table

KEYS = ["probe", "variant", "level"]


def comparison_pairs(models: Iterable[str], pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The configured pairs whose models were scored, then every ``<model>@uniform`` against its model."""
    present = set(models)
    chosen = [(a, b) for a, b in pairs if a in present and b in present]
    uniform = [(m, m[: -len(UNIFORM_SUFFIX)]) for m in sorted(present)
               if m.endswith(UNIFORM_SUFFIX) and m[: -len(UNIFORM_SUFFIX)] in present]
    return chosen + uniform


def paired_differences(table: pd.DataFrame, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """One row per comparison, condition, fraction and seed: ``diff`` = top-1 of ``a`` − top-1 of ``b`` (a share),
    with the training images and whether either run was step-bound or still improving."""
    index = [*KEYS, "fraction", "seed"]
    wide = table.pivot_table(index=index, columns="model", values="top1")
    counts = table.pivot_table(index=index, columns="model", values="images", aggfunc="min")
    images = table.groupby("fraction")["train_images"].median()
    flagged = table.assign(flag=table["under_trained"].astype(bool) | table["step_bound"].astype(bool))
    flags = flagged.pivot_table(index=index, columns="model", values="flag", aggfunc="max")
    frames = []
    for a, b in pairs:
        diff = (wide[a] - wide[b]).dropna()
        if diff.empty:
            continue
        frame = diff.rename("diff").reset_index()
        frame["flagged"] = (flags[a].loc[diff.index].astype(bool) | flags[b].loc[diff.index].astype(bool)).to_numpy()
        frames.append(frame.assign(comparison=f"{a} - {b}", arm=a, against=b,
                                   train_images=frame["fraction"].map(images).astype(int),
                                   images=counts[a].loc[diff.index].astype(int).to_numpy()))
    columns = ["comparison", "arm", "against", *KEYS, "fraction", "train_images", "seed", "diff", "flagged", "images"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def pooled_contrasts(diffs: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per condition, one row per comparison: the mean contrast over the fractions and its slope per decade of
    training images, one value per seed (:func:`study.stats.trend.trend_table`; Holm families: the condition's
    configured pairs, and its uniform-attention pairs), in points. Exploratory: intervals, no verdict."""
    rows = []
    family = diffs["arm"].str.endswith(UNIFORM_SUFFIX).map({True: "uniform attention", False: "controls"})
    for (*key, name), at in diffs.assign(family=family).groupby([*KEYS, "family"], sort=True):
        frames = {c: g[["train_images", "seed", "diff"]] for c, g in at.groupby("comparison", sort=False)}
        fitted = trend_table(frames, confidence, size="train_images")
        flagged = at.groupby("comparison")["flagged"].sum()
        images = at.groupby("comparison")["images"].min()
        for row in fitted.itertuples():
            rows.append({"comparison": row.comparison, "family": name, **dict(zip(KEYS, key)),
                         "condition": condition_label(*key), "images": int(images[row.comparison]),
                         **{c: getattr(row, c) for c in fitted.columns if c != "comparison"},
                         "flagged_pairs": int(flagged[row.comparison])})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    points = [c for c in table.columns if c.startswith(("mean", "slope", "seed_sd"))
              and not c.endswith(("confidence", "df"))]
    table[points] = table[points] * 100  # shares -> points of top-1
    return table


def compact_pooled(pooled: pd.DataFrame) -> pd.DataFrame:
    """The pooled contrasts as a paper cites them (``control_contrasts.tex``): "mean (low to high)" with the
    Holm-adjusted bounds and their level, per comparison and condition."""
    if pooled.empty:
        return pooled
    return pd.DataFrame({
        "comparison": pooled["comparison"], "condition": pooled["condition"], "images": pooled["images"],
        "seeds": pooled["seeds"],
        "contrast (adjusted CI)": [f"{m:+.1f} ({lo:+.1f} to {hi:+.1f})" if math.isfinite(lo) else f"{m:+.1f}"
                                   for m, lo, hi in zip(pooled["mean"], pooled["mean_adj_low"],
                                                        pooled["mean_adj_high"])],
        "level": [f"{100 * c:.2f}%" if math.isfinite(c) else "–" for c in pooled["mean_adj_confidence"]],
        "slope per decade (95% CI)": [f"{m:+.1f} ({lo:+.1f} to {hi:+.1f})" if math.isfinite(lo) else "–"
                                      for m, lo, hi in zip(pooled["slope_per_decade"], pooled["slope_ci_low"],
                                                           pooled["slope_ci_high"])]})


def grid_table(pooled: pd.DataFrame, diffs: pd.DataFrame, pairs: list[GridPair], confidence: float) -> pd.DataFrame:
    """Each comparison's contrast on the ViT's patch grid beside each off-grid control (points, Holm-adjusted
    intervals from the pooled table) and their interaction: per fraction and seed, the contrast on the grid minus
    the one off it, pooled over the fractions one value per seed, with its raw ``confidence`` interval.
    Exploratory: whether a difference is "on the grid only" is a claim of the plan (stage ``plan``)."""
    rows = []
    for pair in pairs:
        for comparison, at in pooled.groupby("comparison", sort=False):
            on = _row(at, pair.on_grid)
            for control in pair.off_grid:
                off = _row(at, control)
                if on is None or off is None:
                    continue
                both = _interaction(diffs[diffs["comparison"] == comparison], pair.on_grid, control)
                fit = trend_fit(both, size="train_images")
                low, high = (100 * b for b in _bounds(fit, confidence))
                rows.append({"comparison": comparison, "probe": pair.label,
                             "on_grid": condition_label(*pair.on_grid), "off_grid": condition_label(*control),
                             **{f"on_{k}": on[k] for k in ("mean", "mean_adj_low", "mean_adj_high")},
                             **{f"off_{k}": off[k] for k in ("mean", "mean_adj_low", "mean_adj_high")},
                             "interaction": 100 * fit.mean, "interaction_ci_low": low, "interaction_ci_high": high,
                             "seeds": fit.seeds})
    return pd.DataFrame(rows)


def _bounds(fit, confidence: float) -> tuple[float, float]:
    from study.stats.intervals import t_bounds

    return t_bounds(fit.mean, fit.mean_se, fit.mean_df, 1 - confidence)


def _interaction(diffs: pd.DataFrame, on: tuple[str, str, float], off: tuple[str, str, float]) -> pd.DataFrame:
    """Per fraction and seed, the contrast under ``on`` minus the one under ``off`` (shares)."""
    def at(condition):
        probe, variant, level = condition
        return diffs[(diffs["probe"] == probe) & (diffs["variant"] == variant) & (diffs["level"] == level)]

    both = at(on).merge(at(off), on=["fraction", "seed"], suffixes=("", "_off"))
    return both.assign(diff=both["diff"] - both["diff_off"])[["train_images", "seed", "diff"]]


def _row(at: pd.DataFrame, condition: tuple[str, str, float]) -> pd.Series | None:
    probe, variant, level = condition
    hit = at[(at["probe"] == probe) & (at["variant"] == variant) & (at["level"] == level)]
    return None if hit.empty else hit.iloc[0]


def power_table(diffs: pd.DataFrame, conditions: list[tuple[str, str, float]], smallest_effect: float,
                power: float, alpha: float, family: int) -> pd.DataFrame:
    """What the seeds can detect, per comparison at the given conditions: the SD of the seeds' mean contrasts over
    the fractions (points; the seed is the unit, so this SD holds the seed's shared part of the variance), the
    seeds and fractions run, the power of the t-test on the seeds' means to detect ``smallest_effect`` at ``alpha``
    over a Holm family of ``family`` (its strictest level, α/family), and the seeds that ``power`` would need."""
    rows = []
    for condition in [CLEAN, *conditions]:
        at = diffs[(diffs["probe"] == condition[0]) & (diffs["variant"] == condition[1])
                   & (diffs["level"] == condition[2])]
        for comparison, g in at.groupby("comparison", sort=False):
            fit = trend_fit(g, size="train_images")
            sd = fit.seed_sd
            ok = math.isfinite(sd) and sd > 0
            rows.append({"comparison": comparison, "condition": condition_label(*condition),
                         "seed_sd_points": 100 * sd, "seed_variance_share": fit.seed_variance_share,
                         "seeds": fit.seeds, "fractions": fit.fractions,
                         "effect_points": 100 * smallest_effect, "alpha": alpha, "family": family,
                         "power": paired_power(fit.seeds, smallest_effect, sd, alpha, family) if ok else math.nan,
                         "seeds_needed": seeds_for_power(smallest_effect, sd, power, alpha, family) if ok else None})
    return pd.DataFrame(rows)


def retention_table(table: pd.DataFrame, pairs: list[tuple[str, str]], on_grid: tuple[str, str, float],
                    off_grid: tuple[str, str, float] | None, confidence: float) -> pd.DataFrame:
    """Per fraction, each pair's difference in retained accuracy (top-1 under the probe / its own clean top-1) under
    the patch-grid shuffle (``on_grid``) and its first off-grid control (``off_grid``), paired by seed,
    Holm-adjusted across the fractions (:func:`study.robustness.contrasts.contrasts`); column ``on_grid`` says
    which: does a model without position embedding keep more of its accuracy when its patches are shuffled, and
    does the gap grow as the ViT learns to use position?"""
    retained = contrasts(table, pairs, "retained", confidence)
    parts = []
    for condition, on in ((on_grid, True), (off_grid, False)):
        if condition is None:
            continue
        probe, variant, level = condition
        at = (retained["probe"] == probe) & (retained["variant"] == variant) & (retained["level"] == level)
        parts.append(retained[at].assign(on_grid=on))
    return pd.concat(parts, ignore_index=True) if parts else retained.iloc[0:0].assign(on_grid=False)


def fraction_contrasts(table: pd.DataFrame, pairs: list[tuple[str, str]], confidence: float) -> pd.DataFrame:
    """The comparisons per fraction: :func:`study.robustness.contrasts.contrasts` of top-1 (the robustness stage's
    statistics, Holm across the fractions of one comparison and condition)."""
    return contrasts(table, pairs, "accuracy", confidence)
