"""The data-efficiency figures speak the report's units (top-1 in percent, gaps in points), and the gaps figure's two
intervals are told apart at a glance: drawn differently and named in a legend."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba

from study.curves.figures import data_efficiency_figure, gaps_figure


def test_top1_is_drawn_in_percent():
    runs = pd.DataFrame([{"model": m, "seed": s, "train_images": n, "test_top1": top1 + 0.01 * s}
                         for m, top1 in (("resnet", 0.8), ("vit", 0.6)) for n in (140, 570) for s in range(3)])
    ax = data_efficiency_figure(runs, 0.95).axes[0]
    means = {line.get_label(): line.get_ydata() for line in ax.lines}
    np.testing.assert_allclose(means["resnet"], [81.0, 81.0])  # 100 × the mean share over seeds
    np.testing.assert_allclose(means["vit"], [61.0, 61.0])
    assert ax.get_ylabel() == "Test top-1 (%)"


def test_gaps_draw_the_raw_and_the_adjusted_interval_differently_and_name_both():
    gaps = pd.DataFrame({"comparison": "vit - resnet", "train_images": [140, 570], "gap_mean": [-0.10, -0.05],
                         "gap_ci_low": [-0.15, -0.08], "gap_ci_high": [-0.05, -0.02], "adj_ci_low": [-0.20, -0.10],
                         "adj_ci_high": [0.00, 0.00], "significant": [False, True], "inference": True})
    fig = gaps_figure(gaps)
    ax = fig.axes[0]
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]  # vertical intervals, one per size
    spans = {tuple(np.round([s[:, 1].min() for s in c.get_segments()], 6)): c for c in bars}
    adjusted, raw = spans[(-20.0, -10.0)], spans[(-15.0, -8.0)]  # in points
    assert adjusted.get_linewidth()[0] >= 4 * raw.get_linewidth()[0]  # wide against thin
    assert to_rgba(adjusted.get_color()[0])[:3] != to_rgba(raw.get_color()[0])[:3]  # and another colour
    assert [text.get_text() for text in fig.legends[0].get_texts()] == ["Holm-adjusted interval",
                                                                         "unadjusted t-interval"]
    assert ax.get_ylabel() == "Top-1 gap (points)"
