"""The controls' figure: each comparison's contrast on the ViT's patch grid beside the same probe off it, one panel
per probe (and the clean images), so a win that holds only on the grid reads as one at a glance. Style and
saving: :mod:`study.outputs.figure_style`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from study.controls.conditions import CLEAN, GridPair, condition_label
from study.outputs.figure_style import DOUBLE_COLUMN_IN, paper_style, require_columns

_POOLED = {"comparison", "probe", "variant", "level", "mean", "mean_adj_low", "mean_adj_high"}
_ON, _OFF = "#D55E00", "#0072B2"  # vermillion on the grid, blue off it (Okabe & Ito's colour-blind-safe pair)


def _at(pooled: pd.DataFrame, condition: tuple[str, str, float]) -> pd.DataFrame:
    probe, variant, level = condition
    return pooled[(pooled["probe"] == probe) & (pooled["variant"] == variant) & (pooled["level"] == level)]


def controls_figure(pooled: pd.DataFrame, pairs: list[GridPair]) -> Figure:
    """One row per comparison, one panel per on-grid probe (the clean images first): the pooled contrast in points
    with its Holm-adjusted interval, on the grid (filled) and off it (open, one marker per control); filled means
    the adjusted interval excludes zero.

    Columns of ``pooled``: ``comparison``, ``probe``, ``variant``, ``level``, ``mean``, ``mean_adj_low``,
    ``mean_adj_high`` (:func:`study.controls.contrasts.pooled_contrasts`)."""
    require_columns(pooled, _POOLED, "controls_figure")
    comparisons = list(dict.fromkeys(pooled["comparison"]))
    panels = [("clean", CLEAN, ())] + [(p.label, p.on_grid, p.off_grid) for p in pairs]
    y = np.arange(len(comparisons))[::-1]
    height = 1.4 + 0.22 * len(comparisons)  # the legends sit below the panels
    with paper_style(grid=True):
        fig = Figure(figsize=(DOUBLE_COLUMN_IN, height), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
        for ax, (title, on, offs) in zip(axes, panels):
            series = [(on, _ON, "o", 0.0, condition_label(*on))]
            series += [(off, _OFF, m, -0.18 * (i + 1), condition_label(*off))
                       for i, (off, m) in enumerate(zip(offs, ("s", "D", "^")))]
            for condition, colour, marker, dy, label in series:
                rows = _at(pooled, condition).set_index("comparison").reindex(comparisons)
                low, high, mean = (rows[c].to_numpy(float) for c in ("mean_adj_low", "mean_adj_high", "mean"))
                claimed = ((low > 0) | (high < 0)) & np.isfinite(low)
                ax.hlines(y + dy, low, high, color=colour, linewidth=1.0)
                ax.scatter(mean[claimed], (y + dy)[claimed], color=colour, marker=marker, s=14, zorder=3, label=label)
                ax.scatter(mean[~claimed], (y + dy)[~claimed], facecolors="white", edgecolors=[colour],
                           marker=marker, s=14, zorder=3, label=None if claimed.any() else label)
            ax.axvline(0, color="0.3", linewidth=0.8)
            ax.set_title(title)
            ax.set_xlabel("contrast (points)")
            # below the panel, out of the data's way: each panel's conditions are its own
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.32), frameon=False, fontsize=5.5,
                      handletextpad=0.2)
        axes[0].set_yticks(y, comparisons)
    return fig
