"""The attention study: where the ViT and the distilled ViT look, and how far.

For one training seed and every fraction: mean attention distance per head and layer over a fixed set
of test images (Dosovitskiy et al. 2021, Fig. 7; Raghu et al. 2021, Fig. 3, on how little data stops
early heads from becoming local), and for the full-data models the per-head class-token attention of the
first and last block plus attention rollout (Abnar & Zuidema 2020) on a few images, for both prefix
tokens of the distilled ViT.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from study.analysis.attention import (
    attention_rollout,
    cls_attention_maps,
    cls_rollout_map,
    mean_attention_distance,
    uniform_attention_distance,
)
from study.analysis.runs import normalised_images
from study.models import attention_probs


def _geometry(model) -> tuple[tuple[int, int], int, int]:
    grid = tuple(model.patch_embed.grid_size)
    patch = model.patch_embed.patch_size
    patch = patch[0] if isinstance(patch, (tuple, list)) else patch
    return grid, int(patch), int(model.num_prefix_tokens)


@torch.no_grad()
def attention_distances(
    models: dict[tuple[str, float], tuple[torch.nn.Module, dict]], images: np.ndarray, batch_size: int,
    device: torch.device,
) -> pd.DataFrame:
    """Mean attention distance (pixels) per model, fraction, layer and head, plus the uniform reference."""
    rows = []
    for (name, fraction), (model, spec) in models.items():
        grid, patch, prefix = _geometry(model)
        sums = None
        for start in range(0, len(images), batch_size):
            x = normalised_images(images[start : start + batch_size], spec, device)
            per_layer = [mean_attention_distance(a, grid, patch, prefix, per_image=True).sum(0)
                         for a in attention_probs(model, x)]  # each (heads,), summed over images
            batch = torch.stack(per_layer)  # (layers, heads)
            sums = batch if sums is None else sums + batch
        distances = (sums / len(images)).cpu().numpy()
        uniform = uniform_attention_distance(grid, patch)
        rows += [
            {"model": name, "fraction": fraction, "layer": layer, "head": head, "distance": float(d),
             "uniform": uniform}
            for layer, heads in enumerate(distances) for head, d in enumerate(heads)
        ]
    return pd.DataFrame(rows)


@torch.no_grad()
def attention_maps(model: torch.nn.Module, spec: dict, images: np.ndarray, device: torch.device) -> dict:
    """Per-head maps (first and last block) and rollout maps for every prefix token, on ``images``.

    Returns ``{"tokens": {token_name: {"first": (B, heads, gh, gw), "last": ..., "rollout": (B, gh, gw)}}}``
    as numpy arrays; token names are "class" and, for the distilled ViT, "distillation".
    """
    grid, _, prefix = _geometry(model)
    attn = attention_probs(model, normalised_images(images, spec, device))
    rollout = attention_rollout(attn, head_fusion="mean")  # (B, T, T)
    tokens = {}
    for index, token in enumerate(("class", "distillation")[:prefix]):
        tokens[token] = {
            "first": cls_attention_maps(attn[0], prefix, grid, index).cpu().numpy(),
            "last": cls_attention_maps(attn[-1], prefix, grid, index).cpu().numpy(),
            "rollout": cls_rollout_map(rollout, prefix, grid, index).cpu().numpy(),
        }
    return {"tokens": tokens}
