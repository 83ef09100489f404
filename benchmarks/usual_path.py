"""The benchmark's ``usual`` path: the same workload trained the way a typical PyTorch script does.

Why a second training stack: a speed-up needs a baseline, and the honest one is the recipe most readers run,
measured in the same process on the same data. So: the same architecture built from the libraries people use
(:func:`usual_model`), fed by a ``DataLoader`` over PIL images with per-image torchvision ``v2`` transforms of
the same kinds as the study's augmentation (Mixup/CutMix on the loaded batch), ``non_blocking`` copies from
pinned memory, the same precision as the study path, a plain ``torch.optim`` optimiser over
``model.parameters()`` and a ``loss.item()`` per step, as typical training scripts log. Only the recipe differs
from the study path; the loss is the study's own.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import timm.models.deit
import timm.models.vision_transformer
import torch
import torchvision
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

from benchmarks.workload import Shape
from study.models import VIT_DEFAULTS, build_model
from study.train.augment import Augmentation
from study.train.batches import channel_stats
from study.train.recipe import Recipe
from study.train.step import autocast_for


def usual_model(arch: str, shape: Shape, arch_args: dict[str, Any],
                distilled_training: bool = False) -> tuple[nn.Module, str]:
    """``arch`` built as a typical script would, and a description of what was built.

    ``vit``/``deit``: timm's ``VisionTransformer``/``VisionTransformerDistilled`` with the same keywords (with
    ``distilled_training``, the latter returns both heads' logits in training, for the distillation loss).
    ``resnet18``: torchvision's ``resnet18`` with its stem swapped for a 3×3 stride-1 conv and no max-pool,
    the usual CIFAR adaptation. ``resnet8``/``resnet20`` (He et al.'s CIFAR nets, option-A shortcuts) exist
    in neither library, so the study's own module is used. ``timm:<name>``: ``timm.create_model`` as ours.
    """
    # Built first in every case: it refuses impossible arguments with the study's one-line errors.
    study_model = build_model(arch, shape.num_classes, shape.image_size, shape.in_chans, **arch_args)
    if arch in ("vit", "deit"):
        kwargs = {**VIT_DEFAULTS, **arch_args, "img_size": shape.image_size, "in_chans": shape.in_chans,
                  "num_classes": shape.num_classes}
        if arch == "vit":
            return timm.models.vision_transformer.VisionTransformer(**kwargs), "timm VisionTransformer"
        model = timm.models.deit.VisionTransformerDistilled(**kwargs)
        model.set_distilled_training(distilled_training)
        return model, "timm VisionTransformerDistilled"
    if arch == "resnet18":
        model = torchvision.models.resnet18(num_classes=shape.num_classes, **arch_args)
        model.conv1 = nn.Conv2d(shape.in_chans, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
        return model, "torchvision resnet18, 3x3 stem"
    if arch.startswith("timm:"):
        return study_model, f"timm {arch.removeprefix('timm:')} (same as study)"
    return study_model, f"study {type(study_model).__name__} (no torchvision/timm equivalent)"


class UInt8Images(Dataset):
    """uint8 images (N, H, W, C) served one PIL image at a time, as torchvision's dataset classes do."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform: Callable[[Image.Image], torch.Tensor]):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.images[index]  # (H, W, C)
        pil = Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image)  # grey images are (H, W)
        return self.transform(pil), int(self.labels[index])


def usual_transform(image_size: int, mean: list[float], std: list[float], augmentation: Augmentation) -> v2.Compose:
    """The per-image torchvision pipeline of a typical CIFAR script, with the same kinds of augmentation as the
    study's (torchvision's TrivialAugmentWide and RandAugment stand for Kornia's; magnitude on the same 0-30 scale)."""
    a = augmentation
    steps: list[nn.Module] = []
    if a.crop_padding:
        steps.append(v2.RandomCrop(image_size, padding=a.crop_padding))
    if a.hflip:
        steps.append(v2.RandomHorizontalFlip())
    if a.auto_augment == "trivial":
        steps.append(v2.TrivialAugmentWide())
    elif a.auto_augment == "rand":
        steps.append(v2.RandAugment(num_ops=a.rand_n, magnitude=a.rand_m, num_magnitude_bins=31))
    steps += [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]
    if a.erasing:
        steps.append(v2.RandomErasing(p=a.erasing, value=0))
    return v2.Compose(steps)


def usual_dataset(images: np.ndarray, labels: np.ndarray, image_size: int, augmentation: Augmentation) -> UInt8Images:
    """The images as a map-style dataset, normalised by their own channel statistics as the study's are."""
    mean, std = channel_stats(images)
    return UInt8Images(images, labels, usual_transform(image_size, mean, std, augmentation))


def usual_loader(dataset: Dataset, batch_size: int, workers: int, pin_memory: bool) -> DataLoader:
    """A shuffling ``DataLoader`` with ``workers`` processes kept alive between epochs, full batches only."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, pin_memory=pin_memory,
                      drop_last=True, persistent_workers=workers > 0)


def usual_mix(augmentation: Augmentation, num_classes: int) -> Callable | None:
    """Mixup/CutMix on a loaded batch ``(x, labels)``, as torchvision's reference scripts do; None when off."""
    a = augmentation
    mixers = [v2.MixUp(alpha=a.mixup_alpha, num_classes=num_classes)] if a.mixup_alpha > 0 else []
    mixers += [v2.CutMix(alpha=a.cutmix_alpha, num_classes=num_classes)] if a.cutmix_alpha > 0 else []
    return v2.RandomApply([v2.RandomChoice(mixers)], p=a.mix_prob) if mixers else None


def _forever(loader: DataLoader) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    while True:
        yield from loader


def usual_optimizer(model: nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    """``torch.optim`` with its default (foreach) implementation over all parameters, decay on all."""
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=recipe.lr, momentum=recipe.momentum, nesterov=True,
                               weight_decay=recipe.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, recipe.beta2),
                             weight_decay=recipe.weight_decay)


def usual_step(model: nn.Module, loss_fn: nn.Module, recipe: Recipe, loader: DataLoader,
               device: torch.device, precision: str = "auto", mix: Callable | None = None) -> Callable[[], None]:
    """One call = one step of a typical script: next batch, copy, forward, backward, step, ``loss.item()``."""
    optimizer = usual_optimizer(model, recipe)
    autocast = autocast_for(device, precision)  # the study path's precision: only the recipe differs
    batches = _forever(loader)
    running = [0.0]
    model.train()
    loss_fn.train()

    def step() -> None:
        x, y = next(batches)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        if mix is not None:
            x, y = mix(x, y)  # soft labels (B, classes) when the batch is mixed
        optimizer.zero_grad()
        with autocast:
            loss = loss_fn(x, model(x), y)
        loss.backward()
        if recipe.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
        running[0] += loss.item()  # the per-step logging of typical scripts: a host sync on GPU

    return step
