"""Distillation: what the teacher knew, and whether the student inherited its way of deciding.

DeiT's argument for a convnet teacher is inductive bias passed on through its labels (Touvron et al. 2021,
§5.1, Table 4): the distilled ViT agrees with the convnet more often than a ViT trained from labels alone.
This module measures that on the test set from the runs' saved predictions (``predictions.npy``, written by
the trainer), for every fraction and seed, with the teacher of the same fraction and seed:

- :func:`agreement_runs` — one row per student run (and per head of a two-head student): the share of test
  images on which its prediction equals the teacher's;
- :func:`teacher_table` — the teacher's accuracy on (a sample of) its own training images and on the test
  set: when a teacher is right on nearly all its training images, its hard labels equal the true labels
  and hard distillation carries almost no extra signal.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from study.stats.intervals import t_interval
from study.core.errors import StudyError

# Rows of predictions.npy: the model's prediction, then, for a two-head model, each head's (study.train.loop).
_HEADS = {1: ("model",), 3: ("model", "class head", "distillation head")}


def read_predictions(folder: Path) -> np.ndarray:
    path = Path(folder) / "predictions.npy"
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise StudyError(f"{path}: missing; rerun its training stage (`dvc repro`)") from None
    except ValueError:
        raise StudyError(f"{path}: unreadable predictions; rerun its training stage (`dvc repro -f`)") from None


def agreement_runs(runs: pd.DataFrame, teacher: str, students: list[str]) -> pd.DataFrame:
    """Per student run (and head): agreement with the teacher run of the same fraction and seed."""
    by_run = runs.set_index(["model", "fraction", "seed"])
    rows = []
    for (model, fraction, seed), run in by_run.loc[by_run.index.get_level_values("model").isin(students)].iterrows():
        if (teacher, fraction, seed) not in by_run.index:
            continue
        reference = read_predictions(by_run.loc[(teacher, fraction, seed), "folder"])[0]  # (N,)
        predictions = read_predictions(run["folder"])  # (1 + heads, N)
        for head, row in zip(_HEADS.get(len(predictions), ("model",)), predictions):
            rows.append({"model": model, "head": head, "fraction": fraction, "seed": seed,
                         "train_images": run["train_images"], "agreement": float(np.mean(row == reference)),
                         "under_trained": run["under_trained"], "step_bound": run["step_bound"]})
    return pd.DataFrame(rows, columns=["model", "head", "fraction", "seed", "train_images", "agreement",
                                       "under_trained", "step_bound"])


def agreement_summary(per_run: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Mean agreement and t-interval over seeds per model, head and fraction."""
    rows = []
    for (model, head, fraction), g in per_run.groupby(["model", "head", "fraction"], sort=True):
        mean, _, half = t_interval(g["agreement"].to_numpy(), confidence)
        rows.append({"model": model, "head": head, "fraction": fraction, "train_images": int(g["train_images"].median()),
                     "seeds": len(g), "agreement_mean": mean, "ci_low": mean - half, "ci_high": mean + half})
    return pd.DataFrame(rows)


def teacher_table(runs: pd.DataFrame, teacher: str, confidence: float) -> pd.DataFrame:
    """The teacher per fraction: train top-1 (its own training images) and test top-1, with t-intervals."""
    rows = []
    for fraction, g in runs[runs["model"] == teacher].groupby("fraction", sort=True):
        row = {"model": teacher, "fraction": fraction, "train_images": int(g["train_images"].median()), "seeds": len(g)}
        for split in ("train", "test"):
            mean, _, half = t_interval(g[f"{split}_top1"].to_numpy(dtype=float), confidence)
            row |= {f"{split}_top1_mean": mean, f"{split}_top1_ci_low": mean - half, f"{split}_top1_ci_high": mean + half}
        rows.append(row)
    return pd.DataFrame(rows)
