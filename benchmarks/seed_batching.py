"""Seeds trained together: K copies of one model as one vmapped step, against one model per step.

A study cell is one model at one fraction over several seeds; its runs have the same shapes and the same
recipe and differ only in their weights and batches. On a GPU a small model does not fill the device, so the
seeds of a cell could train as one program: the K models' parameters stacked along a new first dimension
(``torch.func.stack_module_state``), the forward ``vmap``-ed over it, each seed with its own batch, and one
optimiser over the stacked tensors. AdamW and SGD act element by element, so one optimiser over the stack is K
optimisers; clipping is per seed (each seed's gradient norm over its own slice). The loss summed over seeds
gives each seed the gradient of its own loss.

The stack, its optimiser and the per-seed clipping are the trainer's (:mod:`study.cell.step`, where each seed
also has its own subset, batch order, augmentation and schedule). This module measures what they buy, for the
choice between capturing one model's step once per shape and vmapping the seeds of a cell (docs/performance.md):
images per second over all K seeds, eager and as one CUDA graph, for K = 1 (the same code path with one seed: the
baseline) and larger K, on a fixed batch per seed, without augmentation or schedule.
"""

from __future__ import annotations

import argparse
import itertools
import traceback
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchmarks.measure import measure
from benchmarks.study_path import study_model
from benchmarks.workload import CNN_RECIPE, VIT_RECIPE, BenchModel, Shape, bench_loss
from study.archs import traits
from study.cell.step import StackedModels, clip_per_seed, stacked_optimizer
from study.train.recipe import Recipe
from study.train.step import autocast_for


def stacked_step(stack: StackedModels, loss_fn: nn.Module, recipe: Recipe, x: torch.Tensor, y: torch.Tensor,
                 device: torch.device, precision: str) -> Callable[[], None]:
    """One call = one optimiser step of every seed on its own fixed batch; ``x`` (K, B, C, H, W), ``y`` (K, B)."""
    on_gpu = device.type == "cuda"
    optimizer = stacked_optimizer(stack, recipe, fused=on_gpu, capturable=on_gpu)
    autocast = autocast_for(device, precision)
    params = list(stack.params.values())

    def step() -> None:
        # vmap has no batching rule for the fused attention kernels (flash, memory-efficient) on CUDA: the
        # math kernel, which is matrix products, is batched over the seeds.
        with autocast, sdpa_kernel([SDPBackend.MATH]):
            logits = stack.forward(x)  # (K, B, classes)
            # The mean over each seed's batch, summed over seeds: seed k's gradient is that of its own loss.
            loss = sum(loss_fn(x[k], logits[k], y[k]) for k in range(stack.seeds))
        optimizer.zero_grad(set_to_none=not on_gpu)  # captured: gradients stay in the graph's memory
        loss.backward()
        if recipe.grad_clip > 0:
            clip_per_seed([p.grad for p in params], recipe.grad_clip)
        optimizer.step()

    return step


def captured(step: Callable[[], None], device: torch.device, warmup_steps: int = 3) -> Callable[[], None]:
    """``step`` as one CUDA graph (PyTorch's whole-network capture: eager steps on a side stream first, to
    create the optimiser's state and settle autotuning); on a CPU, ``step`` itself."""
    if device.type != "cuda":
        return step
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup_steps):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def seed_batches(seeds: int, batch_size: int, shape: Shape, device: torch.device,
                 channels_last: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed random batch per seed: images (K, B, C, H, W), normalised-like, and labels (K, B)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(seeds, batch_size, shape.in_chans, shape.image_size, shape.image_size, generator=g)
    y = torch.randint(0, shape.num_classes, (seeds, batch_size), generator=g)
    x = x.to(device)
    if channels_last:  # per seed (B, C, H, W) in channels-last order, as the study's CNN step feeds it
        x = x.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)
    return x, y.to(device)


def bench_seed_batching(models: list[BenchModel], shape: Shape, *, seeds: tuple[int, ...], batch_size: int,
                        steps: int, warmup_steps: int, repeats: int, device: torch.device,
                        precision: str = "auto") -> pd.DataFrame:
    """One row per (model, K seeds, eager or graph): images per second over all seeds, ms per step, or the
    error of a variant that failed (a failure is a result, not the end of the call)."""
    rows = []
    graphs = (False, True) if device.type == "cuda" else (False,)
    for spec, k, graph in itertools.product(models, seeds, graphs):
        row = {"model": spec.name, "seeds": k, "graph": graph, "precision": precision, "batch_size": batch_size,
               "input": f"{shape.in_chans}x{shape.image_size}x{shape.image_size}"}
        stack = None
        try:
            torch.manual_seed(0)
            replicas = [study_model(spec, shape).to(device).train() for _ in range(k)]
            transformer = traits(spec.arch, spec.arch_args).transformer
            recipe = spec.recipe or (VIT_RECIPE if transformer else CNN_RECIPE)
            loss_fn = bench_loss(None, recipe.label_smoothing, shape, device)
            stack = StackedModels(replicas)
            x, y = seed_batches(k, batch_size, shape, device, channels_last=not transformer)
            factory = lambda: captured(stacked_step(stack, loss_fn, recipe, x, y, device, precision),  # noqa: E731
                                       device) if graph else stacked_step(stack, loss_fn, recipe, x, y, device,
                                                                          precision)
            timing = measure(factory, warmup_steps, steps, repeats, device)
            seconds = float(np.median(timing.window_seconds)) / steps
            row.update(images_per_s=k * batch_size / seconds, ms_per_step=1000 * seconds,
                       peak_mem_mib=timing.peak_memory_bytes / 2**20, error="")
        except Exception as error:  # noqa: BLE001
            row.update(error=f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300])
            traceback.print_exc()
        finally:
            stack = None
        rows.append(row)
    table = pd.DataFrame(rows)
    if "images_per_s" in table:  # the gain over one seed per step, same model and mode
        one = table[table["seeds"] == 1].set_index(["model", "graph"])["images_per_s"]
        table["vs_one_seed"] = [r.images_per_s / one.get((r.model, r.graph), np.nan) for r in table.itertuples()]
    return table


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.seed_batching --out DIR``: the table for the models of ``--params``."""
    from study.core.config import load_params
    from benchmarks.from_params import bench_models, bench_shape

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--model", action="append", default=None, help="a key of models (repeatable)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--batch-size", type=int, default=None, help="default: budget.batch_size")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup-steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--precision", action="append", choices=["auto", "bf16", "fp32"], default=None,
                    help="repeatable; default: auto (bf16 autocast on a GPU)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    params = load_params(args.params)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    models = [m for m in bench_models(params, args.model) if m.teacher is None]  # no teacher: a plain label loss
    table = pd.concat([bench_seed_batching(models, bench_shape(params), seeds=tuple(args.seeds),
                                           batch_size=args.batch_size or params.budget.batch_size, steps=args.steps,
                                           warmup_steps=args.warmup_steps, repeats=args.repeats, device=device,
                                           precision=precision)
                       for precision in args.precision or ["auto"]], ignore_index=True)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "seed_batching.csv", index=False)
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
