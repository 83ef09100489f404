"""Every analysis of the pretrained preset in one streaming pass over the images.

Per batch of decoded images, each model gets its own preprocessed input and runs once; from that run come
its block outputs (for CKA) and, for the study's ViT/DeiT, its softmax attention (for mean attention
distance and entropy, and rollout on the first images). Nothing proportional to the number of images is
kept: CKA is minibatch CKA (Nguyen, Raghu & Kornblith 2021; :class:`~study.cka.estimators.MinibatchCKA`),
which sums three HSIC terms per layer pair over batches, and the attention statistics are running sums.
One accumulator holds the layers of every model on both sides, so within-model (Raghu et al. 2021, Fig. 1)
and across-model (Fig. 2) matrices are blocks of one matrix, and each layer's Gram is computed once a batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from tqdm import tqdm

from study.attention.maps import (attention_rollout, cls_attention_maps, cls_rollout_map,
                                      mean_attention_distance, mean_attention_entropy, uniform_attention_distance,
                                      uniform_attention_entropy)
from study.cka.estimators import MinibatchCKA
from study.models import representations
from study.models.vit import VisionTransformer
from study.pretrained.images import batches as image_batches
from study.pretrained.load import Checkpoint

HEAD_COLUMNS = ["model", "layer", "head", "distance", "entropy", "uniform_distance", "uniform_entropy"]


@dataclass(frozen=True)
class AttentionMaps:
    """What the rollout figure of one model shows, for the first images: crops in [0, 1] ``(N, C, H, W)``,
    class-token attention per head of the first and last block ``(N, heads, gh, gw)``, rollout ``(N, gh, gw)``."""

    pictures: np.ndarray
    first: np.ndarray
    last: np.ndarray
    rollout: np.ndarray


@dataclass(frozen=True)
class Analysis:
    layers: dict[str, list[str]]  # model -> its recorded layers, input side first
    cka: np.ndarray  # (all layers, all layers), models in `layers` order
    heads: pd.DataFrame  # HEAD_COLUMNS, one row per ViT-family model, block and head
    maps: dict[str, AttentionMaps]
    images: int  # images in the whole batches analysed

    def block(self, a: str, b: str) -> np.ndarray:
        """CKA of every layer of model ``a`` (rows) with every layer of model ``b`` (columns)."""
        offsets = np.cumsum([0, *(len(v) for v in self.layers.values())])
        start = dict(zip(self.layers, offsets))
        return self.cka[start[a] : start[a] + len(self.layers[a]), start[b] : start[b] + len(self.layers[b])]


def _run(model: torch.nn.Module, x: Tensor) -> tuple[dict[str, Tensor], list[Tensor] | None]:
    """Block outputs and (ViT/DeiT only) per-block attention ``(B, heads, T, T)`` from one forward pass."""
    if isinstance(model, VisionTransformer):
        # One explicit-attention pass gives both; calling representations() and attention_probs() would run
        # the model twice (study/models is a dependency of every training stage, so it stays as it is).
        tokens, attention, _ = model._trace(x)
        return tokens, attention
    return representations(model, x), None


def _geometry(model: VisionTransformer) -> tuple[tuple[int, int], int, int]:
    """(patch grid, patch side in input pixels, prefix tokens)."""
    return tuple(model.patch_embed.grid_size), int(model.patch_embed.patch_size[0]), int(model.num_prefix_tokens)


class _AttentionSums:
    """Running sums over images of each head's mean attention distance and entropy, ``(blocks, heads)``."""

    def __init__(self) -> None:
        self.distance: Tensor | None = None
        self.entropy: Tensor | None = None
        self.count = 0

    def add(self, attention: list[Tensor], grid: tuple[int, int], patch: int, prefix: int) -> None:
        distance = torch.stack([mean_attention_distance(a, grid, patch, prefix, per_image=True).sum(0)
                                for a in attention])  # (blocks, heads), summed over the batch
        entropy = torch.stack([mean_attention_entropy(a, grid, prefix, per_image=True).sum(0) for a in attention])
        self.distance = distance if self.distance is None else self.distance + distance
        self.entropy = entropy if self.entropy is None else self.entropy + entropy
        self.count += attention[0].shape[0]

    def rows(self, name: str, grid: tuple[int, int], patch: int) -> list[dict]:
        distance = (self.distance / self.count).cpu().numpy()
        entropy = (self.entropy / self.count).cpu().numpy()
        uniform = uniform_attention_distance(grid, patch), uniform_attention_entropy(grid)
        return [{"model": name, "layer": layer, "head": head, "distance": float(distance[layer, head]),
                 "entropy": float(entropy[layer, head]), "uniform_distance": uniform[0], "uniform_entropy": uniform[1]}
                for layer in range(distance.shape[0]) for head in range(distance.shape[1])]


def _maps(attention: list[Tensor], pictures: Tensor, grid: tuple[int, int], prefix: int) -> AttentionMaps:
    rollout = attention_rollout(attention, head_fusion="mean")  # (N, T, T)
    return AttentionMaps(pictures.cpu().numpy(), cls_attention_maps(attention[0], prefix, grid).cpu().numpy(),
                         cls_attention_maps(attention[-1], prefix, grid).cpu().numpy(),
                         cls_rollout_map(rollout, prefix, grid).cpu().numpy())


