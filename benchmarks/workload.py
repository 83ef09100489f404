"""What a benchmark trains: the models, their inputs, their loss and the synthetic data both paths read.

A :class:`BenchModel` is one row group of the table: an architecture, the recipe and augmentation it trains
with, and, for a distilled student (DeiT), its teacher. Both paths (:mod:`benchmarks.study_path`,
:mod:`benchmarks.usual_path`) train the same workload, so that only the way a step is run differs. The images
are random: speed does not depend on the pixels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from study.models import build_model
from study.train.augment import Augmentation
from study.train.recipe import Recipe
from study.train.losses import DistillationLoss, LabelLoss

# Default recipes for a bare architecture (no params entry): He et al. (2016) SGD for CNNs, DeiT's AdamW
# with gradient clipping for transformers. Only the optimiser kind and clipping change the step's cost.
CNN_RECIPE = Recipe(optimizer="sgd", lr=0.1, weight_decay=5e-4, momentum=0.9, beta2=0.999, label_smoothing=0.1,
                    grad_clip=0.0, warmup=0.05)
VIT_RECIPE = Recipe(optimizer="adamw", lr=1e-3, weight_decay=0.05, momentum=0.9, beta2=0.999, label_smoothing=0.1,
                    grad_clip=1.0, warmup=0.05)


@dataclass(frozen=True)
class Teacher:
    """The frozen teacher of a distilled student (DeiT): randomly initialised, it costs the same."""

    arch: str
    arch_args: dict[str, Any]
    kind: str  # "hard" or "soft"
    alpha: float
    tau: float


@dataclass(frozen=True)
class BenchModel:
    """One model to benchmark. ``recipe`` None: :data:`CNN_RECIPE` or :data:`VIT_RECIPE` by model family."""

    name: str  # its label in the table
    arch: str  # a study.models.build_model name
    arch_args: dict[str, Any] = field(default_factory=dict)
    recipe: Recipe | None = None
    teacher: Teacher | None = None
    augmentation: Augmentation = Augmentation()  # none by default


@dataclass(frozen=True)
class Shape:
    """The images and classes the models are built for."""

    image_size: int
    in_chans: int
    num_classes: int


def synthetic_data(count: int, shape: Shape, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random uint8 images (N, H, W, C) and int64 labels (N,)."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(count, shape.image_size, shape.image_size, shape.in_chans), dtype=np.uint8)
    return images, rng.integers(0, shape.num_classes, size=count).astype(np.int64)


def bench_loss(teacher: Teacher | None, label_smoothing: float, shape: Shape, device: torch.device) -> nn.Module:
    """The study's loss on ``device``: labels only, or DeiT distillation from a (randomly initialised) teacher."""
    base = LabelLoss(label_smoothing)
    if teacher is None:
        return base.to(device)
    t = teacher
    model = build_model(t.arch, shape.num_classes, shape.image_size, shape.in_chans, **t.arch_args).to(device)
    return DistillationLoss(base, model, t.kind, t.alpha, t.tau).to(device)


def heavy_augmentation(image_size: int) -> Augmentation:
    """DeiT's training augmentation (Touvron et al. 2021: RandAugment n 2 m 9, random erasing 0.25, Mixup 0.8,
    CutMix 1.0) plus the CIFAR crop and flip (4 px of padding on 32 px images, scaled to the image size)."""
    return Augmentation(crop_padding=max(1, image_size // 8), hflip=True, auto_augment="rand", rand_n=2, rand_m=9,
                        erasing=0.25, mixup_alpha=0.8, cutmix_alpha=1.0, mix_prob=1.0)
