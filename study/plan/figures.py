"""The plan's figure: every test of every claim with its Holm-adjusted interval against the claim's smallest
effect of interest, so that what is supported, what is excluded and what is still open reads at a glance. Style
and saving: :mod:`study.outputs.figure_style`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from study.outputs.figure_style import DOUBLE_COLUMN_IN, paper_style, require_columns
from study.plan import CONTRAST, CONTROL, INTERACTION

_TESTS = {"claim", "test", "condition", "mean", "adj_low", "adj_high", "smallest_effect", "verdict"}
# Okabe & Ito's colour-blind-safe colours: vermillion the claim's condition, blue its control, black the interaction.
_STYLE = {CONTRAST: ("#D55E00", "o", 0.22), CONTROL: ("#0072B2", "s", 0.0), INTERACTION: ("0.1", "D", -0.22)}
_NAMES = {CONTRAST: "under the claim's condition", CONTROL: "under its control",
          INTERACTION: "interaction (condition − control)"}


def plan_figure(tests: pd.DataFrame) -> Figure:
    """One row per claim: its contrast (points of top-1), its control's contrast and their interaction, each with
    its Holm-adjusted interval across the plan; filled where the interval excludes 0; the grey band is the claim's
    smallest effect of interest (an interval inside it excludes every effect of interest)."""
    require_columns(tests, _TESTS, "plan_figure")
    claims = list(dict.fromkeys(tests["claim"]))
    y = np.arange(len(claims))[::-1] * 1.0
    with paper_style(grid=True):
        fig = Figure(figsize=(DOUBLE_COLUMN_IN, 1.2 + 0.45 * len(claims)), layout="constrained")
        ax = fig.subplots()
        for yi, claim in zip(y, claims):
            effect = float(tests.loc[tests["claim"] == claim, "smallest_effect"].iloc[0])
            ax.add_patch(_band(yi, effect))
        for test, (colour, marker, dy) in _STYLE.items():
            rows = tests[tests["test"] == test].set_index("claim").reindex(claims)
            low, high, mean = (rows[c].to_numpy(float) for c in ("adj_low", "adj_high", "mean"))
            shown = np.isfinite(mean)
            if not shown.any():
                continue
            claimed = shown & ((low > 0) | (high < 0))
            ax.hlines((y + dy)[shown], low[shown], high[shown], color=colour, linewidth=1.0)
            ax.scatter(mean[claimed], (y + dy)[claimed], color=colour, marker=marker, s=16, zorder=3)
            ax.scatter(mean[shown & ~claimed], (y + dy)[shown & ~claimed], facecolors="white", edgecolors=[colour],
                       marker=marker, s=16, zorder=3)
            ax.scatter([], [], color=colour, marker=marker, s=16, label=_NAMES[test])  # the legend's entry
        ax.axvline(0, color="0.3", linewidth=0.8)
        labels = [f"{claim}: {tests.loc[(tests['claim'] == claim) & (tests['test'] == CONTRAST), 'condition'].iloc[0]}"
                  for claim in claims]
        ax.set_yticks(y, labels)
        ax.set_ylim(y.min() - 0.6, y.max() + 0.6)
        ax.set_xlabel("difference in test top-1 (points), Holm-adjusted across the plan")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, frameon=False)
    return fig


def _band(y: float, effect: float):
    from matplotlib.patches import Rectangle

    return Rectangle((-effect, y - 0.4), 2 * effect, 0.8, color="0.88", zorder=0, linewidth=0)
