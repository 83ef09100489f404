"""The CKA heatmaps' colour bar label fits beside its bar, whatever the number of panels: constrained layout makes
room beside a label, not above it, so a label longer than its bar runs off the figure's edge."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from study.outputs.figure_style import paper_style
from study.cka.figures import CKAPanel, cka_grid


@pytest.mark.parametrize("count", [1, 3, 4, 5])
def test_the_colour_bar_label_lies_within_its_bar_and_the_figure(count):
    labels = [f"blocks.{i}" for i in range(6)]
    matrix = np.random.default_rng(0).uniform(0.7, 1.0, size=(6, 6))
    fig = cka_grid([CKAPanel(matrix, labels, labels, "vit (within)", "vit", "vit")] * count)
    with paper_style():
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.draw(renderer)
        bar = fig.axes[-1]
        label = bar.yaxis.label.get_window_extent(renderer)
        extent = bar.get_window_extent(renderer)
    assert bar.get_ylabel().startswith("CKA")
    assert extent.y0 <= label.y0 and label.y1 <= extent.y1, (label, extent)
    assert 0 <= label.y0 and label.y1 <= fig.bbox.height
