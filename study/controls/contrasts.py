"""The controls' statistics: each comparison's paired differences, their mean over the fractions by one model
(:func:`study.stats.trend.trend_table`), the same per fraction, each on-grid probe beside its off-grid control, and
what the seeds can detect.

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
from study.stats.power import pooled_power, pooled_sd, pooled_seeds_for_power
from study.stats.trend import effect_verdict, trend_table

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
                                   train_images=frame["fraction"].map(images).astype(int)))
    columns = ["comparison", "arm", "against", *KEYS, "fraction", "train_images", "seed", "diff", "flagged"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def pooled_contrasts(diffs: pd.DataFrame, confidence: float, smallest_effect: float) -> pd.DataFrame:
    """Per condition, one row per comparison: the mean contrast over the fractions and its slope per decade of
    training images (:func:`study.stats.trend.trend_table`; Holm families: the condition's configured pairs, and
    its uniform-attention pairs), in
    points, with the verdict against ``smallest_effect`` (a share) and the bound the data support."""
    rows = []
    family = diffs["arm"].str.endswith(UNIFORM_SUFFIX).map({True: "uniform attention", False: "controls"})
    for (*key, name), at in diffs.assign(family=family).groupby([*KEYS, "family"], sort=True):
        frames = {c: g[["train_images", "seed", "diff"]] for c, g in at.groupby("comparison", sort=False)}
        fitted = trend_table(frames, confidence, size="train_images")
        flagged = at.groupby("comparison")["flagged"].sum()
        for row in fitted.itertuples():
            verdict = effect_verdict(row.mean_adj_low, row.mean_adj_high, smallest_effect)
            rows.append({"comparison": row.comparison, "family": name, **dict(zip(KEYS, key)),
                         "condition": condition_label(*key),
                         **{c: getattr(row, c) for c in fitted.columns if c != "comparison"},
                         "verdict": verdict.label, "bound": verdict.bound,
                         "flagged_pairs": int(flagged[row.comparison])})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    points = [c for c in table.columns if c.startswith(("mean", "slope")) and not c.endswith(("confidence", "df"))]
    table[points + ["bound"]] = table[points + ["bound"]] * 100  # shares -> points of top-1
    return table


def grid_table(pooled: pd.DataFrame, pairs: list[GridPair]) -> pd.DataFrame:
    """Each comparison's contrast on the grid beside each off-grid control (points, adjusted intervals, verdicts):
    a win that holds only on the grid belongs to the tokenisation."""
    rows = []
    for pair in pairs:
        for comparison, at in pooled.groupby("comparison", sort=False):
            on = _row(at, pair.on_grid)
            for control in pair.off_grid:
                off = _row(at, control)
                if on is None or off is None:
                    continue
                rows.append({"comparison": comparison, "probe": pair.label,
                             "on_grid": condition_label(*pair.on_grid), "off_grid": condition_label(*control),
                             **{f"on_{k}": on[k] for k in ("mean", "mean_adj_low", "mean_adj_high", "verdict")},
                             **{f"off_{k}": off[k] for k in ("mean", "mean_adj_low", "mean_adj_high", "verdict")}})
    return pd.DataFrame(rows)


def _row(at: pd.DataFrame, condition: tuple[str, str, float]) -> pd.Series | None:
    probe, variant, level = condition
    hit = at[(at["probe"] == probe) & (at["variant"] == variant) & (at["level"] == level)]
    return None if hit.empty else hit.iloc[0]


def power_table(diffs: pd.DataFrame, conditions: list[tuple[str, str, float]], smallest_effect: float,
                power: float, alpha: float, family: int) -> pd.DataFrame:
    """What the seeds can detect, per comparison at the given conditions: the pooled within-fraction SD of the paired
    differences (points), the seeds and fractions run, the power of the pooled model's test of the mean contrast
    to detect ``smallest_effect`` at ``alpha`` over a Holm family of ``family`` (its strictest level, α/family), and
    the seeds that power would need. The observations are taken as independent (``between_share`` 0, the OLS fit):
    the seeds' shared part, where it exists, makes the real power lower."""
    rows = []
    for condition in [CLEAN, *conditions]:
        at = diffs[(diffs["probe"] == condition[0]) & (diffs["variant"] == condition[1])
                   & (diffs["level"] == condition[2])]
        for comparison, g in at.groupby("comparison", sort=False):
            sd, _ = pooled_sd(g, value="diff", by="fraction")
            seeds, fractions = g["seed"].nunique(), g["fraction"].nunique()
            ok = math.isfinite(sd) and sd > 0
            rows.append({"comparison": comparison, "condition": condition_label(*condition),
                         "sd_points": 100 * sd, "seeds": seeds, "fractions": fractions,
                         "effect_points": 100 * smallest_effect, "alpha": alpha, "family": family,
                         "power": pooled_power(seeds, fractions, smallest_effect, sd, alpha, family) if ok else math.nan,
                         "seeds_needed": (pooled_seeds_for_power(fractions, smallest_effect, sd, power, alpha, family)
                                          if ok else None)})
    return pd.DataFrame(rows)


def fraction_contrasts(table: pd.DataFrame, pairs: list[tuple[str, str]], confidence: float) -> pd.DataFrame:
    """The comparisons per fraction: :func:`study.robustness.contrasts.contrasts` of top-1 (the robustness stage's
    statistics, Holm across the fractions of one comparison and condition)."""
    return contrasts(table, pairs, "accuracy", confidence)
