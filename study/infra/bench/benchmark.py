"""How fast the study trains, measured: every model on the study's path beside the usual PyTorch recipe.

Per model, both paths run in the same process on the same synthetic data (:mod:`study.infra.bench.workload`): the
``study`` row (:mod:`study.infra.bench.study_path`), with ``augment_cost`` a ``study+augment`` row under
:func:`study.infra.bench.workload.heavy_augmentation`, and one ``usual`` row per DataLoader worker count
(:mod:`study.infra.bench.usual_path`). Augmentation is each model's own (``models.<name>.augment``, else
``train.augment``) on both paths.

What is timed: ``steps`` optimiser steps after ``warmup_steps`` untimed ones (compilation, allocator warm-up,
DataLoader start-up), ``repeats`` times (:mod:`study.infra.bench.measure`); the table (:mod:`study.infra.bench.table`)
shows the median window, the spread, MFU against a matmul peak measured before and after the models, and the
speed-up of the study's step over the usual one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from study.infra.bench.measure import measure, measure_peak_flops, train_flops_per_image
from study.infra.bench.study_path import study_model, study_step
from study.infra.bench.table import STUDY, STUDY_AUGMENTED, USUAL, result_row, with_speedups
from study.infra.bench.usual_path import usual_dataset, usual_loader, usual_mix, usual_model, usual_step
from study.infra.bench.workload import (CNN_RECIPE, VIT_RECIPE, BenchModel, Shape, bench_loss, heavy_augmentation,
                                  synthetic_data)
from study.core.errors import StudyError
from study.models import is_transformer
from study.train.step import resolved_precision
from study.train.losses import DistillationLoss


def _train_flops(model: nn.Module, loss_fn: nn.Module, shape: Shape) -> int:
    teacher = loss_fn.teacher if isinstance(loss_fn, DistillationLoss) else None
    return train_flops_per_image(model, teacher, shape.image_size, shape.in_chans)


def bench_model(spec: BenchModel, shape: Shape, images: np.ndarray, labels: np.ndarray, *, batch_size: int,
                steps: int, warmup_steps: int, repeats: int, workers: list[int], device: torch.device,
                compile_model: bool, peak_flops: float, peak_dtype: str, precision: str = "auto",
                augment_cost: bool = False) -> list[dict[str, Any]]:
    """The study row, with ``augment_cost`` a study row under heavy augmentation, and one usual row per
    DataLoader worker count, for one model."""
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
        model = study_model(spec, shape).to(device)
        recipe = spec.recipe or (VIT_RECIPE if is_transformer(model) else CNN_RECIPE)
        loss_fn = bench_loss(spec.teacher, recipe.label_smoothing, shape, device)
        flops = _train_flops(model, loss_fn, shape)
        timing = measure(lambda: study_step(model, loss_fn, recipe, images, labels, batch_size, total_steps,
                                            augmentation, shape.num_classes, device, compile_model,
                                            precision=precision),
                         warmup_steps, steps, repeats, device)
        layout = ", channels_last" if not is_transformer(model) else ""
        rows.append(result_row(spec, path, None,
                               f"study {type(model).__name__}" + (", compiled" if compile_model else ""),
                               "device-resident uint8, batched augment", shown_precision + layout, augmentation,
                               timing, train_flops=flops, **timed))
        del model, loss_fn

    dataset = usual_dataset(images, labels, shape.image_size, spec.augmentation)
    mix = usual_mix(spec.augmentation, shape.num_classes)
    for count in workers:
        torch.manual_seed(0)
        model, implementation = usual_model(spec.arch, shape, spec.arch_args,
                                            distilled_training=spec.teacher is not None)
        model = model.to(device)
        loss_fn = bench_loss(spec.teacher, recipe.label_smoothing, shape, device)
        flops = _train_flops(model, loss_fn, shape)
        loader = usual_loader(dataset, batch_size, count, pin_memory=on_gpu)
        timing = measure(lambda: usual_step(model, loss_fn, recipe, loader, device, precision, mix), warmup_steps,
                         steps, repeats, device)
        rows.append(result_row(spec, USUAL, count, implementation, f"DataLoader, {count} workers, per-image "
                               "transforms", shown_precision, spec.augmentation, timing, train_flops=flops, **timed))
        del model, loss_fn, loader  # shuts persistent workers down before the next measurement
    return rows


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
