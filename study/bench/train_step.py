"""How fast the study trains, measured: the study's training step beside the usual PyTorch recipe.

Why measure instead of quote: a step's speed depends on the machine, the model's shape and on where the
data comes from, so the only honest number is one taken on the machine at hand, with both recipes run in
the same process on the same synthetic data. Per model, two paths:

* ``study`` — :class:`study.train.loop.TrainStep`, the very step ``train_run`` takes: the split resident
  on the device as uint8, index batches augmented and normalised on the device, the study's optimiser
  (fused on GPU), the forward under ``train.precision`` (:func:`study.train.loop.autocast_for`: bf16
  autocast on GPU by default) and channels_last for CNNs, optional ``torch.compile``, the study's loss,
  and no host sync inside the step on GPU.
* ``usual`` — the same architecture built the common way (see :func:`usual_model`), fed by a
  ``DataLoader`` over PIL images with per-image torchvision transforms, ``non_blocking`` copies from pinned
  memory, the same precision as the study path, a plain
  ``torch.optim`` optimiser over ``model.parameters()`` and a ``loss.item()`` per step, as typical
  training scripts log.

Augmentation: each model's own (``models.<name>.augment``, else ``train.augment``) on both paths; the usual
path applies the same kinds per image with torchvision ``v2`` (and Mixup/CutMix on the batch). With
``augment_cost`` a third row per model, ``study+augment``, times the study step under
:func:`heavy_augmentation`, so the cost of heavy augmentation shows beside the plain step.

What is timed: ``steps`` optimiser steps after ``warmup_steps`` untimed ones (compilation, allocator
warm-up, DataLoader start-up), ``repeats`` times; the table shows the median window and the spread.
Model FLOPs utilisation (MFU) is achieved training FLOP/s over the device's peak, where training FLOPs
per image are ``3 × forward`` (backward ≈ 2 × forward; :func:`study.models.cost.forward_flops`) plus one
teacher forward for a distilled student, and the peak is MEASURED here with a large matmul in the training
precision (bf16 when autocasting, else float32): an achievable peak, not the datasheet's. Peak memory is
``torch.cuda.max_memory_allocated`` on GPU and the process's peak RSS on CPU (reset per path through
``/proc/self/clear_refs``; DataLoader worker processes are not included).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import math
import resource
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd
import timm.models.deit
import timm.models.vision_transformer
import torch
import torchvision
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

from study.errors import StudyError
from study.io import atomic_path
from study.models import VIT_DEFAULTS, build_model
from study.models.cost import forward_flops
from study.train.augment import Augmentation, BatchAugment
from study.train.batches import DeviceSplit, channel_stats
from study.train.loop import Recipe, TrainStep, autocast_for, resolved_precision
from study.train.losses import DistillationLoss, LabelLoss

STUDY, STUDY_AUGMENTED, USUAL = "study", "study+augment", "usual"
# Default recipes for a bare architecture (no params entry): He et al. (2016) SGD for CNNs, DeiT's AdamW
# with gradient clipping for transformers. Only the optimiser kind and clipping change the step's cost.
CNN_RECIPE = Recipe(optimizer="sgd", lr=0.1, weight_decay=5e-4, momentum=0.9, beta2=0.999, label_smoothing=0.1,
                    grad_clip=0.0, warmup=0.05)
VIT_RECIPE = Recipe(optimizer="adamw", lr=1e-3, weight_decay=0.05, momentum=0.9, beta2=0.999, label_smoothing=0.1,
                    grad_clip=1.0, warmup=0.05)
# Matmul side for the peak measurement: large enough to be compute-bound (an 8192² bf16 matmul is 1.1 TFLOP).
PEAK_SIZE = {"cuda": 8192, "cpu": 2048}
_MIB = 2**20


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


@dataclass(frozen=True)
class Timing:
    window_seconds: list[float]  # one entry per timed window of `steps` steps
    peak_memory_bytes: int


# --- device measurements ----------------------------------------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_peak_flops(device: torch.device, size: int | None = None, repeats: int = 5,
                       precision: str = "auto") -> tuple[float, str]:
    """Best FLOP/s of a ``size × size`` matmul on ``device`` and its dtype: bf16 where ``precision``
    autocasts there (by default on GPU), else float32."""
    dtype = torch.bfloat16 if resolved_precision(device, precision) == "bf16" else torch.float32
    size = size or PEAK_SIZE.get(device.type, PEAK_SIZE["cpu"])
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    out = torch.empty(size, size, device=device, dtype=dtype)
    # Enough matmuls per timed round that launch overhead and timer resolution do not matter (~25 ms on H100).
    per_round = 20 if device.type == "cuda" else 1
    torch.matmul(a, b, out=out)  # first call: library and kernel selection, not timed
    _sync(device)
    best = math.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        for _ in range(per_round):
            torch.matmul(a, b, out=out)
        _sync(device)
        best = min(best, time.perf_counter() - tic)
    return 2 * size**3 * per_round / best, str(dtype).removeprefix("torch.")


def _reset_peak_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        return
    # Writing "5" resets the process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0, proc(5)).
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _peak_memory(device: torch.device) -> int:
    """Bytes: CUDA's peak allocated tensor memory, or the process's peak RSS on CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # "VmHWM:  123456 kB"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB; never reset