@torch.no_grad()
def analyse(checkpoints: Mapping[str, Checkpoint], paths: Sequence[Path], batch_size: int, kernel: str,
            rbf_threshold: float, show: int, device: torch.device) -> Analysis:
    """CKA between every layer pair of every model, attention statistics and rollout maps, over ``paths``
    (whole batches of ``batch_size`` only: minibatch CKA weighs each batch the same)."""
    models = {name: c.model.to(device).eval() for name, c in checkpoints.items()}
    sums = {name: _AttentionSums() for name, model in models.items() if isinstance(model, VisionTransformer)}
    layers: dict[str, list[str]] = {}
    maps: dict[str, AttentionMaps] = {}
    accumulator: MinibatchCKA | None = None
    batches = image_batches(paths, batch_size)
    for batch in tqdm(batches, total=len(paths) // batch_size, desc="pretrained", unit="batch", disable=None):
        features: dict[str, Tensor] = {}
        for name, model in models.items():
            preprocessing = checkpoints[name].preprocessing
            pictures = preprocessing.pictures(batch)  # (B, C, H, W) in [0, 1]
            tokens, attention = _run(model, preprocessing.normalise(pictures).to(device))
            layers.setdefault(name, list(tokens))
            features.update({f"{name}/{layer}": value for layer, value in tokens.items()})
            if attention is not None:
                grid, patch, prefix = _geometry(model)
                sums[name].add(attention, grid, patch, prefix)
                if name not in maps:  # the first images of the first batch
                    maps[name] = _maps([a[:show] for a in attention], pictures[:show], grid, prefix)
            del attention  # (blocks × B × heads × T × T): free before the next model runs
        if accumulator is None:
            tags = [f"{name}/{layer}" for name in models for layer in layers[name]]
            accumulator = MinibatchCKA(tags, tags, kernel, rbf_threshold)
        accumulator.update(features)
    if accumulator is None:
        raise ValueError("analyse() needs at least one whole batch of images")  # the stage checks this first
    heads = [row for name, s in sums.items() for row in s.rows(name, *_geometry(models[name])[:2])]
    return Analysis(layers, accumulator.compute(), pd.DataFrame(heads, columns=HEAD_COLUMNS), maps,
                    accumulator.num_examples)


# --------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------


def models_table(checkpoints: Mapping[str, Checkpoint], sources: Mapping[str, str], analysis: Analysis,
                 root: Path) -> pd.DataFrame:
    """One row per model: what it is, its input and preprocessing, and the SHA-256 of its weights file."""
    from study.models.cost import count_parameters
    from study.pretrained.weights import sha256

    rows = []
    for name, c in checkpoints.items():
        p = c.preprocessing
        rows.append({"model": name, "source": sources[name], "kind": c.kind, "architecture": c.architecture,
                     "study_module": type(c.model).__name__, "params": count_parameters(c.model),
                     "layers": len(analysis.layers[name]), "attention_maps": c.attention_maps,
                     "input": f"{p.channels}x{p.crop[0]}x{p.crop[1]}", "preprocessing": p.describe(),
                     "preprocessing_from": p.source, "weights": _relative(c.weights, root),
                     "weights_sha256": sha256(c.weights)})
    return pd.DataFrame(rows)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def images_table(paths: Sequence[Path], root: Path, used: int) -> pd.DataFrame:
    """The images analysed, in order, with their SHA-256: the provenance of every number."""
    from study.pretrained.weights import sha256

    return pd.DataFrame({"index": range(used), "path": [_relative(p, root) for p in paths[:used]],
                         "sha256": [sha256(p) for p in paths[:used]]})


def cka_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """Every model with itself, then every pair of models in preset order (a before b)."""
    names = list(names)
    return [(a, a) for a in names] + [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


def matched_depth_table(analysis: Analysis) -> pd.DataFrame:
    """Across-model CKA read at equal relative depth (layer i of L at i/(L−1)), on the study's depth grid."""
    from study.cka.similarity import DEPTH_GRID, matched_depth

    rows = [{"model_a": a, "model_b": b, "relative_depth": depth, "cka": float(value)}
            for a, b in cka_pairs(analysis.layers) if a != b
            for depth, value in zip(DEPTH_GRID, matched_depth(analysis.block(a, b)))]
    return pd.DataFrame(rows, columns=["model_a", "model_b", "relative_depth", "cka"])


def attention_layer_table(heads: pd.DataFrame, local_share: float) -> pd.DataFrame:
    """Per model and block: the most local, mean and least local head distance, the heads below
    ``local_share`` × the uniform-attention distance, mean entropy, and the uniform references."""
    if heads.empty:
        return pd.DataFrame(columns=["model", "layer", "heads", "min_distance", "mean_distance", "max_distance",
                                     "local_heads", "mean_entropy", "uniform_distance", "uniform_entropy"])
    local = heads.assign(local=heads["distance"] < local_share * heads["uniform_distance"])
    return (local.groupby(["model", "layer"], sort=False)
            .agg(heads=("head", "size"), min_distance=("distance", "min"), mean_distance=("distance", "mean"),
                 max_distance=("distance", "max"), local_heads=("local", "sum"), mean_entropy=("entropy", "mean"),
                 uniform_distance=("uniform_distance", "first"), uniform_entropy=("uniform_entropy", "first"))
            .reset_index())
