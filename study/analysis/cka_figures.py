"""Figures of the CKA analysis (:mod:`study.analysis.cka`, :mod:`study.analysis.similarity`): layer × layer
heatmaps within and across models (Raghu et al. 2021, Figs. 1–2) and CKA to a reference model against
depth. Style and saving: :mod:`study.analysis.figure_style`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from study.analysis.figure_style import (CKA_CMAP, DOUBLE_COLUMN_IN, SINGLE_COLUMN_IN, paper_style,
                                         require_columns)
from study.errors import StudyError


@dataclass(frozen=True)
class CKAPanel:
    """One layer × layer CKA matrix, rows = layers of model ``row_name``, columns of ``col_name``."""

    matrix: np.ndarray
    row_labels: Sequence[str]
    col_labels: Sequence[str]
    title: str
    row_name: str
    col_name: str


def cka_frame(panels: Sequence[CKAPanel]) -> pd.DataFrame:
    """Tidy data of CKA panels: one row per (panel, row layer, column layer)."""
    records = []
    for panel in panels:
        for i, row_layer in enumerate(panel.row_labels):
            for j, col_layer in enumerate(panel.col_labels):
                records.append(
                    {
                        "panel": panel.title,
                        "row_model": panel.row_name,
                        "col_model": panel.col_name,
                        "row_index": i,
                        "col_index": j,
                        "row_layer": row_layer,
                        "col_layer": col_layer,
                        "cka": float(panel.matrix[i, j]),
                    }
                )
    return pd.DataFrame.from_records(records)


def cka_heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    title: str,
    row_name: str,
    col_name: str,
) -> Figure:
    """Single-column heatmap of one CKA matrix; depth increases upward (rows) and rightward (columns)."""
    return cka_grid([CKAPanel(np.asarray(matrix), row_labels, col_labels, title, row_name, col_name)])


def cka_grid(panels: Sequence[CKAPanel]) -> Figure:
    """CKA heatmaps side by side (e.g. within ViT, within ResNet, ViT vs ResNet), one shared colour bar."""
    if not panels:
        raise StudyError("cka_grid needs at least one panel")
    for panel in panels:
        expected = (len(panel.row_labels), len(panel.col_labels))
        if np.shape(panel.matrix) != expected:
            raise StudyError(
                f"CKA panel {panel.title!r} has shape {np.shape(panel.matrix)} but {expected} labels"
            )
    width = SINGLE_COLUMN_IN if len(panels) == 1 else DOUBLE_COLUMN_IN
    panel_width = min(width / len(panels), SINGLE_COLUMN_IN)
    with paper_style():
        fig = Figure(figsize=(width, panel_width + 0.5), layout="constrained")
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, panel in zip(axes, panels):
            image = _draw_cka(ax, panel)
        colorbar = fig.colorbar(image, ax=list(axes), shrink=0.8)
        colorbar.set_label("CKA")
        fig.canvas.draw()  # create ticks now, under this style
    return fig


def _draw_cka(ax: Axes, panel: CKAPanel):
    # origin="lower": row 0 (the input-side layer) at the bottom, so depth grows upward.
    image = ax.imshow(
        np.asarray(panel.matrix, dtype=float),
        origin="lower",
        cmap=CKA_CMAP,
        vmin=0.0,
        vmax=1.0,
        interpolation="nearest",
        aspect="auto",
    )
    ax.set_title(panel.title)
    ax.set_xlabel(f"{panel.col_name} layer")
    ax.set_ylabel(f"{panel.row_name} layer")
    _label_ticks(ax.set_xticks, panel.col_labels, rotation=90)
    _label_ticks(ax.set_yticks, panel.row_labels, rotation=0)
    return image


def _label_ticks(set_ticks, labels: Sequence[str], rotation: float, max_ticks: int = 13) -> None:
    """Label at most ``max_ticks`` evenly spaced layers (always the first and last)."""
    positions = np.unique(np.linspace(0, len(labels) - 1, min(len(labels), max_ticks)).round().astype(int))
    set_ticks(positions, [str(labels[i]) for i in positions], rotation=rotation)


def cka_to_reference(df: pd.DataFrame, ceiling: pd.DataFrame | None = None, reference: float = 1.0) -> Figure:
    """Per-layer CKA to the model trained on the largest fraction (``reference``; 1.0 = full data), one line
    per data fraction, x = relative depth.

    Columns: ``fraction`` (0–1], ``relative_depth`` [0, 1], ``cka``; optional ``model`` (one panel per
    model). Several rows per point (seeds) are drawn as their mean with a min–max band. ``ceiling``
    (columns ``relative_depth``, ``cka``, optional ``model``): the same CKA between two full-data models
    of different seeds, the noise level, drawn black and dashed with its min–max band.
    """
    require_columns(df, {"fraction", "relative_depth", "cka"}, "cka_to_reference")
    if ceiling is not None:
        require_columns(ceiling, {"relative_depth", "cka"}, "cka_to_reference (ceiling)")
    models = sorted(df["model"].unique()) if "model" in df else [None]
    fractions = sorted(df["fraction"].unique())
    colours = dict(zip(fractions, sns.color_palette("viridis", len(fractions))))
    width = SINGLE_COLUMN_IN if len(models) == 1 else DOUBLE_COLUMN_IN
    reference_label = "full data" if reference >= 1.0 else f"{100 * reference:g}% of the data"
    with paper_style(grid=True):
        fig = Figure(figsize=(width, 2.4), layout="constrained")
        axes = fig.subplots(1, len(models), squeeze=False, sharey=True)[0]
        for ax, model in zip(axes, models):
            subset = df if model is None else df[df["model"] == model]
            for fraction in fractions:
                points = subset[subset["fraction"] == fraction]
                if points.empty:
                    continue
                stats = points.groupby("relative_depth")["cka"].agg(["mean", "min", "max"])
                ax.plot(stats.index, stats["mean"], marker="o", markersize=2.5,
                        color=colours[fraction], label=f"{100 * fraction:g}%")
                ax.fill_between(stats.index, stats["min"], stats["max"],
                                color=colours[fraction], alpha=0.2, linewidth=0)
            if ceiling is not None:
                _draw_ceiling(ax, ceiling if model is None or "model" not in ceiling
                              else ceiling[ceiling["model"] == model], reference_label)
            ax.set_title("" if model is None else str(model))
            ax.set_xlabel("Relative depth")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.02)
        axes[0].set_ylabel("CKA to full-data model" if reference >= 1.0 else f"CKA to {100 * reference:g}%-data model")
        axes[-1].legend(title="Training data", frameon=False)
        fig.canvas.draw()
    return fig


def _draw_ceiling(ax: Axes, ceiling: pd.DataFrame, reference_label: str) -> None:
    if ceiling.empty:
        return
    stats = ceiling.groupby("relative_depth")["cka"].agg(["mean", "min", "max"])
    ax.plot(stats.index, stats["mean"], color="black", linestyle="--", linewidth=1.0,
            label=f"another seed,\n{reference_label}")
    ax.fill_between(stats.index, stats["min"], stats["max"], color="black", alpha=0.12, linewidth=0)