def memory_kind(device: torch.device) -> str:
    return "cuda max allocated" if device.type == "cuda" else "process peak RSS"


def _time_steps(step: Callable[[], None], warmup_steps: int, steps: int, repeats: int,
                device: torch.device) -> list[float]:
    """Seconds of each of ``repeats`` windows of ``steps`` calls to ``step``, after ``warmup_steps`` calls."""
    for _ in range(warmup_steps):
        step()
    _sync(device)
    windows = []
    for _ in range(repeats):
        tic = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(device)
        windows.append(time.perf_counter() - tic)
    return windows


# --- the two paths ------------------------------------------------------------------------------------


def synthetic_data(count: int, shape: Shape, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random uint8 images (N, H, W, C) and int64 labels (N,): speed does not depend on the pixels."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(count, shape.image_size, shape.image_size, shape.in_chans), dtype=np.uint8)
    return images, rng.integers(0, shape.num_classes, size=count).astype(np.int64)


def _is_transformer(model: nn.Module) -> bool:
    return hasattr(model, "num_prefix_tokens")  # the study's and timm's ViTs; no CNN has it


def _loss(spec: BenchModel, model: nn.Module, recipe: Recipe, shape: Shape, device: torch.device) -> nn.Module:
    """The study's loss for ``spec``: labels only, or DeiT distillation from a (random) teacher."""
    base = LabelLoss(recipe.label_smoothing)
    if hasattr(model, "set_distilled_training"):
        model.set_distilled_training(spec.teacher is not None)
    if spec.teacher is None:
        return base.to(device)
    t = spec.teacher
    teacher = build_model(t.arch, shape.num_classes, shape.image_size, shape.in_chans, **t.arch_args).to(device)
    return DistillationLoss(base, teacher, t.kind, t.alpha, t.tau).to(device)


def _train_flops_per_image(model: nn.Module, loss_fn: nn.Module, shape: Shape) -> int:
    """3 × the model's forward FLOPs, plus one teacher forward when distilling."""
    flops = 3 * forward_flops(model, shape.image_size, shape.in_chans)
    if isinstance(loss_fn, DistillationLoss):
        flops += forward_flops(loss_fn.teacher, shape.image_size, shape.in_chans)
    return flops


def study_step(model: nn.Module, loss_fn: nn.Module, recipe: Recipe, images: np.ndarray, labels: np.ndarray,
               batch_size: int, total_steps: int, augmentation: Augmentation, num_classes: int,
               device: torch.device, compile_model: bool, seed: int = 0,
               precision: str = "auto") -> Callable[[], None]:
    """One call = one optimiser step of ``train_run`` (its :class:`TrainStep`, and its per-step check).

    ``model`` and ``loss_fn`` must already be on ``device``.
    """
    on_gpu = device.type == "cuda"
    channels_last = not _is_transformer(model)  # as the train stage chooses, on every device
    if channels_last:
        model.to(memory_format=torch.channels_last)
    mean, std = (torch.tensor(v, device=device) for v in channel_stats(images))
    augment = BatchAugment(augmentation, mean, std, num_classes, tuple(images.shape[1:3]))  # (H, W) of NHWC
    train_step = TrainStep(model, loss_fn, recipe, DeviceSplit(images, labels, device), augment, total_steps,
                           batch_size, seed, device, channels_last, compile_model, precision)
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


def usual_model(arch: str, shape: Shape, arch_args: dict[str, Any]) -> tuple[nn.Module, str]:
    """``arch`` built as a typical script would, and a description of what was built.

    ``vit``/``deit``: timm's ``VisionTransformer``/``VisionTransformerDistilled`` with the same keywords.
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
        return timm.models.deit.VisionTransformerDistilled(**kwargs), "timm VisionTransformerDistilled"
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


# --- one model, both paths ----------------------------------------------------------------------------


def _row(spec: BenchModel, path: str, workers: int | None, implementation: str, data: str, precision: str,
         augmentation: Augmentation, timing: Timing, batch_size: int, steps: int, train_flops: int,
         peak_flops: float, peak_dtype: str, device: torch.device) -> dict[str, Any]:
    rates = [batch_size * steps / seconds for seconds in timing.window_seconds]
    images_per_s = statistics.median(rates)
    return {
        "model": spec.name, "arch": spec.arch, "arch_args": json.dumps(spec.arch_args, sort_keys=True),
        "path": path, "workers": workers, "implementation": implementation,
        "data": data, "precision": precision, "augment": json.dumps(augmentation.as_dict()), "batch_size": batch_size,
        "images_per_s": images_per_s, "ms_per_step": 1000 * batch_size / images_per_s,
        "spread_pct": 100 * (max(rates) - min(rates)) / images_per_s,
        "peak_mem_mib": timing.peak_memory_bytes / _MIB, "memory": memory_kind(device),
        "train_gflop_per_image": train_flops / 1e9, "achieved_gflop_s": train_flops * images_per_s / 1e9,
        "peak_gflop_s": peak_flops / 1e9, "peak_dtype": peak_dtype,
        "mfu": train_flops * images_per_s / peak_flops,
    }


def _measure(step_factory: Callable[[], Callable[[], None]], warmup_steps: int, steps: int, repeats: int,
             device: torch.device) -> Timing:
    _reset_peak_memory(device)
    windows = _time_steps(step_factory(), warmup_steps, steps, repeats, device)
    return Timing(windows, _peak_memory(device))


def heavy_augmentation(image_size: int) -> Augmentation:
    """DeiT's training augmentation (Touvron et al. 2021: RandAugment n 2 m 9, random erasing 0.25, Mixup 0.8,
    CutMix 1.0) plus the CIFAR crop and flip (4 px of padding on 32 px images, scaled to the image size)."""
    return Augmentation(crop_padding=max(1, image_size // 8), hflip=True, auto_augment="rand", rand_n=2, rand_m=9,
                        erasing=0.25, mixup_alpha=0.8, cutmix_alpha=1.0, mix_prob=1.0)


def bench_model(spec: BenchModel, shape: Shape, images: np.ndarray, labels: np.ndarray, *, batch_size: int,
                steps: int, warmup_steps: int, repeats: int, workers: list[int], device: torch.device,
                compile_model: bool, peak_flops: float, peak_dtype: str, precision: str = "auto",
                augment_cost: bool = False) -> list[dict[str, Any]]:
    """The study row, with ``augment_cost`` a study row under :func:`heavy_augmentation`, and one usual row
    per DataLoader worker count, for one model."""
    on_gpu = device.type == "cuda"
    shown_precision = "bf16 autocast" if resolved_precision(device, precision) == "bf16" else "float32"
    total_steps = warmup_steps + steps * repeats
    timed = dict(batch_size=batch_size, steps=steps, peak_flops=peak_flops, peak_dtype=peak_dtype, device=device)
    rows = []

    study_paths = [(STUDY, spec.augmentation)]
    if augment_cost:
        study_paths.append((STUDY_AUGMENTED, heavy_augmentation(shape.image_size)))
    for path, augmentation in study_paths:
        torch.manual_seed(0)
        model = build_model(spec.arch, shape.num_classes, shape.image_size, shape.in_chans, **spec.arch_args)
        model = model.to(device)
        recipe = spec.recipe or (VIT_RECIPE if _is_transformer(model) else CNN_RECIPE)
        loss_fn = _loss(spec, model, recipe, shape, device)
        flops = _train_flops_per_image(model, loss_fn, shape)
        timing = _measure(lambda: study_step(model, loss_fn, recipe, images, labels, batch_size, total_steps,
                                             augmentation, shape.num_classes, device, compile_model,
                                             precision=precision),
                          warmup_steps, steps, repeats, device)
        layout = ", channels_last" if not _is_transformer(model) else ""
        rows.append(_row(spec, path, None, f"study {type(model).__name__}" + (", compiled" if compile_model else ""),
                         "device-resident uint8, batched augment", shown_precision + layout, augmentation, timing,
                         train_flops=flops, **timed))
        del model, loss_fn

    mean, std = channel_stats(images)
    dataset = UInt8Images(images, labels, usual_transform(shape.image_size, mean, std, spec.augmentation))
    mix = usual_mix(spec.augmentation, shape.num_classes)
    for count in workers:
        torch.manual_seed(0)
        model, implementation = usual_model(spec.arch, shape, spec.arch_args)
        model = model.to(device)
        loss_fn = _loss(spec, model, recipe, shape, device)
        flops = _train_flops_per_image(model, loss_fn, shape)
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=count, pin_memory=on_gpu,
                            drop_last=True, persistent_workers=count > 0)
        timing = _measure(lambda: usual_step(model, loss_fn, recipe, loader, device, precision, mix), warmup_steps,
                          steps, repeats, device)
        rows.append(_row(spec, USUAL, count, implementation, f"DataLoader, {count} workers, per-image transforms",
                         shown_precision, spec.augmentation, timing, train_flops=flops, **timed))
        del model, loss_fn, loader  # shuts persistent workers down before the next measurement
    return rows


def with_speedups(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a table with ``speedup``: study img/s over this usual row's; on a study row (plain or
    augmented), its img/s over the fastest usual row of the same model (the conservative ratio). The
    ``study+augment`` row also gets ``augment_cost_pct``, the extra time per step that heavy augmentation
    takes, as a share of the plain study step's."""
    table = pd.DataFrame(rows)
    speedup, cost = [], []
    for _, row in table.iterrows():
        same = table[table["model"] == row["model"]]
        study_rate = same.loc[same["path"] == STUDY, "images_per_s"].iloc[0]
        usual_rates = same.loc[same["path"] == USUAL, "images_per_s"]
        if row["path"] == USUAL:
            speedup.append(study_rate / row["images_per_s"])
        else:
            speedup.append(row["images_per_s"] / usual_rates.max() if len(usual_rates) else math.nan)
        cost.append(100 * (study_rate / row["images_per_s"] - 1) if row["path"] == STUDY_AUGMENTED else math.nan)
    return table.assign(speedup=speedup, augment_cost_pct=cost)


