"""The report's sentences on the controls: what each arm that changes one thing of the ViT (or of the ResNet's
recipe) does to top-1 on the clean images and under the probes on and off the ViT's patch grid, what uniform
attention costs each ViT, and what the seeds could detect; and the section with the figure and tables behind them.

Read from the ``controls`` stage's tables (``reports/tables/controls``); nothing is computed here beyond choosing
rows. Verdicts are the stage's (:func:`study.stats.trend.effect_verdict` against ``analysis.effects.control``):
"supported" where the Holm-adjusted interval excludes zero, "no effect" where it lies inside the smallest effect
of interest, otherwise "inconclusive" with the effects the interval excludes.
"""

from __future__ import annotations

import math

import pandas as pd

from study import controls
from study.outputs.tables import markdown_table
from study.report.section import Part, Sources


def _effect(row) -> str:
    """"+3.1 points (adjusted CI +0.4 to +5.8): supported" or "... : inconclusive, beyond ±5.8 excluded"."""
    text = f"{row['mean']:+.1f} points (adjusted CI {row['mean_adj_low']:+.1f} to {row['mean_adj_high']:+.1f})"
    verdict = row["verdict"]
    if verdict in ("inconclusive", "no effect") and math.isfinite(row["bound"]):
        return f"{text}: {verdict}, effects beyond ±{row['bound']:.1f} excluded"
    return f"{text}: {verdict}"


def grid_sentences(pooled: pd.DataFrame, on_off: pd.DataFrame) -> list[str]:
    """Per comparison: the clean contrast, then each on-grid probe with its off-grid controls in one sentence."""
    out = []
    for comparison, rows in on_off.groupby("comparison", sort=False):
        clean = pooled[(pooled["comparison"] == comparison) & (pooled["probe"] == "clean")]
        parts = [f"clean {_effect(clean.iloc[0])}"] if not clean.empty else []
        for probe, at in rows.groupby("probe", sort=False):
            first = at.iloc[0]
            on = {"mean": first["on_mean"], "mean_adj_low": first["on_mean_adj_low"],
                  "mean_adj_high": first["on_mean_adj_high"], "verdict": first["on_verdict"],
                  "bound": max(abs(first["on_mean_adj_low"]), abs(first["on_mean_adj_high"]))}
            offs = "; ".join(
                f"off the grid, {r['off_grid']} "
                + _effect({"mean": r["off_mean"], "mean_adj_low": r["off_mean_adj_low"],
                           "mean_adj_high": r["off_mean_adj_high"], "verdict": r["off_verdict"],
                           "bound": max(abs(r["off_mean_adj_low"]), abs(r["off_mean_adj_high"]))})
                for _, r in at.iterrows())
            parts.append(f"{first['on_grid']} {_effect(on)} ({offs})")
        out.append(f"{comparison}, averaged over the fractions: " + "; ".join(parts) + ".")
    return out


def uniform_sentences(fractions: pd.DataFrame) -> list[str]:
    """What uniform attention costs each ViT, per fraction, on the clean images and under the patch-grid shuffle."""
    out = []
    uniform = fractions[fractions["comparison"].str.contains(controls.UNIFORM_SUFFIX, regex=False)]
    for comparison, rows in uniform.groupby("comparison", sort=False):
        for label, probe in (("clean", "clean"), ("under the patch-grid shuffle", "rearrangement")):
            at = rows[rows["probe"] == probe]
            if probe == "rearrangement" and not at.empty:
                at = at[at["level"] == at["level"].max()]
            if at.empty:
                continue
            cells = ", ".join(f"{int(r.train_images):,} images {100 * r.diff_mean:+.1f} (adjusted CI "
                              f"{100 * r.adj_ci_low:+.1f} to {100 * r.adj_ci_high:+.1f})" for r in at.itertuples())
            out.append(f"{comparison} (every attention row replaced by the uniform average over tokens at test time, "
                       f"no training) {label}: {cells}.")
    return out


def power_sentences(power: pd.DataFrame) -> list[str]:
    if power.empty:
        return []
    first = power.iloc[0]
    low, high = power["power"].min(), power["power"].max()
    return [f"Seeds: {int(first['seeds'])} per fraction over {int(first['fractions'])} fractions; at the observed "
            f"SDs of the paired differences ({power['sd_points'].min():.1f} to {power['sd_points'].max():.1f} "
            f"points) the pooled test detects a {first['effect_points']:g}-point contrast with power "
            f"{100 * low:.0f}% to {100 * high:.0f}% at α = {first['alpha']:g} over a family of "
            f"{int(first['family'])} (table `{controls.POWER}.csv`)."]


def _findings(sources: Sources) -> list[str]:
    pooled = sources.table(controls.FOLDER, controls.POOLED)
    on_off = sources.table_if_written(controls.FOLDER, controls.GRID)
    fractions = sources.table(controls.FOLDER, controls.FRACTIONS)
    power = sources.table(controls.FOLDER, controls.POWER)
    grid = grid_sentences(pooled, on_off) if on_off is not None and not on_off.empty else []
    return [*grid, *uniform_sentences(fractions), *power_sentences(power)]


def _section(sources: Sources) -> list[str]:
    on_off = sources.table_if_written(controls.FOLDER, controls.GRID)
    power = sources.table(controls.FOLDER, controls.POWER)
    lines = ["## Controls: the patch grid, attention and the recipe", ""]
    fig = sources.figure(controls.FOLDER, controls.FIGURE,
                         "Each comparison's contrast (points of test top-1, averaged over the fractions by one model "
                         "paired by seed) on the ViT's patch grid (vermillion) and off it (blue); bars: Holm-adjusted "
                         "intervals; filled: the interval excludes zero.")
    if fig:
        lines += [fig, ""]
    if on_off is not None and not on_off.empty:
        lines += ["On the grid and off it:", "", markdown_table(on_off, 1), ""]
    lines += ["What the seeds can detect:", "", markdown_table(power, 2), ""]
    return lines


NEEDS = ((controls.FOLDER, controls.POOLED), (controls.FOLDER, controls.FRACTIONS), (controls.FOLDER, controls.POWER))
FINDINGS = Part(_findings, needs=NEEDS)
SECTION = Part(_section, needs=NEEDS)
