"""The study's figures: one paper-ready style, fixed colours per model, and data saved beside each plot.

Plot functions take data (arrays, data frames), never models, and return a
:class:`matplotlib.figure.Figure` built without pyplot, so no global backend or state is touched and
figures render headless. :func:`save_figure` writes PNG, PDF and the figure's data as CSV, so every
figure can be re-plotted without rerunning the analysis.

Style: seaborn's "paper" context scaled to 7–8 pt text, legible at single-column (3.3 in) and
double-column (6.8 in) width; seaborn's colour-blind palette with one fixed colour per model family; a
perceptually uniform colour map for CKA fixed to [0, 1] so panels compare.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from study.errors import StudyError
from study.io import atomic_path

SINGLE_COLUMN_IN = 3.3
DOUBLE_COLUMN_IN = 6.8
PNG_DPI = 200
CKA_CMAP = "magma"  # perceptually uniform and readable in greyscale and for colour-blind readers
MAP_CMAP = "inferno"

_PALETTE = sns.color_palette("colorblind")
# Matched as substrings of the lower-cased model name, first match wins.
MODEL_COLOURS: dict[str, tuple[float, float, float]] = {
    "deit": _PALETTE[2],  # green
    "vit": _PALETTE[1],  # orange
    "resnet": _PALETTE[0],  # blue
}
FALLBACK_COLOUR = _PALETTE[7]  # grey

_TEXT_RC = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "pdf.fonttype": 42,  # embed TrueType so text in the PDF stays text (journals ask for it)
    "ps.fonttype": 42,
}


def model_colour(model: str) -> tuple[float, float, float]:
    """Fixed colour for a model name: resnet*, vit*, deit* families, grey otherwise."""
    name = model.lower()
    for family, colour in MODEL_COLOURS.items():
        if family in name:
            return colour
    return FALLBACK_COLOUR


@contextlib.contextmanager
def paper_style(grid: bool = False) -> Iterator[None]:
    """rcParams of the study's style for the block: seaborn "ticks" (or "whitegrid"), paper context."""
    rc = {
        **sns.axes_style("whitegrid" if grid else "ticks"),
        **sns.plotting_context("paper"),
        **_TEXT_RC,
    }
    with matplotlib.rc_context(rc):
        yield


def save_figure(fig: Figure, stem: str | Path, data: pd.DataFrame) -> list[Path]:
    """Write ``<stem>.png`` (200 dpi), ``<stem>.pdf`` and ``<stem>.csv`` atomically; return the paths."""
    stem = Path(stem)
    paths = [stem.with_name(stem.name + suffix) for suffix in (".png", ".pdf", ".csv")]
    png, pdf, csv = paths
    # Ticks are created lazily at draw time from rcParams, so save under the same style.
    with paper_style():
        with atomic_path(png) as tmp:
            fig.savefig(tmp, format="png", dpi=PNG_DPI)
        with atomic_path(pdf) as tmp:
            # No creation date: the same figure gives the same bytes, so DVC sees no spurious change.
            fig.savefig(tmp, format="pdf", metadata={"CreationDate": None})
    with atomic_path(csv) as tmp:
        data.to_csv(tmp, index=False)
    return paths


# --------------------------------------------------------------------------------------------------
# Data efficiency
# --------------------------------------------------------------------------------------------------


def data_efficiency_figure(runs: pd.DataFrame, confidence: float) -> Figure:
    """Test top-1 against training images (log x), one colour per model: each run as a faint dot,
    the mean over seeds as a line, and its Student-t ``confidence`` interval as a band.

    Columns: ``model``, ``train_images``, ``test_top1`` (one row per run, seeds as repeated rows).
    """
    from study.analysis.inference import t_interval  # the same interval as the study's tables

    _require_columns(runs, {"model", "train_images", "test_top1"}, "data_efficiency_figure")
    with paper_style(grid=True):
        fig = Figure(figsize=(SINGLE_COLUMN_IN, 2.6), layout="constrained")
        ax = fig.subplots()
        for model, group in runs.groupby("model", sort=True):
            colour = model_colour(str(model))
            ax.scatter(group["train_images"], group["test_top1"], s=6, color=colour, alpha=0.35,
                       linewidths=0)
            points = []
            for size, per_size in group.groupby("train_images", sort=True):
                mean, _, half = t_interval(per_size["test_top1"].to_numpy(), confidence)
                points.append((size, mean, half))
            sizes, means, halves = (np.array(column, dtype=float) for column in zip(*points))
            ax.plot(sizes, means, marker="o", markersize=3, color=colour, label=str(model))
            if np.isfinite(halves).any():  # a single seed has no interval
                ax.fill_between(sizes, means - halves, means + halves, color=colour, alpha=0.2,
                                linewidth=0)
        ax.set_xscale("log")
        ax.minorticks_off()  # log minor labels collide at this width; label the actual sizes
        sizes = np.sort(runs["train_images"].unique())
        ax.set_xticks(sizes, [_short_count(int(size)) for size in sizes])
        ax.set_xlabel("Training images")
        ax.set_ylabel("Test top-1")
        if "under_trained" in runs and runs["under_trained"].any():
            flagged = runs[runs["under_trained"].astype(bool)]
            ax.scatter(flagged["train_images"], flagged["test_top1"], s=22, facecolors="none", edgecolors="0.2",
                       linewidths=0.6, label="still improving at the end")
        ax.legend(frameon=False, title=f"mean, {confidence:.0%} CI")
        fig.canvas.draw()
    return fig


