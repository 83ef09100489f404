"""Figures of the data-efficiency analysis (:mod:`study.curves.efficiency`): test top-1 against training
images, and the paired gaps between models. Style and saving: :mod:`study.outputs.figure_style`.

Accuracy is drawn in percent and gaps in percentage points, the units the report's text uses; the tables keep
shares (0-1), and the figures' CSVs are those tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from study.outputs.figure_style import (DOUBLE_COLUMN_IN, SINGLE_COLUMN_IN, contrast_markers, model_colour, paper_style,
                                         require_columns, short_count, training_images_axis)


def data_efficiency_figure(runs: pd.DataFrame, confidence: float) -> Figure:
    """Test top-1 (%) against training images (log x), one colour per model: each run as a faint dot,
    the mean over seeds as a line, and its Student-t ``confidence`` interval as a band.

    Columns: ``model``, ``train_images``, ``test_top1`` (one row per run, seeds as repeated rows).
    """
    from study.stats.intervals import t_interval  # the same interval as the study's tables

    require_columns(runs, {"model", "train_images", "test_top1"}, "data_efficiency_figure")
    with paper_style(grid=True):
        fig = Figure(figsize=(SINGLE_COLUMN_IN, 2.6), layout="constrained")
        ax = fig.subplots()
        for model, group in runs.groupby("model", sort=True):
            colour = model_colour(str(model))
            ax.scatter(group["train_images"], 100 * group["test_top1"], s=6, color=colour, alpha=0.35,
                       linewidths=0)
            points = []
            for size, per_size in group.groupby("train_images", sort=True):
                mean, _, half = t_interval(100 * per_size["test_top1"].to_numpy(), confidence)
                points.append((size, mean, half))
            sizes, means, halves = (np.array(column, dtype=float) for column in zip(*points))
            ax.plot(sizes, means, marker="o", markersize=3, color=colour, label=str(model))
            if np.isfinite(halves).any():  # a single seed has no interval
                ax.fill_between(sizes, means - halves, means + halves, color=colour, alpha=0.2,
                                linewidth=0)
        ax.set_xscale("log")
        ax.minorticks_off()  # log minor labels collide at this width; label the actual sizes
        sizes = np.sort(runs["train_images"].unique())
        ax.set_xticks(sizes, [short_count(int(size)) for size in sizes])
        ax.set_xlabel("Training images")
        ax.set_ylabel("Test top-1 (%)")
        if "under_trained" in runs and runs["under_trained"].any():
            flagged = runs[runs["under_trained"].astype(bool)]
            ax.scatter(flagged["train_images"], 100 * flagged["test_top1"], s=22, facecolors="none", edgecolors="0.2",
                       linewidths=0.6, label="still improving at the end")
        ax.legend(frameon=False, title=f"mean, {confidence:.0%} CI")
        fig.canvas.draw()
    return fig


_ADJUSTED_WIDTH, _ADJUSTED_ALPHA = 5.0, 0.3
_RAW_COLOUR, _RAW_WIDTH, _CAP_SIZE = "0.15", 0.9, 24


def gaps_figure(gaps: pd.DataFrame) -> Figure:
    """Paired gaps ``a − b`` (percentage points) against training images, one panel per comparison: the mean
    over seeds, the raw t-interval (a thin dark line with end caps) inside the Holm-adjusted one (a wide pale bar),
    both named in a legend; filled markers where the adjusted interval excludes 0 with enough seeds to infer,
    hollow otherwise.

    Columns: ``comparison``, ``train_images``, ``gap_mean``, ``gap_ci_low/high``, ``adj_ci_low/high``,
    ``significant``, ``inference``.
    """
    require_columns(gaps, {"comparison", "train_images", "gap_mean", "gap_ci_low", "gap_ci_high", "adj_ci_low",
                            "adj_ci_high", "significant", "inference"}, "gaps_figure")
    comparisons = list(dict.fromkeys(gaps["comparison"]))
    with paper_style(grid=True):
        fig = Figure(figsize=(DOUBLE_COLUMN_IN, 2.3), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(comparisons), sharey=True))
        for ax, comparison in zip(axes, comparisons):
            g = gaps[gaps["comparison"] == comparison].sort_values("train_images")
            colour = model_colour(comparison.split(" - ")[0])
            x, y = g["train_images"].to_numpy(float), 100 * g["gap_mean"].to_numpy(float)
            # Drawn alike, the two nested intervals read as one bar: pale and wide for the adjusted one, dark,
            # thin and capped for the raw one, on top.
            ax.vlines(x, 100 * g["adj_ci_low"], 100 * g["adj_ci_high"], color=colour, linewidth=_ADJUSTED_WIDTH,
                      alpha=_ADJUSTED_ALPHA)
            for end in ("gap_ci_low", "gap_ci_high"):
                ax.scatter(x, 100 * g[end], marker="_", s=_CAP_SIZE, color=_RAW_COLOUR, linewidths=_RAW_WIDTH)
            ax.vlines(x, 100 * g["gap_ci_low"], 100 * g["gap_ci_high"], color=_RAW_COLOUR, linewidth=_RAW_WIDTH)
            ax.plot(x, y, color=colour, linewidth=1)
            contrast_markers(ax, x, y, (g["significant"] & g["inference"]).to_numpy(bool), colour, 16)
            training_images_axis(ax, x)
            ax.set_title(comparison)
        axes[0].set_ylabel("Top-1 gap (points)")
        fig.legend(handles=[Line2D([], [], color="0.45", linewidth=_ADJUSTED_WIDTH, alpha=_ADJUSTED_ALPHA,
                                   label="Holm-adjusted interval"),
                            Line2D([], [], color=_RAW_COLOUR, linewidth=_RAW_WIDTH, marker="_", markersize=6,
                                   label="unadjusted t-interval")],
                   loc="outside lower center", ncols=2, frameon=False)
        fig.canvas.draw()
    return fig
