"""What the runs were given and what they used: the report's setup tables, and whether each run fit its data.

Each function aggregates the run table (:func:`study.runs.table.collect_runs`, one row per run) into one
table the report prints or words; the report itself only reads them. The budget is identical across models
in steps and images seen at a fraction, not in FLOPs or seconds, so :func:`compute_table` shows both.
"""

from __future__ import annotations

import pandas as pd

# The stems the report stage writes these tables under: defined with the writing kit, where the questions read them.
from study.writing import BUDGETS, COMPUTE, DEIT_HEADS, MODELS, TRAINING_FIT  # noqa: F401

# Train top-1 (unaugmented) a run must reach on its own training images to count as having fit them.
FIT = 0.99


def models_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model: architecture, parameters, training GFLOPs at the largest budget, median throughput."""
    models = (runs.groupby("model", sort=False)
              .agg(arch=("arch", "first"), params=("params", "first"),
                   train_GFLOPs_full=("train_flops", "max"), throughput_img_s=("throughput", "median"))
              .reset_index())
    models["train_GFLOPs_full"] = (models["train_GFLOPs_full"] / 1e9).round(1)
    return models


def budgets_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per fraction: training images, steps, images seen, epochs, what set the steps, runs still improving."""
    return (runs.groupby("fraction").agg(train_images=("train_images", "median"), steps=("steps", "first"),
                                         images_seen=("images_seen", "first"), epochs=("epochs", "first"),
                                         steps_from=("budget_source", "first"),
                                         still_improving=("under_trained", "sum"), runs=("seed", "size"))
            .reset_index())


def compute_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model and fraction: steps, images seen, training TFLOPs (the student's plus its teacher's forward
    passes; mean over seeds), median training seconds, runs still improving."""
    return (runs.assign(train_TFLOPs=(runs["train_flops"] + runs["teacher_flops"]) / 1e12)
            .groupby(["model", "fraction"], sort=True)
            .agg(runs=("seed", "size"), steps=("steps", "first"), images_seen=("images_seen", "first"),
                 train_TFLOPs=("train_TFLOPs", "mean"), train_seconds=("train_seconds", "median"),
                 still_improving=("under_trained", "sum"))
            .reset_index())


def heads_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per distilled model and fraction: mean test top-1 of the averaged heads, the class head and the
    distillation head (DeiT, Touvron et al. 2021, Table 3); empty without a distilled model."""
    heads = runs.dropna(subset=["test_top1_cls"])
    return (heads.groupby(["model", "fraction"], as_index=False)
            .agg(avg=("test_top1", "mean"), cls_head=("test_top1_cls", "mean"), dist_head=("test_top1_dist", "mean")))


def training_fit(runs: pd.DataFrame, fit: float = FIT) -> pd.DataFrame:
    """Per model and fraction, over the runs that scored their training images: train top-1 mean and lowest,
    how many runs stayed below ``fit``, and how many of those had settled (validation loss no longer falling);
    ``still_improving`` counts every scored run still improving. Empty when no run scored them."""
    scored = runs.dropna(subset=["train_top1"]).assign(
        below=lambda r: r["train_top1"] < fit, improving=lambda r: r["under_trained"].astype(bool))
    scored = scored.assign(settled_below=scored["below"] & ~scored["improving"])
    table = (scored.groupby(["model", "fraction"], sort=True)
             .agg(runs=("seed", "size"), train_top1_mean=("train_top1", "mean"), train_top1_min=("train_top1", "min"),
                  below_fit=("below", "sum"), below_fit_settled=("settled_below", "sum"),
                  still_improving=("improving", "sum"))
             .reset_index())
    return table.assign(fit=fit)
