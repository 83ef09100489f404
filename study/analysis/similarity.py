"""The CKA study: which layers of which models compute similar representations.

On the same test images, in the same order, for one training seed:
- within each model at full data (layer × layer; Raghu et al. 2021, Fig. 1);
- across models at full data (ViT vs ResNet, DeiT vs ResNet, ViT vs DeiT; their Fig. 2);
- each model at every fraction against its own full-data counterpart, layer by layer (their Fig. 12).
All use minibatch CKA with the unbiased HSIC (Nguyen, Raghu & Kornblith 2021).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from study.analysis.cka import MinibatchCKA
from study.analysis.runs import normalised_images
from study.models import representations


def _layers(model, x: torch.Tensor) -> list[str]:
    return list(representations(model, x[:4]).keys())


@torch.no_grad()
def cka_study(
    models: dict[tuple[str, float], tuple[torch.nn.Module, dict]],
    images: np.ndarray,
    batch_size: int,
    kernel: str,
    rbf_threshold: float,
    device: torch.device,
) -> dict:
    """Run every comparison above in one pass over ``images`` (uint8, (N, H, W, C)).

    Returns ``{"within": {name: (layers, matrix)}, "across": {(a, b): (layers_a, layers_b, matrix)},
    "to_full": DataFrame(model, fraction, layer, depth, cka)}``.
    """
    full = max(f for _, f in models)
    names = sorted({name for name, _ in models})
    probe = {key: normalised_images(images[:4], spec, device) for key, (_, spec) in models.items()}
    layers = {key: _layers(model, probe[key]) for key, (model, _) in models.items()}

    within = {n: MinibatchCKA(layers[n, full], layers[n, full], kernel, rbf_threshold) for n in names}
    across = {
        (a, b): MinibatchCKA(layers[a, full], layers[b, full], kernel, rbf_threshold)
        for a, b in itertools.combinations(names, 2)
    }
    to_full = {
        (n, f): MinibatchCKA(layers[n, f], layers[n, full], kernel, rbf_threshold)
        for n, f in models if f != full
    }

    # Equal-sized batches only: the paper averages HSIC terms over batches, each weighing the same.
    usable = len(images) - len(images) % batch_size
    for start in tqdm(range(0, usable, batch_size), desc="cka", unit="batch", disable=None):
        feats = {
            key: representations(model, normalised_images(images[start : start + batch_size], spec, device))
            for key, (model, spec) in models.items()
        }
        for n, acc in within.items():
            acc.update(feats[n, full])
        for (a, b), acc in across.items():
            acc.update(feats[a, full], feats[b, full])
        for (n, f), acc in to_full.items():
            acc.update(feats[n, f], feats[n, full])

    rows = []
    for (n, f), acc in to_full.items():
        diagonal = np.diag(acc.compute())  # layer i at fraction f vs layer i at full data
        depth = np.linspace(0, 1, len(diagonal))
        rows += [{"model": n, "fraction": f, "layer": layer, "depth": d, "cka": c}
                 for layer, d, c in zip(layers[n, f], depth, diagonal)]
    return {
        "within": {n: (layers[n, full], acc.compute()) for n, acc in within.items()},
        "across": {(a, b): (layers[a, full], layers[b, full], acc.compute()) for (a, b), acc in across.items()},
        "to_full": pd.DataFrame(rows, columns=["model", "fraction", "layer", "depth", "cka"]),
    }