def gaps_figure(gaps: pd.DataFrame) -> Figure:
    """Paired gaps ``a − b`` (percentage points) against training images, one panel per comparison: the mean
    over seeds, the raw t-interval (thin) and the Holm-adjusted interval (thick); filled markers where the
    adjusted interval excludes 0 with enough seeds to infer, hollow otherwise.

    Columns: ``comparison``, ``train_images``, ``gap_mean``, ``gap_ci_low/high``, ``adj_ci_low/high``,
    ``significant``, ``inference``.
    """
    _require_columns(gaps, {"comparison", "train_images", "gap_mean", "gap_ci_low", "gap_ci_high", "adj_ci_low",
                            "adj_ci_high", "significant", "inference"}, "gaps_figure")
    comparisons = list(dict.fromkeys(gaps["comparison"]))
    with paper_style(grid=True):
        fig = Figure(figsize=(DOUBLE_COLUMN_IN, 2.3), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(comparisons), sharey=True))
        for ax, comparison in zip(axes, comparisons):
            g = gaps[gaps["comparison"] == comparison].sort_values("train_images")
            colour = model_colour(comparison.split(" - ")[0])
            x, y = g["train_images"].to_numpy(float), 100 * g["gap_mean"].to_numpy(float)
            for low, high, width in (("gap_ci_low", "gap_ci_high", 0.8), ("adj_ci_low", "adj_ci_high", 2.2)):
                ax.vlines(x, 100 * g[low], 100 * g[high], color=colour, linewidth=width, alpha=0.6)
            ax.plot(x, y, color=colour, linewidth=1)
            claimed = (g["significant"] & g["inference"]).to_numpy(bool)
            ax.scatter(x[claimed], y[claimed], s=16, color=colour, zorder=3)
            ax.scatter(x[~claimed], y[~claimed], s=16, facecolors="white", edgecolors=[colour], zorder=3)
            ax.axhline(0, color="0.3", linewidth=0.8)
            ax.set_xscale("log")
            ax.minorticks_off()
            ax.set_xticks(x, [_short_count(int(n)) for n in x])
            ax.set_title(comparison)
            ax.set_xlabel("Training images")
        axes[0].set_ylabel("Top-1 gap (points)")
        fig.canvas.draw()
    return fig


# --------------------------------------------------------------------------------------------------
# CKA
# --------------------------------------------------------------------------------------------------


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


def cka_to_reference(df: pd.DataFrame, ceiling: pd.DataFrame | None = None) -> Figure:
    """Per-layer CKA to the full-data model, one line per data fraction, x = relative depth.

    Columns: ``fraction`` (0–1], ``relative_depth`` [0, 1], ``cka``; optional ``model`` (one panel per
    model). Several rows per point (seeds) are drawn as their mean with a min–max band. ``ceiling``
    (columns ``relative_depth``, ``cka``, optional ``model``): the same CKA between two full-data models
    of different seeds, the noise level, drawn black and dashed with its min–max band.
    """
    _require_columns(df, {"fraction", "relative_depth", "cka"}, "cka_to_reference")
    if ceiling is not None:
        _require_columns(ceiling, {"relative_depth", "cka"}, "cka_to_reference (ceiling)")
    models = sorted(df["model"].unique()) if "model" in df else [None]
    fractions = sorted(df["fraction"].unique())
    colours = dict(zip(fractions, sns.color_palette("viridis", len(fractions))))
    width = SINGLE_COLUMN_IN if len(models) == 1 else DOUBLE_COLUMN_IN
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
                        color=colours[fraction], label=f"{fraction:.0%}")
                ax.fill_between(stats.index, stats["min"], stats["max"],
                                color=colours[fraction], alpha=0.2, linewidth=0)
            if ceiling is not None:
                _draw_ceiling(ax, ceiling if model is None or "model" not in ceiling
                              else ceiling[ceiling["model"] == model])
            ax.set_title("" if model is None else str(model))
            ax.set_xlabel("Relative depth")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.02)
        axes[0].set_ylabel("CKA to full-data model")
        axes[-1].legend(title="Training data", frameon=False)
        fig.canvas.draw()
    return fig


