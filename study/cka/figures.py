"""Figures of the CKA analysis (:mod:`study.cka.estimators`, :mod:`study.cka.similarity`): layer × layer
heatmaps within and across models (Raghu et al. 2021, Figs. 1–2), CKA to a reference model per layer (their
Fig. 12) and CKA across models at matched relative depth, each curve drawn with its noise level (another seed)
and its chance level (initialisation). Style and saving: :mod:`study.outputs.figure_style`.

Heatmaps colour the data's own range (min to max, rounded outward to 0.05), not [0, 1]: the study's CKA values
lie in a narrow band near 1, where a [0, 1] scale shows every panel in almost one colour. One grid shares one
scale and one colour bar, so its panels still compare; the bar's ends say which range is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from study.outputs.figure_style import (CKA_CMAP, DOUBLE_COLUMN_IN, SINGLE_COLUMN_IN, model_colour, paper_style,
                                         percent_label, require_columns)
from study.core.errors import StudyError

SCALE_STEP = 0.05  # colour and axis ranges are rounded outward to multiples of this


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


MAX_COLUMNS = 4  # panels per row: with more, a study of many models (or pairs) wraps onto further rows


def _panels(fig: Figure, count: int, **options) -> list[Axes]:
    """``count`` axes in rows of at most :data:`MAX_COLUMNS`, the unused cells of the last row removed."""
    columns = min(count, MAX_COLUMNS)
    rows = -(-count // columns)  # ceiling division
    axes = list(fig.subplots(rows, columns, squeeze=False, **options).flat)
    for ax in axes[count:]:
        ax.remove()
    return axes[:count]


def _rows(count: int) -> int:
    return -(-count // MAX_COLUMNS)


def cka_grid(panels: Sequence[CKAPanel]) -> Figure:
    """CKA heatmaps side by side (e.g. within ViT, within ResNet, ViT vs ResNet), one colour scale shared by all
    panels (:func:`outward_limits` of their values) and its colour bar."""
    if not panels:
        raise StudyError("cka_grid needs at least one panel")
    for panel in panels:
        expected = (len(panel.row_labels), len(panel.col_labels))
        if np.shape(panel.matrix) != expected:
            raise StudyError(
                f"CKA panel {panel.title!r} has shape {np.shape(panel.matrix)} but {expected} labels"
            )
    width = SINGLE_COLUMN_IN if len(panels) == 1 else DOUBLE_COLUMN_IN
    panel_width = min(width / min(len(panels), MAX_COLUMNS), SINGLE_COLUMN_IN)
    limits = outward_limits([np.asarray(panel.matrix, dtype=float) for panel in panels])
    with paper_style():
        fig = Figure(figsize=(width, (panel_width + 0.5) * _rows(len(panels))), layout="constrained")
        axes = _panels(fig, len(panels))
        for ax, panel in zip(axes, panels):
            image = _draw_cka(ax, panel, limits)
        # As tall as the panels, and a label shorter than the bar: constrained layout makes room beside a bar's
        # label, not above it, so a longer one ("CKA (scale 0.70–1.00, the data's range)") ran off the figure.
        colorbar = fig.colorbar(image, ax=list(axes), shrink=1.0)
        colorbar.set_label(f"CKA ({limits[0]:.2f}–{limits[1]:.2f})")  # the range the colours span
        fig.canvas.draw()  # create ticks now, under this style
    return fig


def outward_limits(values: Sequence[np.ndarray], step: float = SCALE_STEP) -> tuple[float, float]:
    """(low, high): the smallest and largest finite value of ``values``, rounded outward to multiples of
    ``step`` (0.612 .. 1.0 -> 0.60 .. 1.00); a constant range is widened by one step so the scale has a span."""
    finite = np.concatenate([np.ravel(v)[np.isfinite(np.ravel(v))] for v in values])
    if finite.size == 0:
        raise StudyError("no finite CKA value to scale the colours or axis to")
    # The 1e-9 absorbs float error: 0.6 / 0.05 = 11.999999999999998 must round down to 12, not 11.
    low = round(step * np.floor(finite.min() / step + 1e-9), 10)  # round(): 0.95, not 0.9500000000000001
    high = round(step * np.ceil(finite.max() / step - 1e-9), 10)
    return (low, high) if high > low else (low, round(low + step, 10))


def _draw_cka(ax: Axes, panel: CKAPanel, limits: tuple[float, float]):
    # origin="lower": row 0 (the input-side layer) at the bottom, so depth grows upward.
    image = ax.imshow(
        np.asarray(panel.matrix, dtype=float),
        origin="lower",
        cmap=CKA_CMAP,
        vmin=limits[0],
        vmax=limits[1],
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


def cka_to_reference(df: pd.DataFrame, ceiling: pd.DataFrame | None = None, reference: float = 1.0,
                     chance: pd.DataFrame | None = None) -> Figure:
    """Per-layer CKA to the model trained on the largest fraction (``reference``; 1.0 = full data), one line
    per data fraction, x = relative depth (ticks named after the layers when ``df`` has a ``layer`` column).

    Columns: ``fraction`` (0–1], ``relative_depth`` [0, 1], ``cka``; optional ``model`` (one panel per
    model), ``layer``. Several rows per point (seeds) are drawn as their mean with a min–max band. ``ceiling``
    and ``chance`` (columns ``relative_depth``, ``cka``, optional ``model``): the same CKA between two
    full-data models of different seeds (noise level; black, dashed) and between their initialisations
    (chance level; grey, dotted), each with its min–max band. The y axis spans the data, rounded outward.
    """
    require_columns(df, {"fraction", "relative_depth", "cka"}, "cka_to_reference")
    levels = {name: frame for name, frame in (("ceiling", ceiling), ("chance", chance)) if frame is not None}
    for name, frame in levels.items():
        require_columns(frame, {"relative_depth", "cka"}, f"cka_to_reference ({name})")
    models = sorted(df["model"].unique()) if "model" in df else [None]
    fractions = sorted(df["fraction"].unique())
    colours = dict(zip(fractions, sns.color_palette("viridis", len(fractions))))
    width = SINGLE_COLUMN_IN if len(models) == 1 else DOUBLE_COLUMN_IN
    reference_label = "full data" if reference >= 1.0 else f"{100 * reference:g}% of the data"
    styles = {"ceiling": ("black", "--", f"another seed,\n{reference_label}"),
              "chance": ("0.45", ":", "two initialisations\n(chance)")}
    low, _ = outward_limits([df["cka"].to_numpy(), *(frame["cka"].to_numpy() for frame in levels.values())])
    with paper_style(grid=True):
        fig = Figure(figsize=(width, 2.6 * _rows(len(models))), layout="constrained")
        axes = _panels(fig, len(models), sharey=True)
        for ax, model in zip(axes, models):
            subset = _of_model(df, model)
            for fraction in fractions:
                points = subset[subset["fraction"] == fraction]
                if not points.empty:
                    _draw_spread(ax, points, colours[fraction], "-", percent_label(fraction), marker="o")
            for name, frame in levels.items():
                colour, style, label = styles[name]
                _draw_spread(ax, _of_model(frame, model), colour, style, label)
            _layer_ticks(ax, subset)
            ax.set_title("" if model is None else str(model))
            ax.set_xlim(-0.02, 1.02)
            ax.set_ylim(low, 1.0 + SCALE_STEP / 2)
        for ax in axes[::MAX_COLUMNS]:  # the first panel of every row
            ax.set_ylabel("CKA to full-data model" if reference >= 1.0 else f"CKA to {100 * reference:g}%-data model")
        axes[-1].legend(title="Training data", frameon=False, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.canvas.draw()
    return fig


def _of_model(frame: pd.DataFrame, model: str | None) -> pd.DataFrame:
    """The rows of ``model`` (all rows when there is no model, or the frame has no ``model`` column)."""
    return frame if model is None or "model" not in frame else frame[frame["model"] == model]


def _draw_spread(ax: Axes, points: pd.DataFrame, colour, style: str, label: str, marker: str | None = None) -> None:
    """A curve over relative depth: the mean of the rows at each depth (seeds, seed pairs), with a min–max band."""
    if points.empty:
        return
    stats = points.groupby("relative_depth")["cka"].agg(["mean", "min", "max"])
    ax.plot(stats.index, stats["mean"], color=colour, linestyle=style, linewidth=1.0, marker=marker,
            markersize=2.5, label=label)
    ax.fill_between(stats.index, stats["min"], stats["max"], color=colour, alpha=0.15, linewidth=0)


def _layer_ticks(ax: Axes, points: pd.DataFrame) -> None:
    """Ticks at the layers' relative depths named after the layers (one architecture per panel), else plain
    relative depth."""
    if "layer" not in points or points.empty:
        ax.set_xlabel("Relative depth")
        return
    layers = points.drop_duplicates("relative_depth").sort_values("relative_depth")
    ax.set_xticks(layers["relative_depth"].to_numpy(), layers["layer"].astype(str).tolist(), rotation=90)
    ax.set_xlabel("Layer (at its relative depth)")


def cka_across_depth(summary: pd.DataFrame) -> Figure:
    """CKA between two models at matched relative depth (x, 0–1: the models have different layer counts), one
    panel per pair: the mean over seeds with its t-interval band (black), each model's cross-seed ceiling (noise
    level; dashed, the model's colour) and the pair's CKA at initialisation (chance level; grey, dotted). The
    shaded stretch lies before both models' first layer after the input embedding: left out of depth means.

    ``summary``: ``cka_across_depth`` (:func:`study.cka.similarity.across_depth_summary`)."""
    require_columns(summary, {"model_a", "model_b", "relative_depth", "in_depth_mean", "cka_mean", "ci_low",
                              "ci_high", "ceiling_a", "ceiling_b", "chance_mean"}, "cka_across_depth")
    pairs = list(summary.groupby(["model_a", "model_b"], sort=True))
    if not pairs:
        raise StudyError("cka_across_depth needs at least one pair of models")
    columns = ["cka_mean", "ci_low", "ci_high", "ceiling_a", "ceiling_b", "chance_mean"]
    low, _ = outward_limits([summary[c].to_numpy(dtype=float) for c in columns])
    with paper_style(grid=True):
        fig = Figure(figsize=(DOUBLE_COLUMN_IN if len(pairs) > 1 else SINGLE_COLUMN_IN, 2.4 * _rows(len(pairs))),
                     layout="constrained")
        axes = _panels(fig, len(pairs), sharey=True)
        for ax, ((a, b), rows) in zip(axes, pairs):
            _draw_pair(ax, rows.sort_values("relative_depth"), str(a), str(b))
            ax.set_ylim(low, 1.0 + SCALE_STEP / 2)
        for ax in axes[::MAX_COLUMNS]:
            ax.set_ylabel("CKA at matched depth")
        axes[-1].legend(frameon=False, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.canvas.draw()
    return fig


def _draw_pair(ax: Axes, rows: pd.DataFrame, a: str, b: str) -> None:
    """One pair's panel of :func:`cka_across_depth`."""
    depth = rows["relative_depth"].to_numpy()
    ax.plot(depth, rows["cka_mean"], color="black", marker="o", markersize=2.5, linewidth=1.0, label=f"{a} vs {b}")
    ax.fill_between(depth, rows["ci_low"], rows["ci_high"], color="black", alpha=0.12, linewidth=0)
    for model, column in ((a, "ceiling_a"), (b, "ceiling_b")):
        ax.plot(depth, rows[column], color=model_colour(model), linestyle="--", linewidth=1.0,
                label=f"{model}, another seed")
    ax.plot(depth, rows["chance_mean"], color="0.45", linestyle=":", linewidth=1.2, label="at initialisation")
    used = rows["in_depth_mean"].astype(bool).to_numpy()
    if not used.all():  # the points a depth mean leaves out, up to the first one it takes
        ax.axvspan(0.0, depth[used].min() if used.any() else 1.0, facecolor="none", edgecolor="0.75", hatch="///",
                   linewidth=0, zorder=0, label="not in depth mean\n(input embeddings)")
    ax.set_title(f"{a}\nvs {b}", fontsize="small")  # two lines: long model names share a row of panels
    ax.set_xlabel("Relative depth")
    ax.set_xlim(0, 1)
