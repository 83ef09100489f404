"""Figures of the attention analysis (:mod:`study.attention.maps`, :mod:`study.attention.locality`):
mean attention distance per head against depth (Dosovitskiy et al. 2021, Fig. 7; Raghu et al. 2021, Fig. 3)
and per-head class-token maps beside attention rollout. Style and saving: :mod:`study.outputs.figure_style`."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from study.outputs.figure_style import (DOUBLE_COLUMN_IN, FALLBACK_COLOUR, MAP_CMAP, SINGLE_COLUMN_IN,
                                         model_colour, paper_style, require_columns)
from study.core.errors import StudyError


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
    require_columns(df, {"layer", "head", "distance"}, "attention_distance_plot")
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
    return f"{100 * value:g}% data" if isinstance(value, (int, float, np.number)) else str(value)


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
        # every map is min-max scaled on its own: the bar reads "share of that map's range", not attention weight
        fig.colorbar(ScalarMappable(norm=Normalize(0.0, 1.0), cmap=MAP_CMAP), ax=axes[:, 1:], shrink=0.8,
                     label="attention, scaled per map (0 = its min, 1 = its max)")
        fig.canvas.draw()
    return fig


def run_maps_figure(pictures: np.ndarray, maps: np.ndarray, rollout: np.ndarray, name: str, fraction: float,
                    seed: int, token: str, block: str, scrambled: bool) -> tuple[Figure, pd.DataFrame]:
    """One run's maps of one token and block beside the rollout (:func:`attention_maps_figure`), titled with the
    run, and the frame of the numbers drawn; a scrambled model's maps are drawn over the scrambled images it sees."""
    titles = [f"test image {i}" for i in range(len(pictures))]
    fig = attention_maps_figure(pictures, maps, rollout, titles)
    what = " (on the scrambled images it sees)" if scrambled else ""
    fig.suptitle(f"{name} ({100 * fraction:g}% of the data, seed {seed}): {token}-token attention, {block} block, "
                 f"and rollout{what}")
    return fig, attention_maps_frame(maps, rollout, titles)


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


def gates_figure(summary: pd.DataFrame) -> Figure:
    """ConViT's head-mean gate σ(λ) (the weight on positional attention) against training images, one line per GPSA
    block, one panel per model, with the t-interval over seeds as error bars; the initial gate σ(1) dashed.

    Columns: ``model``, ``block``, ``train_images``, ``gate_mean``, ``ci_low``, ``ci_high``."""
    require_columns(summary, {"model", "block", "train_images", "gate_mean", "ci_low", "ci_high"}, "gates_figure")
    models = sorted(summary["model"].unique())
    with paper_style(grid=True):
        fig = Figure(figsize=(SINGLE_COLUMN_IN * min(len(models), 2), SINGLE_COLUMN_IN * 0.8), layout="constrained")
        axes = fig.subplots(1, len(models), squeeze=False, sharey=True)[0]
        for ax, model in zip(axes, models):
            mine = summary[summary["model"] == model]
            for block, g in mine.groupby("block", sort=True):
                g = g.sort_values("train_images")
                ax.errorbar(g["train_images"], g["gate_mean"],
                            yerr=[(g["gate_mean"] - g["ci_low"]).clip(lower=0),  # float noise when seeds agree
                                  (g["ci_high"] - g["gate_mean"]).clip(lower=0)],
                            marker="o", markersize=3, capsize=2, linewidth=1, label=f"block {block}")
            ax.axhline(1 / (1 + math.exp(-1)), color="0.3", linestyle="--", linewidth=0.8)  # σ(λ = 1) at init
            ax.set_xscale("log")
            ax.set_xlabel("training images")
            ax.set_title(model)
        axes[0].set_ylabel("gate σ(λ), mean over heads")
        axes[0].legend(frameon=False, fontsize="small")
    return fig
