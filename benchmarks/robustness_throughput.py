"""How fast the robustness stage scores on this machine's CPU, and how long the stage will take for a study.

    python -m benchmarks.robustness_throughput [--params params.yaml] [--repeats 7] [--batches 8]

Measures, on one torch thread (what each of the stage's worker processes uses), the images per second each of the
study's trained models scores at ``analysis.robustness.batch_size``, the way :func:`study.robustness.scoring.predict`
scores them (normalised, channels-last for a CNN, the mean of a distilled model's heads), along each path:

- transformers, softmax attention: ``explicit`` (``softmax(q kᵀ/√d) v``, the CPU default) and ``fused``
  (``F.scaled_dot_product_attention``, :func:`study.models.ablations.fused_attention`, what the stage uses);
- transformers, uniform attention: ``uniform (probabilities)`` (the ``(B, H, T, T)`` rows of 1/T times the values,
  through ``forward_with_attention``: what ``Attention.forward`` computed before it took the mean of the values
  directly) and ``uniform (mean of values)`` (what it computes now);
- a CNN: its one path.

The paths of a model are timed in turn within each repeat (so that a slower or busier spell of the machine falls on
all of them), and each new path's speed-up over the path it replaces (fused over explicit, the mean of the values
over the probabilities) is the median over repeats of the per-repeat ratio, with its range. Then the time to make
each probe's images, and from these rates the stage's scoring time for the study, with the new paths and with the
old: every run under every condition on ``analysis.robustness.images`` images (and each ViT/DeiT run with uniform
attention), plus the analysis plan's conditions for its models on ``analysis.plan.images`` images, spread over the
stage's worker processes (``train.threads``). Weights are random: speed does not depend on them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Collection
from pathlib import Path

import numpy as np
import torch

from study.core.config import INPUT_SHAPES, NUM_CLASSES, Params, load_params
from study.archs import Traits, traits
from study.models import build_model
from study.models.ablations import fused_attention, has_uniform_variant, uniform_attention
from study.plan.params import plan_params
from study.robustness.grids import Condition, plan_scoring, probe_settings
from study.robustness.params import robustness_params
from study.robustness.scoring import conditions, predict
from study.train.batches import normalise
from study.train.step import to_input


CNN, EXPLICIT, FUSED = "cnn", "explicit", "fused"
PROBABILITIES, MEAN = "uniform (probabilities)", "uniform (mean of values)"
REPLACES = {FUSED: EXPLICIT, MEAN: PROBABILITIES}  # new path -> the path it replaces
NEW, OLD = (FUSED, MEAN), (EXPLICIT, PROBABILITIES)  # the paths the stage scores with now, and before


def _paths(model: torch.nn.Module, cnn: bool) -> dict[str, object]:
    """The ways to score ``model`` (fed NHWC where ``cnn``): name -> function of a uint8 batch ``(B, H, W, C)``."""
    mean, std = torch.tensor([0.3]), torch.tensor([0.3])
    off = torch.autocast("cpu", enabled=False)

    def scored(x):
        return predict(model, x, mean, std, cnn, off)

    if cnn:
        return {CNN: scored}

    def switched(switch, forward):
        def run(x):
            with switch(model):
                return forward(x)
        return run

    def with_probabilities(x):  # forward_with_attention: the explicit path, probabilities built and kept
        with torch.inference_mode():
            logits, _ = model.forward_with_attention(to_input(normalise(x, mean, std), False))
        return logits.argmax(1)

    paths = {EXPLICIT: scored, FUSED: switched(fused_attention, scored)}
    if has_uniform_variant(model):
        paths[PROBABILITIES] = switched(uniform_attention, with_probabilities)
        paths[MEAN] = switched(uniform_attention, scored)
    return paths


def measure(models: dict[str, tuple[torch.nn.Module, Traits]], images: torch.Tensor, batch_size: int, batches: int,
            repeats: int) -> dict[str, dict[str, dict[str, float]]]:
    """``model -> path -> {"images_per_second": median, "ratio", "ratio_low", "ratio_high"}`` (ratio: to the path it
    replaces, :data:`REPLACES`, per repeat; 1 for the others). ``models``: name -> (model, its registry traits).
    ``images``: uint8 ``(N, H, W, C)``, at least ``batch_size`` of them."""
    out = {}
    for name, (model, model_traits) in models.items():
        model.eval()
        cnn = not model_traits.transformer
        if cnn:
            model.to(memory_format=torch.channels_last)
        paths = _paths(model, cnn)
        batch = images[:batch_size]  # (B, H, W, C): the speed of a forward pass does not depend on the pixels
        for run in paths.values():  # warm-up: first calls allocate
            run(batch)
        rates = {path: [] for path in paths}
        for _ in range(repeats):
            for path, run in paths.items():
                tic = time.perf_counter()
                for _ in range(batches):
                    run(batch)
                rates[path].append(batch_size * batches / (time.perf_counter() - tic))
        out[name] = {}
        for path, values in rates.items():
            ratios = [v / b for v, b in zip(values, rates[REPLACES.get(path, path)])]
            out[name][path] = {"images_per_second": statistics.median(values), "ratio": statistics.median(ratios),
                               "ratio_low": min(ratios), "ratio_high": max(ratios)}
    return out


def making_seconds(params: Params, images: torch.Tensor, count: int, keys: Collection[Condition] | None = None
                   ) -> float:
    """Seconds one process takes to make the probed images of ``count`` test images (the study's conditions, or
    those of ``keys``), in the stage's batches; ``images`` is cycled to ``count``."""
    batch = robustness_params(params).batch_size
    chosen = [c for c in conditions(**probe_settings(params)) if keys is None or c.key in keys]
    tic = time.perf_counter()
    for condition in chosen:
        for start in range(0, count, batch):
            part = images[torch.arange(start, min(start + batch, count)) % len(images)]
            condition.apply(part, start)
    return time.perf_counter() - tic