def _draw_ceiling(ax: Axes, ceiling: pd.DataFrame) -> None:
    if ceiling.empty:
        return
    stats = ceiling.groupby("relative_depth")["cka"].agg(["mean", "min", "max"])
    ax.plot(stats.index, stats["mean"], color="black", linestyle="--", linewidth=1.0,
            label="another seed,\nfull data")
    ax.fill_between(stats.index, stats["min"], stats["max"], color="black", alpha=0.12, linewidth=0)


# --------------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------------


def attention_distance_plot(
    df: pd.DataFrame, reference: float | None = None, columns: str = "fraction",
    local_share: float | None = None,
) -> Figure:
    """Mean attention distance per head (dots) against layer, one facet per model (rows) and per value
    of the ``columns`` column (e.g. ``fraction``, or a ``condition`` such as "init" / "1% data") when
    those columns exist.

    Columns: ``layer``, ``head``, ``distance`` (pixels); optional ``model``, ``columns``, and
    ``uniform`` or ``uniform_distance`` (the uniform-attention distance, drawn as a dashed line;
    ``reference`` is used when neither is present). Several seeds are several dots per head. Numeric
    facet values are sorted and shown as data shares; others keep their order of appearance.
    ``local_share`` adds a dotted line at that share of the uniform distance (the "local head" bar).
    """
    _require_columns(df, {"layer", "head", "distance"}, "attention_distance_plot")
    models = sorted(df["model"].unique()) if "model" in df else [None]
    facets = _facet_values(df[columns]) if columns in df else [None]
    uniform_column = next((c for c in ("uniform", "uniform_distance") if c in df), None)
    ncols = len(facets)
    width = SINGLE_COLUMN_IN if ncols == 1 else DOUBLE_COLUMN_IN
    panel_height = min(width / ncols, SINGLE_COLUMN_IN) * 0.8 + 0.3
    with paper_style(grid=True):
        fig = Figure(figsize=(width, panel_height * len(models)), layout="constrained")
        axes = fig.subplots(len(models), ncols, squeeze=False, sharex=True, sharey=True)
        rng = np.random.default_rng(0)  # fixed jitter: the same data give the same picture
        for r, model in enumerate(models):
            for c, facet in enumerate(facets):
                ax = axes[r, c]
                subset = df
                if model is not None:
                    subset = subset[subset["model"] == model]
                if facet is not None:
                    subset = subset[subset[columns] == facet]
                jitter = rng.uniform(-0.15, 0.15, len(subset))
                colour = model_colour(str(model)) if model is not None else FALLBACK_COLOUR
                ax.scatter(subset["layer"] + jitter, subset["distance"], s=14, color=colour,
                           alpha=0.7, linewidths=0.3, edgecolors="white")
                line = subset[uniform_column].iloc[0] if uniform_column and len(subset) else reference
                if line is not None:
                    ax.axhline(line, color="0.3", linestyle="--", linewidth=0.8)
                    if local_share is not None:
                        ax.axhline(local_share * line, color="0.3", linestyle=":", linewidth=0.8)
                    if r == 0 and c == 0:  # label the references once, not in every facet
                        ax.annotate("uniform attention", (0.01, line), xycoords=("axes fraction", "data"),
                                    xytext=(0, 2), textcoords="offset points", fontsize=6, color="0.3")
                        if local_share is not None:
                            ax.annotate(f"{local_share:g}× uniform", (0.01, local_share * line),
                                        xycoords=("axes fraction", "data"), xytext=(0, 2),
                                        textcoords="offset points", fontsize=6, color="0.3")
                title = " · ".join(
                    part for part in (
                        None if model is None else str(model),
                        None if facet is None else _facet_title(facet),
                    ) if part
                )
                ax.set_title(title)
                if r == len(models) - 1:
                    ax.set_xlabel("Layer")
                if c == 0:
                    ax.set_ylabel("Mean attention\ndistance (px)")
        axes[0, 0].set_ylim(bottom=0)
        axes[0, 0].xaxis.set_major_locator(MaxNLocator(integer=True))  # layers are whole numbers
        fig.canvas.draw()
    return fig


def _facet_values(values: pd.Series) -> list:
    unique = list(pd.unique(values.dropna()))
    return sorted(unique) if pd.api.types.is_numeric_dtype(values) else unique


def _facet_title(value) -> str:
    return f"{value:.0%} data" if isinstance(value, (int, float, np.number)) else str(value)


