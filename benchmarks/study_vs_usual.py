"""How fast the study trains, measured: every model on the study's path beside the usual PyTorch recipe.

Per model, both paths run in the same process on the same synthetic data (:mod:`benchmarks.workload`): the
``study`` row (:mod:`benchmarks.study_path`), with ``augment_cost`` a ``study+augment`` row under
:func:`benchmarks.workload.heavy_augmentation`, and one ``usual`` row per DataLoader worker count
(:mod:`benchmarks.usual_path`). Augmentation is each model's own (``models.<name>.augment``, else
``train.augment``) on both paths.

What is timed: ``steps`` optimiser steps after ``warmup_steps`` untimed ones (compilation, allocator warm-up,
DataLoader start-up), ``repeats`` times (:mod:`benchmarks.measure`); the table (:mod:`benchmarks.table`)
shows the median window, the spread, MFU against a matmul peak measured before and after the models, and the
speed-up of the study's step over the usual one.

Run: ``python -m benchmarks.study_vs_usual [--params params.yaml] [--model vit] [--precision fp32 --precision bf16]
[--augment-cost] [--out reports/bench.csv]``, or the same options to ``study bench`` (:mod:`study.tools.bench`). It
prints the table (:func:`benchmarks.table.format_table`), writes it as CSV and ends with one line of each model's
speed-up and MFU. Several ``--precision`` values are measured one after the other, each against its own matmul peak,
and shown side by side.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from benchmarks.from_params import bench_models, bench_shape
from benchmarks.measure import measure, measure_peak_flops, train_flops_per_image
from benchmarks.study_path import study_model, study_step
from benchmarks.table import STUDY, STUDY_AUGMENTED, USUAL, format_table, result_row, with_speedups, write_csv
from benchmarks.usual_path import usual_dataset, usual_loader, usual_mix, usual_model, usual_step
from benchmarks.workload import (CNN_RECIPE, VIT_RECIPE, BenchModel, Shape, bench_loss, heavy_augmentation,
                                 synthetic_data)
from study.core import runtime
from study.core.entry import configured
from study.core.errors import StudyError
from study.archs import traits
from study.train.step import StepSpec, resolved_precision
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
        transformer = traits(spec.arch, spec.arch_args).transformer
        recipe = spec.recipe or (VIT_RECIPE if transformer else CNN_RECIPE)
        loss_fn = bench_loss(spec.teacher, recipe.label_smoothing, shape, device)
        flops = _train_flops(model, loss_fn, shape)
        step_spec = StepSpec(recipe, total_steps, batch_size, 0, device, channels_last=not transformer,
                             compile=compile_model, precision=precision)
        timing = measure(lambda: study_step(model, loss_fn, images, labels, augmentation, shape.num_classes,
                                            step_spec),
                         warmup_steps, steps, repeats, device)
        layout = ", channels_last" if not transformer else ""
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options, but ``--params`` (which ``study`` gives every command)."""
    p = parser
    p.add_argument("--model", action="append", help="a key of `models` in params (repeatable; default: the trained "
                   "models unless --arch is given)")
    p.add_argument("--arch", action="append", help="a model name with its default size, e.g. resnet18 or vit "
                   "(ViT-Tiny/4) (repeatable)")
    p.add_argument("--image-size", type=int, help="override the dataset's image size")
    p.add_argument("--in-chans", type=int, help="override the dataset's channels")
    p.add_argument("--num-classes", type=int, help="override the dataset's number of classes")
    p.add_argument("--batch-size", type=int, help="default: budget.batch_size")
    p.add_argument("--steps", type=int, default=20, help="timed steps per window (default 20)")
    p.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--repeats", type=int, default=3, help="timed windows; the median is reported (default 3)")
    p.add_argument("--workers", type=int, action="append", help="DataLoader workers of the usual path (repeatable; "
                   "default 2)")
    p.add_argument("--images", type=int, default=8192, help="synthetic training images (default 8192)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, help="torch.compile the study path "
                   "(default: train.compile)")
    p.add_argument("--precision", action="append", choices=("auto", "bf16", "fp32"), help="forward precision of "
                   "both paths (default: train.precision; auto = bf16 autocast on GPU, float32 on CPU); repeat it to "
                   "measure several side by side, e.g. --precision fp32 --precision bf16")
    p.add_argument("--augment-cost", action="store_true", help="also time each model's study step under heavy "
                   "augmentation (DeiT's: crop, flip, RandAugment, erasing, Mixup/CutMix), to show its cost")
    p.add_argument("--out", type=Path, default=Path("reports/bench.csv"), help="CSV of the results")


def run(args: argparse.Namespace) -> str:
    """The benchmark of ``args`` (those of :func:`add_arguments`, and ``--params``): the table printed, the CSV
    written; returns the one-line summary."""
    params = configured(args.params)
    shape = bench_shape(params, args.image_size, args.in_chans, args.num_classes)
    specs = bench_models(params, args.model, args.arch)
    device = runtime.pick_device(params.train.device)
    precisions = args.precision or [params.train.precision]
    table = pd.concat([run_benchmark(
        specs, shape, batch_size=args.batch_size or params.budget.batch_size, steps=args.steps,
        warmup_steps=args.warmup_steps, repeats=args.repeats, workers=args.workers or [2], device=device,
        images=args.images, compile_model=params.train.compile if args.compile is None else args.compile,
        precision=precision, augment_cost=args.augment_cost,
    ) for precision in precisions], ignore_index=True)
    print(format_table(table))
    write_csv(table, args.out)
    study = table[table["path"] == STUDY]
    shown = [resolved_precision(device, p) for p in precisions]
    short = {"float32": "fp32", "bfloat16": "bf16"}  # a row's precision, by the dtype of its peak matmul
    label = (lambda r: f"{r.model} {short[r.peak_dtype]}") if len(set(shown)) > 1 else (lambda r: r.model)
    parts = ", ".join(f"{label(r)} {r.speedup:.2f}x (MFU {100 * r.mfu:.1f}%)" for r in study.itertuples())
    augmented = table[table["path"] == STUDY_AUGMENTED]
    if len(augmented):
        parts += "; heavy augmentation costs " + ", ".join(
            f"{r.model} +{r.augment_cost_pct:.0f}%" for r in augmented.itertuples()) + " per step"
    return (f"bench: study vs fastest usual recipe on {shape.in_chans}x{shape.image_size}x{shape.image_size}, "
            f"{device.type}, {' and '.join(dict.fromkeys(shown))}: {parts} -> {args.out}")


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.study_vs_usual``: :func:`run` with ``--params`` and the benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"),
                        help="parameters file (default: params.yaml)")
    add_arguments(parser)
    try:
        print(run(parser.parse_args(argv)))
    except StudyError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