def run_benchmark(models: list[BenchModel], shape: Shape, *, batch_size: int, steps: int, warmup_steps: int,
                  repeats: int, workers: list[int], device: torch.device, images: int, compile_model: bool,
                  peak_size: int | None = None, precision: str = "auto", augment_cost: bool = False) -> pd.DataFrame:
    """Benchmark every model on both paths; one row per (model, path, workers), with MFU and speed-up."""
    if steps < 1 or repeats < 1 or warmup_steps < 0 or batch_size < 1 or images < batch_size:
        raise StudyError(f"benchmark needs steps >= 1, repeats >= 1, warmup >= 0 and images >= batch size; got "
                         f"steps {steps}, repeats {repeats}, warmup {warmup_steps}, images {images}, "
                         f"batch {batch_size}")
    if any(count < 0 for count in workers):
        raise StudyError(f"--workers must be >= 0, got {workers}")
    data, labels = synthetic_data(images, shape)
    peak_flops, peak_dtype = measure_peak_flops(device, peak_size, precision=precision)
    rows = []
    for spec in models:
        rows += bench_model(spec, shape, data, labels, batch_size=batch_size, steps=steps,
                            warmup_steps=warmup_steps, repeats=repeats, workers=workers, device=device,
                            compile_model=compile_model, peak_flops=peak_flops, peak_dtype=peak_dtype,
                            precision=precision, augment_cost=augment_cost)
    # The peak again at the end; the better of the two, so that a busy moment lowers neither MFU's denominator.
    late_peak, _ = measure_peak_flops(device, peak_size, precision=precision)
    table = with_speedups(rows)
    if late_peak > peak_flops:
        table["mfu"] *= peak_flops / late_peak
        table["peak_gflop_s"] = late_peak / 1e9
    return table