def attention_maps_frame(
    per_head_maps: np.ndarray, rollout_maps: np.ndarray, titles: Sequence[str]
) -> pd.DataFrame:
    """Tidy data of :func:`attention_maps_figure`: one row per (image, map, grid row, grid column)."""
    heads = np.asarray(per_head_maps)
    rollout = np.asarray(rollout_maps)
    records = []
    for i, title in enumerate(titles):
        named = [(f"head {h + 1}", heads[i, h]) for h in range(heads.shape[1])]
        for name, grid in [*named, ("rollout", rollout[i])]:
            for (row, col), value in np.ndenumerate(grid):
                records.append({"image": title, "map": name, "row": row, "col": col,
                                "value": float(value)})
    return pd.DataFrame.from_records(records)


def attention_maps_figure(
    images: np.ndarray,
    per_head_maps: np.ndarray,
    rollout_maps: np.ndarray,
    titles: Sequence[str],
) -> Figure:
    """One row per image: the image, each head's class-token attention, and the rollout over the image.

    ``images`` (N, H, W), (N, H, W, C) or (N, C, H, W) with C in {1, 3}, values in [0, 1];
    ``per_head_maps`` (N, heads, gh, gw) — class-token rows with the prefix dropped (see
    ``attention.cls_attention_maps``); ``rollout_maps`` (N, gh, gw) (see ``attention.cls_rollout_map``).
    Maps are stretched over the image with nearest-neighbour upsampling, so each patch stays a block,
    and each map is min–max scaled for display (the CSV keeps the raw values).
    """
    pictures = _channels_last(np.asarray(images, dtype=float))
    heads = np.asarray(per_head_maps, dtype=float)
    rollout = np.asarray(rollout_maps, dtype=float)
    count = len(titles)
    if not (len(pictures) == len(heads) == len(rollout) == count):
        raise StudyError(
            f"got {len(pictures)} images, {len(heads)} head maps, {len(rollout)} rollout maps and "
            f"{count} titles; pass one of each per image"
        )
    ncols = heads.shape[1] + 2
    cell = DOUBLE_COLUMN_IN / ncols
    with paper_style():
        fig = Figure(figsize=(DOUBLE_COLUMN_IN, cell * count + 0.3), layout="constrained")
        axes = fig.subplots(count, ncols, squeeze=False)
        for i in range(count):
            height, width = pictures[i].shape[:2]
            extent = (0, width, height, 0)  # maps cover the whole image: patch-sized blocks
            _show_image(axes[i, 0], pictures[i])
            axes[i, 0].set_ylabel(titles[i])
            for h in range(heads.shape[1]):
                axes[i, h + 1].imshow(_unit_range(heads[i, h]), cmap=MAP_CMAP, extent=extent,
                                      interpolation="nearest", vmin=0, vmax=1)
            _show_image(axes[i, -1], pictures[i])
            axes[i, -1].imshow(_unit_range(rollout[i]), cmap=MAP_CMAP, extent=extent,
                               interpolation="nearest", alpha=0.6, vmin=0, vmax=1)
        for column, name in enumerate(["Image", *[f"Head {h + 1}" for h in range(heads.shape[1])],
                                       "Rollout"]):
            axes[0, column].set_title(name)
        for ax in axes.flat:
            ax.set_xticks([])
            ax.set_yticks([])
        fig.canvas.draw()
    return fig


def _channels_last(images: np.ndarray) -> np.ndarray:
    """(N, H, W) | (N, H, W, C) | (N, C, H, W) -> (N, H, W) or (N, H, W, 3)."""
    if images.ndim == 3:
        return images
    if images.ndim == 4 and images.shape[1] in (1, 3) and images.shape[-1] not in (1, 3):
        images = images.transpose(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
    if images.ndim == 4 and images.shape[-1] == 1:
        return images[..., 0]  # (N, H, W, 1) -> (N, H, W)
    if images.ndim == 4 and images.shape[-1] == 3:
        return images
    raise StudyError(f"images have shape {images.shape}; expected (N, H, W[, C]) or (N, C, H, W)")


def _show_image(ax: Axes, picture: np.ndarray) -> None:
    ax.imshow(np.clip(picture, 0.0, 1.0), cmap="gray" if picture.ndim == 2 else None,
              vmin=0.0, vmax=1.0, interpolation="nearest")


def _unit_range(grid: np.ndarray) -> np.ndarray:
    low, high = float(grid.min()), float(grid.max())
    return np.zeros_like(grid) if math.isclose(high, low) else (grid - low) / (high - low)


def _short_count(count: int) -> str:
    """1500 -> "1.5k", 50000 -> "50k", 800 -> "800"."""
    return f"{count / 1000:g}k" if count >= 1000 else str(count)


def _require_columns(df: pd.DataFrame, columns: set[str], where: str) -> None:
    missing = columns - set(df.columns)
    if missing:
        raise StudyError(f"{where} needs columns {sorted(missing)}; got {list(df.columns)}")
