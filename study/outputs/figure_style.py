"""The study's figure style, shared by every analysis's figures: one paper-ready look, fixed colours per
model, and data saved beside each plot.

Each analysis draws its own figures beside it (``curves_figures``, ``cka_figures``, ``attention_figures``);
they take data (arrays, data frames), never models, and return a :class:`matplotlib.figure.Figure` built
without pyplot, so no global backend or state is touched and figures render headless. :func:`save_figure`
writes PNG, PDF and the figure's data as CSV, so every figure can be re-plotted without rerunning the
analysis.

Style: seaborn's "paper" context scaled to 7–8 pt text, legible at single-column (3.3 in) and
double-column (6.8 in) width; seaborn's colour-blind palette with one fixed colour per model family; a
perceptually uniform colour map for CKA, spanning the data of a figure (rounded outward to 0.05), shared by its panels.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from study.core.errors import StudyError
from study.core.io import atomic_path

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


def contrast_markers(ax, x: np.ndarray, y: np.ndarray, claimed: np.ndarray, colour, size: float) -> None:
    """A contrast's points: filled where a difference is claimed (its adjusted interval excludes zero, from >= 3
    seeds), open where none is; and the zero line they are read against."""
    ax.scatter(x[claimed], y[claimed], s=size, color=colour, zorder=3)
    ax.scatter(x[~claimed], y[~claimed], s=size, facecolors="white", edgecolors=[colour], zorder=3)
    ax.axhline(0, color="0.3", linewidth=0.8)


def training_images_axis(ax, sizes) -> None:
    """A log axis of training-set sizes, ticked at the study's sizes (1.2k, 57k)."""
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(sizes, [short_count(int(n)) for n in sizes])
    ax.set_xlabel("Training images")


def percent_label(share: float) -> str:
    """A share as an exact percentage for labels: 0.005 -> "0.5%", 0.1 -> "10%", 0.95 -> "95%". ``f"{x:.0%}"``
    would print the 0.5% fraction as "0%"; ``:g`` also drops the float noise of ``100 * x`` (7.000000000000001)."""
    return f"{100 * share:g}%"


def short_count(count: int) -> str:
    """1500 -> "1.5k", 50000 -> "50k", 800 -> "800"."""
    return f"{count / 1000:g}k" if count >= 1000 else str(count)


def require_columns(df: pd.DataFrame, columns: set[str], where: str) -> None:
    missing = columns - set(df.columns)
    if missing:
        raise StudyError(f"{where} needs columns {sorted(missing)}; got {list(df.columns)}")
