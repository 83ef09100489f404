"""Loading finished runs' models, and the images the analyses show them, normalised as each was trained."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from study.core.errors import StudyError
from study.train.artifacts import load_trained
from study.train.spec import RunSpec


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
