"""The table of finished runs: every run's metrics.json as one row, for analyses, reports and notebooks.

Kept apart from :mod:`study.runs.load` (which builds models) so that a stage reading only metrics runs no model code."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from study.core.errors import StudyError


def collect_runs(runs_dir: str | Path) -> pd.DataFrame:
    """One row per finished run under ``runs_dir`` (any depth): its metrics.json flattened, and its ``folder``;
    sorted by model, fraction, seed. The one reader of run metrics for every analysis, report and notebook."""
    rows = []
    for path in sorted(Path(runs_dir).rglob("metrics.json")):
        try:
            rows.append(_row(json.loads(path.read_text()), path))
        except KeyError as error:
            raise StudyError(f"{path}: no {error.args[0]!r} in it, which the trainer writes for every run; train the "
                             "run again (`dvc repro`)") from None
    if not rows:
        raise StudyError(f"{runs_dir}: no metrics.json found; run the training stages first (`dvc repro`)")
    return pd.DataFrame(rows).sort_values(["model", "fraction", "seed"], ignore_index=True)


def _row(m: dict, path: Path) -> dict:
    """One run's row. Every key the trainer writes for every run is required (KeyError when missing); only the
    per-head top-1 of a model with two heads (DeiT) and the teacher's FLOPs (0 when absent: no teacher) are not."""
    b = m["budget"]
    improving = bool(m["convergence"]["still_improving"])
    floor = b["source"] == "floor"
    return {
        "model": m["model"], "arch": m["arch"], "fraction": m["fraction"], "seed": m["seed"],
        "train_images": b["train_images"], "steps": b["steps"], "images_seen": b["images_seen"],
        "epochs": b["epochs"], "convention": b["convention"],
        "test_top1": m["test_top1"], "test_error": 1.0 - m["test_top1"], "test_loss": m["test_loss"],
        "val_top1": m["val_top1"], "train_top1": m["train_top1"],
        # Under-trained: validation loss still falling at the end. Step-bound: also on the min_steps
        # floor, so more steps, not more data, would have raised it (study.train.budget).
        "budget_source": b["source"], "under_trained": improving, "step_bound": improving and floor,
        "test_top1_cls": m.get("test_top1_cls", np.nan), "test_top1_dist": m.get("test_top1_dist", np.nan),
        "params": m["params"], "train_flops": m["train_flops"],
        "teacher_flops": m.get("teacher_flops", 0), "train_seconds": m["train_seconds"],
        "throughput": m["throughput_images_per_s"], "device": m["device"], "folder": path.parent,
    }
