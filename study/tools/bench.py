"""``study bench``: the study's training step against the usual DataLoader recipe, for the models of ``--params``.

A tool, not a DVC stage: it prints the table (:func:`study.infra.bench.table.format_table`), writes it as CSV and
returns one line with each model's speed-up and MFU. Several ``--precision`` values (e.g. fp32 and bf16) are
measured one after the other, each against its own matmul peak, and shown side by side.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from study.core import runtime
from study.infra.bench.benchmark import run_benchmark
from study.infra.bench.from_params import bench_models, bench_shape
from study.infra.bench.table import STUDY, STUDY_AUGMENTED, format_table, write_csv
from study.core.entry import configured
from study.train.step import resolved_precision


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def main(args: argparse.Namespace) -> str:
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
