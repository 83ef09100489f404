"""The study's training step beside a plain one, eager, captured and compiled: where a step's time goes.

Per model, in one process on one batch size, each variant trains the same model from the same weights on
synthetic images already on the device:

* ``plain eager`` — the textbook step: a fixed normalised batch, forward, loss, backward, clipping, the same
  fused optimiser; no gather, no augmentation, no schedule. The floor the study's own step is held to.
* ``study eager, host indices`` — the study's step as it was before the run's order moved to the device: each
  step's indices made on the host and copied over, a copy from pageable memory that waits for the stream.
* ``study eager`` — :class:`study.train.step.TrainStep` with ``train.graph: off``: the batch gathered from the
  device-resident split, augmented, the lr set from the schedule.
* ``study graph`` — :class:`study.train.graphed.GraphedTrainStep`: the same step captured as one CUDA graph.
* ``study graph + compile`` — the same with ``torch.compile`` of the model inside the graph.

A variant that fails (a capture the device refuses, a compiler error) gives a row with its error instead of
stopping the others. On a CPU the graph variants run their body eagerly (no capture), so the table there only
shows that every variant runs.
"""

from __future__ import annotations

import itertools
import traceback
from typing import Callable

import numpy as np
import pandas as pd
import torch
from torch import nn

from benchmarks.measure import measure, train_flops_per_image
from benchmarks.study_path import study_model
from benchmarks.workload import CNN_RECIPE, VIT_RECIPE, BenchModel, Shape, bench_loss, synthetic_data
from study.archs import traits
from study.train.augment import BatchAugment
from study.train.batches import DeviceSplit, channel_stats, normalise
from study.train.graphed import GraphedTrainStep
from study.train.step import StepSpec, TrainStep, autocast_for, make_optimizer, to_input

PLAIN, HOST_ORDER, EAGER = "plain eager", "study eager, host indices", "study eager"
GRAPH, GRAPH_COMPILED = "study graph", "study graph + compile"
VARIANTS = (PLAIN, HOST_ORDER, EAGER, GRAPH, GRAPH_COMPILED)


def plain_step(model: nn.Module, loss_fn: nn.Module, recipe, x: torch.Tensor, y: torch.Tensor,
               device: torch.device, precision: str) -> Callable[[], None]:
    """One call = one textbook optimiser step on the fixed batch ``(x, y)``."""
    optimizer = make_optimizer(model, recipe, fused=device.type == "cuda")
    autocast = autocast_for(device, precision)

    def step() -> None:
        with autocast:
            loss = loss_fn(x, model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if recipe.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip, foreach=device.type == "cuda")
        optimizer.step()

    return step


def study_variant(model: nn.Module, loss_fn: nn.Module, recipe, spec: BenchModel, images: np.ndarray,
                  labels: np.ndarray, num_classes: int, batch_size: int, total_steps: int, device: torch.device,
                  precision: str, graphed: bool, compile_model: bool, host_order: bool = False) -> Callable[[], None]:
    """One call = one step of the study's :class:`TrainStep` or :class:`GraphedTrainStep`; ``host_order``: the
    eager step with each step's indices copied from the host."""
    channels_last = not traits(spec.arch, spec.arch_args).transformer
    mean, std = (torch.tensor(v, device=device) for v in channel_stats(images))
    augment = BatchAugment(spec.augmentation, mean, std, num_classes, tuple(images.shape[1:3]))  # (H, W) of NHWC
    cls = GraphedTrainStep if graphed else TrainStep
    train_step = cls(model, loss_fn, DeviceSplit(images, labels, device), augment,
                     StepSpec(recipe, total_steps, batch_size, 0, device, channels_last, compile_model, precision))
    if host_order:
        train_step.order_table = None  # TrainStep.indices then draws on the host; indexing copies them over
    counter = itertools.count()
    return lambda: train_step(next(counter))


def bench_variants(models: list[BenchModel], shape: Shape, *, batch_size: int, steps: int, warmup_steps: int,
                   repeats: int, images: int, device: torch.device, peak_flops: float, precision: str = "auto",
                   variants: tuple[str, ...] = VARIANTS, compiled_models: tuple[str, ...] | None = None) -> pd.DataFrame:
    """One row per (model, variant): img/s, ms/step, MFU against ``peak_flops``, or the variant's error.
    ``compiled_models`` limits the compiled variant to those model names (compilation takes most of a call)."""
    data, labels = synthetic_data(images, shape)
    total_steps = warmup_steps + steps * repeats
    rows = []
    for spec, variant in itertools.product(models, variants):
        if variant == GRAPH_COMPILED and compiled_models is not None and spec.name not in compiled_models:
            continue
        row = {"model": spec.name, "variant": variant, "batch_size": batch_size,
               "input": f"{shape.in_chans}x{shape.image_size}x{shape.image_size}",
               "augment": "none" if not spec.augmentation.active else _augment_label(spec)}
        try:
            torch.manual_seed(0)
            model = study_model(spec, shape).to(device)
            transformer = traits(spec.arch, spec.arch_args).transformer
            recipe = spec.recipe or (VIT_RECIPE if transformer else CNN_RECIPE)
            loss_fn = bench_loss(spec.teacher, recipe.label_smoothing, shape, device)
            flops = train_flops_per_image(model, getattr(loss_fn, "teacher", None), shape.image_size, shape.in_chans)
            if not transformer:
                model = model.to(memory_format=torch.channels_last)
            model.train()
            if variant == PLAIN:
                mean, std = (torch.tensor(v, device=device) for v in channel_stats(data))
                x = to_input(normalise(torch.from_numpy(data[:batch_size]).to(device), mean, std),
                             not transformer)  # (B, C, H, W)
                y = torch.from_numpy(labels[:batch_size]).to(device)
                factory = lambda: plain_step(model, loss_fn, recipe, x, y, device, precision)  # noqa: E731
            else:
                factory = lambda: study_variant(  # noqa: E731
                    model, loss_fn, recipe, spec, data, labels, shape.num_classes, batch_size, total_steps, device,
                    precision, graphed=variant in (GRAPH, GRAPH_COMPILED), compile_model=variant == GRAPH_COMPILED,
                    host_order=variant == HOST_ORDER)
            timing = measure(factory, warmup_steps, steps, repeats, device)
            seconds = float(np.median(timing.window_seconds)) / steps
            row.update(images_per_s=batch_size / seconds, ms_per_step=1000 * seconds,
                       mfu=flops * batch_size / seconds / peak_flops, peak_mem_mib=timing.peak_memory_bytes / 2**20,
                       spread_pct=100 * (max(timing.window_seconds) - min(timing.window_seconds))
                       / max(min(timing.window_seconds), 1e-12), error="")
        except Exception as error:  # noqa: BLE001 -- one variant's failure is a result, not the end of the call
            row.update(error=f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300])
            traceback.print_exc()
        finally:
            model = loss_fn = factory = None
            if variant == GRAPH_COMPILED:  # drop the compiled graphs before the next model
                torch.compiler.reset()
        rows.append(row)
    return pd.DataFrame(rows)


def _augment_label(spec: BenchModel) -> str:
    a = spec.augmentation
    parts = [f"crop {a.crop_padding}" if a.crop_padding else "", "flip" if a.hflip else "",
             a.auto_augment if a.auto_augment != "none" else "", "erasing" if a.erasing else "",
             "mix" if a.mixes else ""]
    return "+".join(p for p in parts if p)
