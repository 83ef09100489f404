"""Figures of the robustness analysis (:mod:`study.robustness.contrasts`): top-1 against the occlusion share, the
shuffle grid and the shift, one panel per fraction; each corruption's error relative to the ResNet; and the
ViT − ResNet contrasts against training images at the headline conditions. Style and saving:
:mod:`study.outputs.figure_style`; model colours are the study's."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from study.robustness import ALIGNED, DIRECTIONS, OFFSET, SHUFFLE
from study.outputs.figure_style import (DOUBLE_COLUMN_IN, contrast_markers, model_colour, paper_style, percent_label,
                                         require_columns, short_count, training_images_axis)

_STYLES = ("-", "--", ":", "-.")
_VARIANT_ORDER = (ALIGNED, SHUFFLE, OFFSET, *DIRECTIONS)
_SUMMARY = {"model", "fraction", "train_images", "probe", "variant", "level", "top1_mean", "top1_ci_low",
            "top1_ci_high"}


def _panels(summary: pd.DataFrame, height: float = 2.1):
    fractions = sorted(summary["fraction"].unique())
    fig = Figure(figsize=(DOUBLE_COLUMN_IN, height), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(fractions), sharey=True))
    return fig, list(zip(axes, fractions))


def probe_figure(summary: pd.DataFrame, probe: str, xlabel: str, confidence: float, categorical: bool = False,
                 share: bool = False) -> Figure:
    """Top-1 against the level of ``probe`` (level 0: the clean images), one panel per fraction, one colour per
    model, one line style per variant; bands (or bars, for a categorical axis) are the t-intervals over seeds.

    Columns: ``model``, ``fraction``, ``train_images``, ``probe``, ``variant``, ``level``, ``top1_mean``,
    ``top1_ci_low``, ``top1_ci_high`` (rows of other probes are ignored)."""
    require_columns(summary, _SUMMARY, "probe_figure")
    data = summary[summary["probe"] == probe]
    found = set(data["variant"])
    # Line styles in this order, so that the captions can name them: the grid's own variant solid, its offset
    # control dashed; x, y, diagonal as solid, dashed, dotted.
    variants = [v for v in _VARIANT_ORDER if v in found] + sorted(found - set(_VARIANT_ORDER))
    # A categorical axis has a place per level of any variant: the offset shuffle's 7x7 (clean and 7 only) sits at
    # the aligned shuffle's 7x7, not at its second place.
    places = {level: i for i, level in enumerate(sorted(data["level"].unique()))}
    with paper_style(grid=True):
        fig, panels = _panels(data)
        for ax, fraction in panels:
            at = data[data["fraction"] == fraction]
            for (model, variant), g in at.groupby(["model", "variant"], sort=True):
                g = g.sort_values("level")
                levels = g["level"].to_numpy(float)
                x = np.array([places[v] for v in levels]) if categorical else (100 * levels if share else levels)
                colour, style = model_colour(str(model)), _STYLES[variants.index(variant) % len(_STYLES)]
                label = str(model) if len(variants) == 1 else f"{model}, {variant}"
                y, low, high = (g[c].to_numpy(float) for c in ("top1_mean", "top1_ci_low", "top1_ci_high"))
                ax.plot(x, y, linestyle=style, marker="o", markersize=2.5, color=colour, linewidth=1, label=label)
                if np.isfinite(low).any():
                    ax.fill_between(x, low, high, color=colour, alpha=0.15, linewidth=0)
            if categorical:
                ax.set_xticks(list(places.values()), ["clean" if v == 0 else f"{v:g}" for v in places])
            ax.set_title(f"{percent_label(fraction)} ({short_count(int(at['train_images'].iloc[0]))} images)")
            ax.set_ylim(0, 1)
        # Once, under the middle panel: a label per narrow panel would run into its neighbours.
        panels[len(panels) // 2][0].set_xlabel(xlabel)
        panels[0][0].set_ylabel(f"Top-1 (mean, {confidence:.0%} CI)")
        handles, labels = panels[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 6), frameon=False)
        fig.canvas.draw()
    return fig


def corruption_figure(ce: pd.DataFrame, confidence: float) -> Figure:
    """Corruption error of each model relative to the baseline (1: as robust; below 1: more robust), per corruption,
    one panel per fraction; bars are the t-intervals over seeds.

    Columns: ``model``, ``baseline``, ``fraction``, ``train_images``, ``corruption``, ``ce_mean``, ``ce_ci_low``,
    ``ce_ci_high``."""
    require_columns(ce, {"model", "baseline", "fraction", "train_images", "corruption", "ce_mean", "ce_ci_low",
                         "ce_ci_high"}, "corruption_figure")
    shown = ce[ce["model"] != ce["baseline"]]
    corruptions = list(dict.fromkeys(shown["corruption"]))
    models = sorted(shown["model"].unique())
    with paper_style(grid=True):
        fig, panels = _panels(shown, height=2.6)
        width = 0.8 / max(len(models), 1)
        for ax, fraction in panels:
            at = shown[shown["fraction"] == fraction]
            for i, model in enumerate(models):
                g = at[at["model"] == model].set_index("corruption").reindex(corruptions)
                y = np.arange(len(corruptions)) + (i - (len(models) - 1) / 2) * width
                mean = g["ce_mean"].to_numpy(float)
                err = np.vstack([mean - g["ce_ci_low"].to_numpy(float), g["ce_ci_high"].to_numpy(float) - mean])
                ax.barh(y, mean, height=width, color=model_colour(model), label=model,
                        xerr=np.where(np.isfinite(err), err, 0), error_kw={"linewidth": 0.6})
            ax.axvline(1.0, color="0.3", linewidth=0.8)
            ax.set_yticks(np.arange(len(corruptions)), [c.replace("_", " ") for c in corruptions])
            ax.set_title(f"{percent_label(fraction)} ({short_count(int(at['train_images'].iloc[0]))} images)")
            ax.set_xlabel(f"error / {shown['baseline'].iloc[0]}'s")
        panels[0][0].invert_yaxis()  # the first corruption at the top; once, as the panels share the axis
        handles, labels = panels[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False,
                   title=f"corruption error summed over severities, mean and {confidence:.0%} CI over seeds")
        fig.canvas.draw()
    return fig


def contrasts_figure(contrasts: pd.DataFrame) -> Figure:
    """Accuracy contrasts ``a − b`` (points) against training images at the headline conditions, one panel per
    condition, one colour per comparison (its first model's): the mean, the Holm-adjusted interval, filled where
    it excludes 0 with enough seeds.

    Columns: ``condition``, ``comparison``, ``train_images``, ``diff_mean``, ``adj_ci_low``, ``adj_ci_high``,
    ``significant``, ``inference``."""
    require_columns(contrasts, {"condition", "comparison", "train_images", "diff_mean", "adj_ci_low", "adj_ci_high",
                                "significant", "inference"}, "contrasts_figure")
    conditions = list(dict.fromkeys(contrasts["condition"]))
    with paper_style(grid=True):
        fig = Figure(figsize=(DOUBLE_COLUMN_IN, 2.2), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(conditions), sharey=True))
        for ax, condition in zip(axes, conditions):
            at = contrasts[contrasts["condition"] == condition]
            comparisons = list(dict.fromkeys(at["comparison"]))
            for i, (comparison, g) in enumerate(at.groupby("comparison", sort=False)):
                g = g.sort_values("train_images")
                colour = model_colour(comparison.split(" - ")[0])
                x = g["train_images"].to_numpy(float) * (1.0 + 0.06 * (i - (len(comparisons) - 1) / 2))
                y = 100 * g["diff_mean"].to_numpy(float)
                ax.vlines(x, 100 * g["adj_ci_low"], 100 * g["adj_ci_high"], color=colour, linewidth=1.6, alpha=0.6)
                ax.plot(x, y, color=colour, linewidth=1, label=comparison)
                contrast_markers(ax, x, y, (g["significant"] & g["inference"]).to_numpy(bool), colour, 12)
            training_images_axis(ax, np.sort(at["train_images"].unique()))
            ax.set_title(condition)
        axes[0].set_ylabel("Top-1 difference (points)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False,
                   title="Holm-adjusted intervals; filled: the interval excludes 0")
        fig.canvas.draw()
    return fig
