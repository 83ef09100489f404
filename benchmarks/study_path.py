"""The benchmark's ``study`` path: the very training step ``train_run`` takes, one call per optimiser step.

:class:`study.train.step.TrainStep` as the train stage drives it: the split resident on the device as uint8,
index batches augmented and normalised on the device, the study's optimiser (fused on GPU), the forward under
``train.precision`` (:func:`study.train.step.autocast_for`: bf16 autocast on GPU by default) and channels_last
for CNNs, optional ``torch.compile``, the study's loss, and no host sync inside the step on GPU. Nothing here is
a copy of the training loop: what is timed is the code that trains the study's models.
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np
import torch
from torch import nn

from benchmarks.workload import BenchModel, Shape
from study.core.errors import StudyError
from study.models import build_model, is_distilled
from study.train.augment import Augmentation, BatchAugment
from study.train.batches import DeviceSplit, channel_stats
from study.train.step import StepSpec, TrainStep


def study_model(spec: BenchModel, shape: Shape) -> nn.Module:
    """``spec``'s model as the study builds it; a distilled student returns both heads' logits when it has a
    teacher to learn from, as in the train stage."""
    model = build_model(spec.arch, shape.num_classes, shape.image_size, shape.in_chans, **spec.arch_args)
    if is_distilled(model):
        model.set_distilled_training(spec.teacher is not None)
    return model


def study_step(model: nn.Module, loss_fn: nn.Module, images: np.ndarray, labels: np.ndarray,
               augmentation: Augmentation, num_classes: int, spec: StepSpec) -> Callable[[], None]:
    """One call = one optimiser step of ``train_run`` (its :class:`TrainStep` under ``spec``, and its per-step
    check).

    ``model`` and ``loss_fn`` must already be on ``spec.device``.
    """
    device = spec.device
    on_gpu = device.type == "cuda"
    if spec.channels_last:  # as the train stage chooses (the registry's traits), on every device
        model.to(memory_format=torch.channels_last)
    mean, std = (torch.tensor(v, device=device) for v in channel_stats(images))
    augment = BatchAugment(augmentation, mean, std, num_classes, tuple(images.shape[1:3]))  # (H, W) of NHWC
    train_step = TrainStep(model, loss_fn, DeviceSplit(images, labels, device), augment, spec)
    loss_sum = torch.zeros((), device=device)
    counter = itertools.count()
    model.train()
    loss_fn.train()

    def step() -> None:
        s = next(counter)
        loss_sum.add_(train_step(s).float())
        if not on_gpu and not torch.isfinite(loss_sum):  # train_run's per-step check (free on CPU)
            raise StudyError(f"benchmark loss became NaN/inf at step {s}; lower the model's lr")

    return step
