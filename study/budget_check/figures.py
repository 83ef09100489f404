"""The figure of the budget check (:mod:`study.budget_check.check`): the change of test top-1 with a longer
budget, per model and fraction, against the tolerance band. Style and saving: :mod:`study.outputs.figure_style`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from study.outputs.figure_style import (DOUBLE_COLUMN_IN, SINGLE_COLUMN_IN, model_colour, paper_style, percent_label,
                                         require_columns, short_count)

_DECIDED = ("converged", "not budget-bound", "budget-bound")


def budget_check_figure(cells: pd.DataFrame) -> Figure:
    """Mean Δ top-1 (longer budget − study's, in points) per model, grouped by fraction: the raw t-interval (thin),
    the Holm-adjusted one (thick), the ``±tolerance`` band (grey) a converged cell's adjusted interval lies in;
    filled markers where a verdict was reached (converged, not budget-bound or budget-bound), hollow otherwise.

    Columns: ``model``, ``fraction``, ``train_images``, ``delta_mean``, ``delta_ci_low/high``, ``adj_ci_low/high``,
    ``tolerance``, ``factor``, ``verdict``.
    """
    require_columns(cells, {"model", "fraction", "train_images", "delta_mean", "delta_ci_low", "delta_ci_high",
                            "adj_ci_low", "adj_ci_high", "tolerance", "factor", "verdict"}, "budget_check_figure")
    models = list(dict.fromkeys(cells["model"]))
    fractions = sorted(cells["fraction"].unique())
    width = 0.8 / max(len(models), 1)
    tolerance = 100 * float(cells["tolerance"].iloc[0])
    with paper_style(grid=True):
        fig = Figure(figsize=(SINGLE_COLUMN_IN if len(cells) <= 8 else DOUBLE_COLUMN_IN, 2.4), layout="constrained")
        ax = fig.subplots()
        ax.axhspan(-tolerance, tolerance, color="0.85", linewidth=0, zorder=0)
        ax.axhline(0, color="0.3", linewidth=0.8)
        for j, model in enumerate(models):
            colour = model_colour(str(model))
            g = cells[cells["model"] == model].set_index("fraction").reindex(fractions)
            x = np.arange(len(fractions)) + (j - (len(models) - 1) / 2) * width
            ok = g["delta_mean"].notna().to_numpy()
            x, g = x[ok], g[ok]
            for low, high, line in (("delta_ci_low", "delta_ci_high", 0.8), ("adj_ci_low", "adj_ci_high", 2.2)):
                ax.vlines(x, 100 * g[low], 100 * g[high], color=colour, linewidth=line, alpha=0.6)
            y = 100 * g["delta_mean"].to_numpy(float)
            decided = g["verdict"].isin(_DECIDED).to_numpy(bool)
            ax.scatter(x[decided], y[decided], s=16, color=colour, zorder=3)
            ax.scatter(x[~decided], y[~decided], s=16, facecolors="white", edgecolors=[colour], zorder=3)
        sizes = cells.groupby("fraction")["train_images"].median()
        ax.set_xticks(np.arange(len(fractions)),
                      [f"{percent_label(f)}\n{short_count(int(sizes[f]))} images" for f in fractions])
        ax.set_xlim(-0.6, len(fractions) - 0.4)
        ax.set_ylabel(f"Δ test top-1, x{float(cells['factor'].iloc[0]):g} budget (points)")
        handles = [Patch(color=model_colour(str(m)), label=str(m)) for m in models]
        handles.append(Patch(color="0.85", label=f"±{tolerance:g} point{'' if tolerance == 1 else 's'}"))
        ax.legend(handles=handles, frameon=False, fontsize=6)
        fig.canvas.draw()
    return fig
