"""Finding finished runs and loading their models, for the analysis stages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from study.errors import StudyError
from study.train.artifacts import load_trained


def find_runs(runs_dir: str | Path) -> pd.DataFrame:
    """One row per run folder holding ``metrics.json``: model, fraction, seed, folder."""
    rows = []
    for metrics in sorted(Path(runs_dir).rglob("metrics.json")):
        m = json.loads(metrics.read_text())
        rows.append({"model": m["model"], "fraction": m["fraction"], "seed": m["seed"], "folder": metrics.parent})
    if not rows:
        raise StudyError(f"{runs_dir}: no finished runs; run the training stages first (`dvc repro`)")
    return pd.DataFrame(rows).sort_values(["model", "fraction", "seed"], ignore_index=True)


def load_models(runs: pd.DataFrame, seed: int, device: torch.device) -> dict[tuple[str, float], tuple]:
    """``(model name, fraction) -> (model in eval mode, spec)`` for every run of ``seed``."""
    chosen = runs[runs["seed"] == seed]
    if chosen.empty:
        raise StudyError(f"no runs with seed {seed}; set analysis.seed to a trained seed")
    return {
        (row.model, row.fraction): load_trained(Path(row.folder) / "model.pt", device)
        for row in chosen.itertuples()
    }


def normalised_images(images, spec: dict, device: torch.device) -> torch.Tensor:
    """uint8 (N, H, W, C) -> float (N, C, H, W) normalised as the model was trained."""
    from study.train.batches import normalise

    x = torch.from_numpy(np.array(images, dtype=np.uint8)).to(device)  # copy: inputs may be read-only maps
    mean = torch.tensor(spec["mean"], device=device)
    std = torch.tensor(spec["std"], device=device)
    return normalise(x, mean, std).contiguous()