def format_table(table: pd.DataFrame) -> str:
    """The columns a reader compares, rounded for the terminal."""
    several = table["peak_dtype"].nunique() > 1  # precisions side by side: name each row's
    shown = pd.DataFrame({
        "model": table["model"],
        "path": [(p if pd.isna(w) else f"{p} (w={int(w)})") + (f", {d}" if several else "")
                 for p, w, d in zip(table["path"], table["workers"], table["peak_dtype"])],
        "img/s": table["images_per_s"].round(0).astype(int),
        "ms/step": table["ms_per_step"].round(1),
        "spread %": table["spread_pct"].round(1),
        "peak MiB": table["peak_mem_mib"].round(0).astype(int),
        "GFLOP/img": table["train_gflop_per_image"].round(4),
        "MFU %": (100 * table["mfu"]).round(2),
        "speed-up": table["speedup"].round(2),
        "implementation": table["implementation"],
    })
    if (table["path"] == STUDY_AUGMENTED).any():
        shown.insert(len(shown.columns) - 1, "aug cost %", table["augment_cost_pct"].round(1))
    peaks = table.groupby("peak_dtype", sort=False)["peak_gflop_s"].first()
    footer = ("peak: " + ", ".join(f"{gflops:.0f} GFLOP/s ({dtype} matmul)" for dtype, gflops in peaks.items())
              + f" measured; memory: {table['memory'].iloc[0]}; precision: {', '.join(sorted(set(table['precision'])))}")
    return shown.to_string(index=False) + "\n" + footer


def write_csv(table: pd.DataFrame, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        table.to_csv(tmp, index=False)
