"""Where a training step's time goes: the study's step under ``torch.profiler``, summarised per kernel kind.

Why: the GPU acceptance compares MFU with a target, and a miss needs a reason. Two reasons look alike from the
wall clock and call for different fixes: a step whose GPU idles between kernels (the host cannot launch them fast
enough; fewer launches or CUDA graphs help) and a step whose GPU is busy but runs kernels too small for its matrix
units (a larger batch or wider layers help). The profile tells them apart: the GPU's busy time per step (the sum of
its kernels' durations) against the step's wall time, and which kinds of kernel take that busy time.

The step is :func:`benchmarks.study_path.study_step`, the code that trains the study's models, timed after its
warm-up (compilation included) as in the benchmark.
"""

from __future__ import annotations

import time

import pandas as pd
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from benchmarks.measure import sync
from benchmarks.study_path import study_model, study_step
from benchmarks.workload import CNN_RECIPE, VIT_RECIPE, BenchModel, Shape, bench_loss, synthetic_data
from study.archs import traits
from study.train.step import StepSpec

# Kernel kinds, by the first kind whose patterns a kernel's (lower-cased) name contains. Order matters: cuDNN's
# fused attention and convolutions run as implicit GEMMs on the matrix units, so their names also hold "wgmma" or
# "gemm" and are matched before plain matrix products.
KINDS = (("attention", ("flash", "fmha", "sdpa", "attention")),
         ("convolution", ("implicit_gemm", "fprop", "dgrad", "wgrad", "conv", "winograd")),
         ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "wgmma")),
         ("optimizer", ("multi_tensor", "adam", "sgd", "foreach")),
         ("normalisation", ("norm", "batch_norm", "bn_")),
         ("fused elementwise (compiled)", ("triton",)),
         ("memory copy / set", ("memcpy", "memset", "copy")))
OTHER = "other"


def kernel_kind(name: str) -> str:
    """The kind of the kernel called ``name``, :data:`KINDS`' first match, else :data:`OTHER`."""
    lowered = name.lower()
    for kind, patterns in KINDS:
        if any(p in lowered for p in patterns):
            return kind
    return OTHER


def _device_events(prof: profile) -> pd.DataFrame:
    """One row per distinct kernel (or device copy): name, calls and device time in µs; empty on CPU.

    Only the device's own events count: the operators that launch kernels, and user annotations drawn on the
    device's timeline (``Optimizer.step#AdamW.step`` spans the optimiser's kernels), would count their time again.
    torch's own table totals device time the same way (``torch.autograd.profiler_util``)."""
    rows = [{"kernel": e.key, "calls": e.count, "us": e.self_device_time_total}
            for e in prof.key_averages()
            if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)
            and e.self_device_time_total > 0]
    return pd.DataFrame(rows, columns=["kernel", "calls", "us"])


def profile_model(spec: BenchModel, shape: Shape, *, batch_size: int, steps: int, warmup_steps: int,
                  images: int, device: torch.device, compile_model: bool,
                  precision: str = "auto") -> tuple[dict, pd.DataFrame]:
    """Profile ``steps`` study steps of ``spec`` after ``warmup_steps``; a summary row and the kernels' table
    (ms per step, share of the busy time, kind)."""
    data, labels = synthetic_data(images, shape)
    torch.manual_seed(0)
    model = study_model(spec, shape).to(device)
    transformer = traits(spec.arch, spec.arch_args).transformer
    recipe = spec.recipe or (VIT_RECIPE if transformer else CNN_RECIPE)
    loss_fn = bench_loss(spec.teacher, recipe.label_smoothing, shape, device)
    step = study_step(model, loss_fn, data, labels, spec.augmentation, shape.num_classes,
                      StepSpec(recipe, warmup_steps + steps, batch_size, 0, device, channels_last=not transformer,
                               compile=compile_model, precision=precision))
    for _ in range(warmup_steps):
        step()
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        tic = time.perf_counter()
        for _ in range(steps):
            step()
        sync(device)
        wall_ms = (time.perf_counter() - tic) * 1e3 / steps
    kernels = _device_events(prof)
    # Kernels of concurrent streams would overlap and count twice; the study's step runs on the default stream.
    busy_ms = kernels["us"].sum() / 1e3 / steps
    table = kernels.assign(model=spec.name, kind=kernels["kernel"].map(kernel_kind),
                           calls_per_step=kernels["calls"] / steps, ms_per_step=kernels["us"] / 1e3 / steps,
                           pct_of_busy=100 * kernels["us"] / max(kernels["us"].sum(), 1e-9))
    table = table.sort_values("ms_per_step", ascending=False)[
        ["model", "kind", "kernel", "calls_per_step", "ms_per_step", "pct_of_busy"]]
    summary = {"model": spec.name, "batch_size": batch_size, "steps": steps,
               "wall_ms_per_step": wall_ms,
               "gpu_busy_ms_per_step": busy_ms if device.type == "cuda" else float("nan"),
               "gpu_busy_pct": 100 * busy_ms / wall_ms if device.type == "cuda" else float("nan"),
               "kernels_per_step": kernels["calls"].sum() / steps}
    for kind in [k for k, _ in KINDS] + [OTHER]:
        summary[f"ms {kind}"] = table.loc[table["kind"] == kind, "ms_per_step"].sum()
    del model, loss_fn, step
    return summary, table


def profile_models(models: list[BenchModel], shape: Shape, **sizes) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`profile_model` for each model: the summaries, and each model's ten costliest kernels."""
    summaries, tops = [], []
    for spec in models:
        summary, table = profile_model(spec, shape, **sizes)
        summaries.append(summary)
        tops.append(table.head(10))
    return pd.DataFrame(summaries), pd.concat(tops, ignore_index=True)