def estimate(params: Params, rates: dict[str, dict[str, dict[str, float]]], making: tuple[float, float],
             processes: int, paths: tuple[str, str] = NEW) -> tuple[float, list[str]]:
    """The stage's scoring time for ``params`` from the measured rates (``making``: seconds one worker takes to make
    the exploratory and the plan's probed images), scoring softmax and uniform attention along ``paths``
    (:data:`NEW` or :data:`OLD`): ``(wall seconds over the workers, lines of text saying how)``."""
    r, plan = robustness_params(params), plan_params(params)
    runs = len(params.fractions) * len(params.seeds)
    exploratory = len(conditions(**probe_settings(params))) * r.images
    plan_models, plan_uniform, plan_keys = plan_scoring(params)
    planned = len(plan_keys) * (plan.images if plan is not None else 0)
    lines, total = [], 0.0
    for name in params.trained_models:
        measured = rates[name]
        softmax = measured.get(paths[0], measured.get(CNN))["images_per_second"]
        seconds = runs * exploratory / softmax
        parts = [f"{runs} runs x {exploratory:,} images at {softmax:,.0f}/s"]
        uniform = measured.get(paths[1])
        if uniform and r.uniform_attention:
            seconds += runs * exploratory / uniform["images_per_second"]
            parts.append(f"{runs} uniform x {exploratory:,} at {uniform['images_per_second']:,.0f}/s")
        if name in plan_models:
            seconds += runs * planned / softmax
            parts.append(f"plan: {runs} runs x {planned:,} images")
            if name in plan_uniform and uniform:
                seconds += runs * planned / uniform["images_per_second"]
                parts.append(f"plan: {runs} uniform x {planned:,}")
        total += seconds
        lines.append(f"  {name}: {seconds:,.0f} s ({'; '.join(parts)})")
    made = processes * sum(making)  # every process makes every probe's images
    lines.append(f"  making the probed images: {sum(making):,.0f} s per process (exploratory {making[0]:,.0f} s, "
                 f"plan {making[1]:,.0f} s)")
    wall = (total + made) / processes
    lines.append(f"scoring: {total + made:,.0f} CPU-seconds, {wall:,.0f} s ({wall / 60:.1f} min) over {processes} "
                 "processes, evenly split; loading runs, statistics and figures come on top")
    return wall, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batches", type=int, default=8, help="batches per timing")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as each worker process of the stage
    params = load_params(args.params)
    r = robustness_params(params)
    side, channels = INPUT_SHAPES[params.data.dataset]
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.integers(0, 256, (2 * r.batch_size, side, side, channels), dtype=np.uint8))
    torch.manual_seed(0)
    models = {name: (build_model(m.arch, NUM_CLASSES[params.data.dataset], side, channels, **m.arch_args),
                     traits(m.arch, m.arch_args)) for name, m in ((n, params.models[n]) for n in params.trained_models)}
    rates = measure(models, images, r.batch_size, args.batches, args.repeats)
    print(f"torch {torch.__version__}, 1 thread, batch {r.batch_size}, {args.batches} batches x {args.repeats} "
          "repeats, paths alternating; images/s (median), and over the path it replaces (median, range):")
    for name, paths in rates.items():
        for path, m in paths.items():
            ratio = (f"   {m['ratio']:.2f}x over {REPLACES[path]} ({m['ratio_low']:.2f}-{m['ratio_high']:.2f})"
                     if path in REPLACES else "")
            print(f"  {name:8s} {path:26s} {m['images_per_second']:8,.0f}{ratio}")
    _, _, plan_keys = plan_scoring(params)
    plan = plan_params(params)
    plan_images = plan.images if plan is not None else 0
    making = (making_seconds(params, images, r.images),
              making_seconds(params, images, plan_images, set(plan_keys)) if plan_keys else 0.0)
    processes = params.train.threads or os.cpu_count() or 1  # the stage's worker processes: its threads
    for label, paths in (("now (fused; uniform: mean of values)", NEW),
                         ("before (explicit; uniform: probabilities)", OLD)):
        print(f"estimated robustness stage scoring for {args.params}, {label}:")
        for line in estimate(params, rates, making, processes, paths)[1]:
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
