"""The ladder's two figures, from :mod:`study.ladder.steps`' tables (data in, a Figure out, no pyplot):

- :func:`rungs_figure`: each rung's test top-1 against training images, one panel per condition (clean, shuffled),
  rungs coloured along the ladder from the ViT (light) to the ResNet (dark);
- :func:`steps_figure`: each step (rung k+1 − rung k) with its Holm-adjusted interval, one panel per condition,
  one marker per fraction; filled where the interval excludes 0, and the smallest effect of interest shaded.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from study.outputs.figure_style import DOUBLE_COLUMN_IN, paper_style, require_columns, training_images_axis

LADDER_CMAP = "viridis"  # sequential and colour-blind safe: position on the ladder reads as lightness


def _colours(count: int) -> list:
    return sns.color_palette(LADDER_CMAP, count)[::-1]  # the ViT light, the ResNet dark


def rungs_figure(accuracy: pd.DataFrame) -> Figure:
    """``accuracy``: :func:`study.ladder.steps.rung_accuracy`'s table."""
    require_columns(accuracy, {"rung", "position", "condition", "train_images", "top1"}, "rungs_figure")
    conditions = list(dict.fromkeys(accuracy["condition"]))
    rungs = accuracy.sort_values("position")["rung"].drop_duplicates().tolist()
    colours = dict(zip(rungs, _colours(len(rungs))))
    with paper_style(grid=True):
        fig = Figure(figsize=(DOUBLE_COLUMN_IN, 2.8), layout="constrained")
        axes = fig.subplots(1, len(conditions), sharey=True, squeeze=False)[0]
        for ax, condition in zip(axes, conditions):
            shown = accuracy[accuracy["condition"] == condition]
            for rung in rungs:
                line = shown[shown["rung"] == rung].sort_values("train_images")
                ax.plot(line["train_images"], line["top1"], marker="o", markersize=3, linewidth=1.2,
                        color=colours[rung], label=rung)
            training_images_axis(ax, sorted(shown["train_images"].unique()))
            ax.set_title(condition)
        axes[0].set_ylabel("Test top-1 (%)")
        axes[-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False, title="rung")
    return fig


def steps_figure(steps: pd.DataFrame, smallest: dict[str, float]) -> Figure:
    """``steps``: :func:`study.ladder.steps.step_table`'s table, its steps in ladder order; ``smallest``: the
    smallest effect of interest in points per condition (the band drawn around 0)."""
    require_columns(steps, {"step", "condition", "train_images", "mean", "adj_low", "adj_high"}, "steps_figure")
    conditions = list(dict.fromkeys(steps["condition"]))
    order = list(dict.fromkeys(steps["step"]))
    sizes = sorted(steps["train_images"].unique())
    markers = dict(zip(sizes, "os^Dv"))
    offsets = dict(zip(sizes, np.linspace(-0.2, 0.2, len(sizes)) if len(sizes) > 1 else [0.0]))
    colour = sns.color_palette("colorblind")[0]
    with paper_style(grid=True):
        fig = Figure(figsize=(DOUBLE_COLUMN_IN, 0.3 * len(order) + 1.0), layout="constrained")
        axes = fig.subplots(1, len(conditions), sharey=True, squeeze=False)[0]
        for ax, condition in zip(axes, conditions):
            band = smallest.get(condition, 0.0)
            ax.axvspan(-band, band, color="0.9", zorder=0)
            ax.axvline(0, color="0.3", linewidth=0.8)
            shown = steps[steps["condition"] == condition]
            for size in sizes:
                at = shown[shown["train_images"] == size]
                y = np.array([order.index(s) for s in at["step"]]) + offsets[size]
                claimed = ((at["adj_low"] > 0) | (at["adj_high"] < 0)).to_numpy()
                ax.errorbar(at["mean"], y, xerr=[at["mean"] - at["adj_low"], at["adj_high"] - at["mean"]], fmt="none",
                            ecolor=colour, elinewidth=0.8)
                ax.scatter(at["mean"][claimed], y[claimed], marker=markers[size], s=14, color=colour, zorder=3,
                           label=f"{size:,} images")
                ax.scatter(at["mean"][~claimed], y[~claimed], marker=markers[size], s=14, facecolors="white",
                           edgecolors=[colour], zorder=3)
            ax.set_title(condition)
            ax.set_xlabel("Step in test top-1 (points)")
        axes[0].set_yticks(range(len(order)), order)
        axes[0].invert_yaxis()  # the ViT's end of the ladder on top
        axes[-1].legend(loc="lower right", frameon=False)
    return fig
