"""Finding finished runs, tabulating their metrics and loading their models, for analyses and notebooks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from study.errors import StudyError
from study.train.artifacts import load_trained
from study.train.spec import RunSpec


def collect_runs(runs_dir: str | Path) -> pd.DataFrame:
    """One row per finished run under ``runs_dir`` (any depth): its metrics.json flattened, and its ``folder``;
    sorted by model, fraction, seed. The one reader of run metrics for every analysis, report and notebook."""
    rows = []
    for path in sorted(Path(runs_dir).rglob("metrics.json")):
        m = json.loads(path.read_text())
        b = m["budget"]
        # Runs written before the convergence record count as still improving: nothing shows they settled.
        improving = bool(m.get("convergence", {}).get("still_improving", True))
        floor = b.get("source") == "floor"
        rows.append({
            "model": m["model"], "arch": m["arch"], "fraction": m["fraction"], "seed": m["seed"],
            "train_images": b["train_images"], "steps": b["steps"], "images_seen": b["images_seen"],
            "epochs": b["epochs"], "convention": b["convention"],
            "test_top1": m["test_top1"], "test_error": 1.0 - m["test_top1"], "test_loss": m["test_loss"],
            "val_top1": m["val_top1"], "train_top1": m.get("train_top1", np.nan),
            # Under-trained: validation loss still falling at the end. Step-bound: also on the min_steps
            # floor, so more steps, not more data, would have raised it (study.train.budget).
            "budget_source": b.get("source", "epochs"), "under_trained": improving, "step_bound": improving and floor,
            "test_top1_cls": m.get("test_top1_cls", np.nan), "test_top1_dist": m.get("test_top1_dist", np.nan),
            "params": m["params"], "train_flops": m["train_flops"],
            "teacher_flops": m.get("teacher_flops", 0), "train_seconds": m["train_seconds"],
            "throughput": m["throughput_images_per_s"], "device": m["device"], "folder": path.parent,
        })
    if not rows:
        raise StudyError(f"{runs_dir}: no metrics.json found; run the training stages first (`dvc repro`)")
    return pd.DataFrame(rows).sort_values(["model", "fraction", "seed"], ignore_index=True)


def load_models(runs: pd.DataFrame, seed: int, device: torch.device, weights: str = "model.pt"
                ) -> dict[tuple[str, float], tuple]:
    """``(model name, fraction) -> (model in eval mode, spec)`` for every run of ``seed``; ``weights="init.pt"``
    gives each run's weights before its first step instead of its final ones."""
    chosen = runs[runs["seed"] == seed]
    if chosen.empty:
        raise StudyError(f"no runs with seed {seed}; set analysis.seed to a trained seed")
    return {
        (row.model, row.fraction): load_trained(Path(row.folder) / weights, device)
        for row in chosen.itertuples()
    }


def normalised_images(images, spec: RunSpec, device: torch.device) -> torch.Tensor:
    """uint8 (N, H, W, C) -> float (N, C, H, W) normalised as the model was trained, and scrambled first if it was
    trained on scrambled images (the same fixed scramble: the model sees the world through it)."""
    from study.data.scramble import scramble_images, setting_scramble
    from study.train.batches import normalise

    if spec.scramble is not None:
        images = scramble_images(np.asarray(images), setting_scramble(spec.scramble, *np.shape(images)[1:3]))

    x = torch.from_numpy(np.array(images, dtype=np.uint8)).to(device)  # copy: inputs may be read-only maps
    mean = torch.tensor(spec.mean, device=device)
    std = torch.tensor(spec.std, device=device)
    return normalise(x, mean, std).contiguous()


def analysis_images(prepared: str | Path, count: int) -> np.ndarray:
    """The first ``count`` test images of the prepared data (uint8, (N, H, W, C)): the fixed set every
    representation and attention analysis reads, so all models see the same images."""
    from study.data.prepared import read_prepared

    test = read_prepared(prepared).test_images
    return np.asarray(test[: min(count, len(test))])
