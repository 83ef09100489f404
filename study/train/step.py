"""One optimiser step of the study: the optimiser, the precision, and :class:`TrainStep`, the hot path.

``train_run`` (:mod:`study.train.loop`) calls :class:`TrainStep` for every step of every run, and so do the
benchmarks, so they time exactly the step that trains the study's models. What a step needs beyond the model,
its loss and its data is one :class:`StepSpec`.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn as nn

from study.train.augment import BatchAugment
from study.train.batches import BatchOrder, DeviceSplit
from study.train.schedule import lr_at

if TYPE_CHECKING:
    from study.train.recipe import Recipe

# Parameters exempt from weight decay besides biases and norm weights (all 1-D): ViT's learned tokens
# and position embeddings (as in timm's `no_weight_decay`).
_NO_DECAY_NAMES = ("cls_token", "dist_token", "pos_embed")


@dataclass(frozen=True)
class StepSpec:
    """How every optimiser step of a run is taken: the recipe, the schedule's length and the batch, the seed that
    orders the batches, and where and in what precision the model runs."""

    recipe: Recipe
    total_steps: int  # the schedule's length: warmup and cosine decay span it
    batch_size: int
    seed: int  # orders the batches (BatchOrder) and seeds the augmentation's draws
    device: torch.device
    channels_last: bool  # inputs (and the model) in NHWC: a CNN's, per the registry's traits (study.archs)
    compile: bool  # torch.compile the forward pass
    precision: str  # train.precision: "auto", "bf16" or "fp32" (resolved_precision)


def make_optimizer(model: nn.Module, recipe: Recipe, fused: bool, lr: float | torch.Tensor | None = None,
                   capturable: bool = False) -> torch.optim.Optimizer:
    """The recipe's optimiser; ``lr`` (default: the recipe's) may be a one-element device tensor, which a
    captured step rewrites in place (study.train.graphed); ``capturable`` is AdamW's flag for graph capture."""
    lr = recipe.lr if lr is None else lr
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or name.split(".")[-1] in _NO_DECAY_NAMES else decay).append(p)
    groups = [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=recipe.momentum, nesterov=True, fused=fused or None)
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, recipe.beta2), fused=fused or None,
                             capturable=capturable)


def to_input(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    return x.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def resolved_precision(device: torch.device, precision: str) -> str:
    """``train.precision`` on ``device``: "bf16" or "fp32".

    ``auto`` autocasts on GPU only: CPU bf16 kernels are slower than float32 on most CPUs and would change
    the numbers of the reference float32 path; ``bf16`` forces autocast on CPU too (the CI test of the GPU path).
    """
    if precision not in ("auto", "bf16", "fp32"):
        raise ValueError(f"precision must be 'auto', 'bf16' or 'fp32', not {precision!r}")
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


def autocast_for(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """The context every forward pass runs in: bf16 autocast on ``device``'s type, or nothing (float32)."""
    if resolved_precision(device, precision) == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


class TrainStep:
    """One optimiser step of the study, as a function of the step number: the whole hot path.

    Batch ``step`` is gathered from the device-resident split, augmented and normalised there by
    ``augment`` (which also turns the labels into the loss's targets: soft ones under Mixup/CutMix), the lr
    set from the schedule, then forward (under :func:`autocast_for`), loss, backward, optional gradient
    clipping and the optimiser update. No host sync happens inside. ``train_run`` calls it, and so do the
    benchmarks, so they time exactly the step that trains the study's models.
    """

    def __init__(self, model: nn.Module, loss_fn: nn.Module, split: DeviceSplit, augment: BatchAugment,
                 spec: StepSpec) -> None:
        device, recipe = spec.device, spec.recipe
        on_gpu = device.type == "cuda"
        self.model, self.loss_fn, self.recipe, self.split = model, loss_fn, recipe, split
        self.augment, self.total_steps, self.seed = augment, spec.total_steps, spec.seed
        self.device, self.channels_last = device, spec.channels_last
        self.optimizer = make_optimizer(model, recipe, fused=on_gpu)
        self.forward = torch.compile(model) if spec.compile else model
        self.compiled = spec.compile
        self.precision = resolved_precision(device, spec.precision)  # "bf16" or "fp32", as recorded in metrics
        self.autocast = autocast_for(device, spec.precision)
        self.order = BatchOrder(len(split), spec.batch_size, spec.seed)
        # On a GPU the run's whole order lives on the device: copying each step's indices from pageable
        # host memory would synchronise the stream every step, and the host could never run ahead.
        self.order_table = self.order.table(spec.total_steps).to(device) if on_gpu else None  # (steps, B)
        self.warmup_steps = math.ceil(recipe.warmup * spec.total_steps)

    def indices(self, step: int) -> torch.Tensor:
        """The batch of step ``step``: indices (B,) into the split, on its device."""
        return self.order.indices(step) if self.order_table is None else self.order_table[step]

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Step ``step``'s model input ``(B, C, H, W)`` and loss targets, gathered and augmented on the device."""
        idx = self.indices(step)
        x, y = self.augment(self.split.images[idx], self.split.labels[idx], self.seed, step)
        return to_input(x, self.channels_last), y

    def __call__(self, step: int) -> torch.Tensor:
        """Take optimiser step ``step``; return its loss (a detached scalar on the device)."""
        x, y = self.batch(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(step, self.total_steps, self.recipe.lr, self.warmup_steps)
        with self.autocast:
            loss = self.loss_fn(x, self.forward(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.recipe.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.recipe.grad_clip)
        self.optimizer.step()
        return loss.detach()
