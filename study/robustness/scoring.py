"""Scoring every run on probed test images: each probed image set is made once, streamed in batches, and read
by every run's model.

The probes are those of :mod:`study.robustness.probes` (docs/robustness.md): occlusion of a share of the cells of
the ViT's patch grid and of the same grid offset by half a cell, rearrangement (patch shuffle) on several grids and
on some of them offset by half a cell, translation along x, y and the diagonal, and a corruption suite at several
severities. A :class:`Condition` is one probe at one setting and level; :func:`conditions` lists them from the
parameters' values. The clean images are one more condition, scored like the others.

:func:`score_runs` loops condition → batch of images → run: the probe is applied to a batch once (its random
draws keyed by the recorded seed and each image's index in the set, so batching changes nothing), the batch
moves to the device once, and every run's model scores it, normalised as that run was trained, exactly as the
training stage scores the test set (:func:`study.train.evaluate.evaluate`: the mean of a distilled model's two
heads, channels-last for CNNs, the run's precision). Nothing the size of the image set is kept per condition,
except the predictions the 1-px consistency needs. Transformers score with fused softmax attention
(:func:`study.models.ablations.fused_attention`): the same function as the explicit path up to rounding, faster.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from study.models.ablations import fused_attention, has_uniform_variant, uniform_attention
from study.robustness import (ALIGNED, CLEAN, CORRUPTION, DIRECTIONS, LEVEL_NAMES, OCCLUSION, OFFSET,  # noqa: F401
                              PROBES, REARRANGEMENT, SHUFFLE, TRANSLATION, UNIFORM)  # (names re-exported)
from study.robustness.probes import corrupt, half_cell_offset, occlusion, prediction_change, rearrangement, translation
from study.data.scramble import Scramble, scramble_images, setting_scramble
from study.archs import traits
from study.train.batches import normalise
from study.train.spec import RunSpec
from study.train.step import autocast_for, to_input

RunKey = tuple[str, float, int]  # (model name, fraction, seed)
# The scores' columns: one row per run and condition (score_runs).
SCORE_COLUMNS = ["model", "fraction", "seed", "probe", "variant", "level", "detail", "images", "correct", "top1"]


@dataclass(frozen=True)
class Condition:
    """One probe at one setting and level. ``variant``: ``aligned``/``offset`` (occlusion), ``shuffle``/``offset``
    (rearrangement), ``x``/``y``/``diagonal`` (translation), the corruption's name, ``clean``. ``level``: the
    share, the grid, the shift in px, the severity; 0 for the clean images. ``detail`` says it in words."""

    probe: str
    variant: str
    level: float
    detail: str
    apply: Callable[[Tensor, int], Tensor]  # (uint8 batch (B, H, W, C), index of its first image) -> probed batch

    @property
    def key(self) -> tuple[str, str, float]:
        return self.probe, self.variant, self.level


def conditions(image_size: int, seed: int, occlusion_grid: int, shares: Iterable[float], offset: bool,
               grids: Iterable[int], shifts: Iterable[int], corruptions: Iterable[str], severities: Iterable[int],
               offset_grids: Iterable[int] = ()) -> list[Condition]:
    """Every condition to score, the clean images first; level 0 of any probe is the clean images, so it is not
    listed again. ``seed`` fixes every random draw (cells, permutations, noise). ``offset_grids``: the shuffle
    grids also shuffled offset by half a cell (variant ``offset``)."""
    out = [Condition(CLEAN, CLEAN, 0.0, "clean test images", lambda x, start: x)]
    cell = image_size // occlusion_grid
    variants = [(ALIGNED, 0, f"{occlusion_grid}x{occlusion_grid} grid of {cell}-px cells")]
    if offset:
        shift = half_cell_offset(image_size, occlusion_grid)
        variants.append((OFFSET, shift, f"{occlusion_grid}x{occlusion_grid} grid of {cell}-px cells moved {shift} px "
                                        "right and down"))
    for variant, px, words in variants:
        for share in sorted(set(shares)):
            if share > 0:
                out.append(Condition(OCCLUSION, variant, float(share), f"{100 * share:g}% of the cells of a {words}",
                                     _occlude(float(share), seed, occlusion_grid, px)))
    for grid in sorted(set(grids)):
        if grid > 1:
            out.append(Condition(REARRANGEMENT, SHUFFLE, float(grid), f"{grid}x{grid} cells permuted",
                                 _shuffle(grid, seed, 0)))
    for grid in sorted(set(offset_grids)):
        if grid > 1:
            shift = half_cell_offset(image_size, grid)
            out.append(Condition(REARRANGEMENT, OFFSET, float(grid),
                                 f"{grid}x{grid} cells of {image_size // grid} px permuted, the grid moved {shift} px "
                                 "right and down (cells wrapping around the border)", _shuffle(grid, seed, shift)))
    for direction, (dx, dy) in DIRECTIONS.items():
        for px in sorted(set(shifts)):
            if px > 0:
                out.append(Condition(TRANSLATION, direction, float(px), f"shifted {px} px along {direction}",
                                     _shift(px * dx, px * dy)))
    for name in corruptions:
        for severity in sorted(set(severities)):
            if severity > 0:
                out.append(Condition(CORRUPTION, name, float(severity), f"{name} at severity {severity}",
                                     _corrupt(name, severity, seed)))
    return out


def _occlude(share: float, seed: int, grid: int, offset: int) -> Callable[[Tensor, int], Tensor]:
    return lambda x, start: occlusion(x, share, seed, grid, offset, start)


def _shuffle(grid: int, seed: int, offset: int) -> Callable[[Tensor, int], Tensor]:
    return lambda x, start: rearrangement(x, grid, seed, start, offset)


def _shift(dx: int, dy: int) -> Callable[[Tensor, int], Tensor]:
    return lambda x, start: translation(x, dx, dy)


def _corrupt(name: str, severity: int, seed: int) -> Callable[[Tensor, int], Tensor]:
    return lambda x, start: corrupt(x, name, severity, seed, start)


def probe_set(test_size: int, count: int, seed: int) -> np.ndarray:
    """Indices (sorted) of the fixed random set of ``count`` test images drawn with ``seed``; all of them when the
    test set is no larger."""
    if count >= test_size:
        return np.arange(test_size)
    return np.sort(np.random.default_rng(seed).choice(test_size, size=count, replace=False))


@dataclass
class _Scorer:
    model: nn.Module
    mean: Tensor
    std: Tensor
    channels_last: bool
    scramble: Scramble | None = None  # a scrambled run sees every probed image through its scramble
    uniform: bool = False  # the run's model with uniform attention (study.models.ablations), scored as a variant
    seconds: float = 0.0

    def switched(self):
        """The context the model scores in: uniform attention for the variant, the model as trained otherwise."""
        return uniform_attention(self.model) if self.uniform else contextlib.nullcontext()


@torch.inference_mode()
def predict(model: nn.Module, images: Tensor, mean: Tensor, std: Tensor, channels_last: bool, autocast) -> Tensor:
    """Predicted classes ``(B,)`` for uint8 images ``(B, H, W, C)`` on the model's device, as the training stage
    scores the test set: normalised, channels-last for a CNN, the mean of a distilled model's two heads' logits."""
    x = to_input(normalise(images, mean, std), channels_last)
    with autocast:
        heads = model.forward_heads(x) if hasattr(model, "forward_heads") else (model(x),)
    return (sum(h.float() for h in heads) / len(heads)).argmax(1)


def score_runs(models: dict[RunKey, tuple[nn.Module, RunSpec]], images: np.ndarray, labels: np.ndarray,
               conditions: list[Condition], batch_size: int, device: torch.device, precision: str = "auto",
               uniform: bool | Collection[str] = False) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Score every run on every condition: ``(scores, consistency, cost)``.

    With ``uniform`` True, every run whose model has a uniform-attention variant
    (:func:`study.models.ablations.has_uniform_variant`: the study's ViT and DeiT and the arms built on them, not a
    ConViT or a CNN) is scored a second time with all its attention rows uniform, as model ``<model>@uniform`` (the
    same model object switched per batch, so no second copy in memory); its rows follow the run's in every table.
    ``uniform`` may instead name the models (plain names, "vit") whose runs get the variant.

    ``scores``: one row per run and condition, with the images scored, how many were right and top-1.
    ``consistency``: per run and shift direction, the share of predictions a 1-px shift changes from the clean
    ones (Azulay & Weiss's probability of change) and its complement, when the shifts include 1 px.
    ``cost``: seconds spent making each probe's images and running each model, with the images scored.
    """
    autocast = autocast_for(device, precision)
    scorers = {}
    for key, (model, spec) in models.items():
        channels_last = not traits(spec.arch, spec.arch_args).transformer  # a CNN's NHWC, as it trained
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        scramble = None if spec.scramble is None else setting_scramble(spec.scramble, spec.image_size, spec.image_size)
        scorers[key] = _Scorer(model.eval(), torch.tensor(spec.mean, device=device),
                               torch.tensor(spec.std, device=device), channels_last, scramble)
        name, fraction, seed = key
        switched = uniform if isinstance(uniform, bool) else name in uniform
        if switched and has_uniform_variant(model):
            scorers[name + UNIFORM, fraction, seed] = _Scorer(model, scorers[key].mean, scorers[key].std,
                                                              channels_last, scramble, uniform=True)
    source = torch.from_numpy(np.array(images, dtype=np.uint8))  # (N, H, W, C), CPU; a copy: inputs may be read-only maps
    truth = torch.from_numpy(np.array(labels, dtype=np.int64)).to(device)
    with contextlib.ExitStack() as fused:
        for model, _ in models.values():  # each model once: its variant's scorer holds the same object
            fused.enter_context(fused_attention(model))
        rows, predictions, making = _score_conditions(scorers, source, truth, conditions, batch_size, device,
                                                      autocast)
    consistency = []
    for key in scorers:
        clean = predictions.get((key, (CLEAN, CLEAN, 0.0)))
        for direction in DIRECTIONS:
            shifted = predictions.get((key, (TRANSLATION, direction, 1.0)))
            if clean is None or shifted is None:
                continue
            changed = prediction_change(clean, shifted)
            consistency.append({"model": key[0], "fraction": key[1], "seed": key[2], "direction": direction,
                                "images": len(source), "changed": changed, "consistency": 1.0 - changed})
    per_model: dict[str, list[float]] = {}
    for (name, _, _), scorer in scorers.items():
        per_model.setdefault(name, []).append(scorer.seconds)
    scored = len(source) * len(conditions)
    cost = [{"part": f"making {probe} images", "runs": 0, "seconds": seconds, "images": 0, "images_per_second": np.nan}
            for probe, seconds in making.items()]
    cost += [{"part": f"scoring with {name}", "runs": len(times), "seconds": sum(times), "images": scored * len(times),
              "images_per_second": scored * len(times) / sum(times) if sum(times) else np.nan}
             for name, times in per_model.items()]
    return (pd.DataFrame(rows, columns=["order", *SCORE_COLUMNS]),
            pd.DataFrame(consistency, columns=["model", "fraction", "seed", "direction", "images", "changed",
                                               "consistency"]),
            pd.DataFrame(cost, columns=COST_COLUMNS))


def _score_conditions(scorers: dict[RunKey, _Scorer], source: Tensor, truth: Tensor, conditions: list[Condition],
                      batch_size: int, device: torch.device, autocast
                      ) -> tuple[list[dict], dict[tuple[RunKey, tuple], np.ndarray], dict[str, float]]:
    """:func:`score_runs`' loop, condition -> batch -> run: ``(rows, the predictions the 1-px consistency needs,
    seconds spent making each probe's images)``. ``source``: the uint8 images ``(N, H, W, C)`` on the CPU."""
    kept = {c.key for c in conditions if c.probe == CLEAN or (c.probe == TRANSLATION and c.level == 1)}
    rows, predictions, making = [], {}, {}
    for order, condition in enumerate(conditions):
        correct = {key: 0 for key in scorers}
        parts: dict[RunKey, list[Tensor]] = {key: [] for key in scorers}
        for start in range(0, len(source), batch_size):
            tic = time.perf_counter()
            probed = condition.apply(source[start:start + batch_size], start)  # (B, H, W, C) uint8, CPU
            batch = probed.to(device)
            making[condition.probe] = making.get(condition.probe, 0.0) + time.perf_counter() - tic
            y = truth[start:start + batch_size]
            for key, scorer in scorers.items():
                tic = time.perf_counter()
                seen = batch if scorer.scramble is None else torch.from_numpy(
                    scramble_images(probed.numpy(), scorer.scramble)).to(device)  # the probe acts on the world
                with scorer.switched():
                    predicted = predict(scorer.model, seen, scorer.mean, scorer.std, scorer.channels_last, autocast)
                correct[key] += int((predicted == y).sum())
                scorer.seconds += time.perf_counter() - tic
                if condition.key in kept:
                    parts[key].append(predicted.cpu())
        for key in scorers:
            model_name, fraction, seed = key
            rows.append({"order": order, "model": model_name, "fraction": fraction, "seed": seed,
                         "probe": condition.probe,
                         "variant": condition.variant, "level": condition.level, "detail": condition.detail,
                         "images": len(source), "correct": correct[key], "top1": correct[key] / max(len(source), 1)})
            if condition.key in kept:
                predictions[key, condition.key] = torch.cat(parts[key]).numpy()
    return rows, predictions, making


COST_COLUMNS = ["part", "runs", "seconds", "images", "images_per_second"]


@contextlib.contextmanager
def scoring_workers(processes: int, device: torch.device) -> Iterator[Executor | None]:
    """The worker processes :func:`score_run_files` shares its runs with on a CPU: ``processes - 1`` of them (the
    calling process scores a share itself), started once for every call made inside the block; ``None`` where one
    process scores alone. Spawning a worker costs an ``import torch`` and the study's imports (about 3 s each on 2
    cores), so a stage that scores twice starts them once."""
    if device.type != "cpu" or processes <= 1:
        yield None
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # no fork of a process whose OpenMP pool may have run
    with ProcessPoolExecutor(processes - 1, mp_context=context) as pool:
        yield pool


def score_run_files(runs: dict[RunKey, Path], images: np.ndarray, labels: np.ndarray, settings: dict,
                    batch_size: int, device: torch.device, precision: str = "auto", processes: int = 1,
                    uniform: bool | Collection[str] = False, only: Collection[tuple[str, str, float]] | None = None,
                    workers: Executor | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """:func:`score_runs` on the runs' ``model.pt`` files (``runs``: key -> file), the conditions built from
    ``settings`` (the keywords of :func:`conditions`; with ``only``, those whose key ``(probe, variant, level)`` it
    holds), each run's uniform-attention variant too with ``uniform`` (scored in its run's process, from the same
    loaded model).

    On a CPU the runs are split into ``processes`` shares, each scored with one torch thread: the first by this
    process, the others by ``workers`` (:func:`scoring_workers`; started here when not given), each of which makes
    the probed images itself. With one thread a run's scores do not depend on the other runs or on the split, so
    the tables are the same for any ``processes``; and a process per core keeps small models' forward passes off
    the thread pool, which is slow for them and stalls whenever another program holds a core (on the 2-core
    machine, 2 threads scored the smoke study 25x slower than 1 while a core was busy). On another device one
    process scores them all. Rows are sorted by condition, then run.
    """
    keys = sorted(runs)
    if device.type != "cpu" or processes <= 1 or len(keys) < 2:
        parts = [_score_files({k: runs[k] for k in keys}, images, labels, settings, batch_size, str(device),
                              precision, None, None, uniform, only)]
    else:
        chunks = [keys[i::processes] for i in range(min(processes, len(keys)))]  # round robin: models mixed
        deterministic = torch.are_deterministic_algorithms_enabled()
        with contextlib.ExitStack() as started:
            if workers is None:
                workers = started.enter_context(scoring_workers(len(chunks), device))
            futures = [workers.submit(_score_files, {k: runs[k] for k in chunk}, images, labels, settings,
                                      batch_size, "cpu", precision, 1, deterministic, uniform, only)
                       for chunk in chunks[1:]]
            with _one_thread():
                parts = [_score_files({k: runs[k] for k in chunks[0]}, images, labels, settings, batch_size, "cpu",
                                      precision, None, None, uniform, only)]
            parts += [future.result() for future in futures]
    scores = pd.concat([p[0] for p in parts], ignore_index=True)
    scores = scores.sort_values(["order", "model", "fraction", "seed"], ignore_index=True).drop(columns="order")
    consistency = pd.concat([p[1] for p in parts], ignore_index=True).sort_values(
        ["model", "fraction", "seed", "direction"], ignore_index=True)
    cost = pd.concat([p[2] for p in parts], ignore_index=True)
    cost = cost.groupby("part", as_index=False, sort=False)[["runs", "seconds", "images"]].sum()
    cost["images_per_second"] = (cost["images"] / cost["seconds"]).where(cost["images"] > 0)
    return scores, consistency, cost[COST_COLUMNS]


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """This process's torch threads at 1 while it scores its share, as every worker's are; restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _score_files(runs: dict[RunKey, Path], images: np.ndarray, labels: np.ndarray, settings: dict, batch_size: int,
                 device: str, precision: str, threads: int | None, deterministic: bool | None,
                 uniform: bool | Collection[str] = False, only: Collection[tuple[str, str, float]] | None = None
                 ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One process's share of :func:`score_run_files` (module level, so that a spawned worker can run it); a
    worker sets its ``threads`` and the parent's determinism, the parent process (``None``) keeps its own."""
    from study.train.artifacts import load_trained

    if threads is not None:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(bool(deterministic), warn_only=True)
    place = torch.device(device)
    models = {key: load_trained(path, place) for key, path in runs.items()}
    chosen = [c for c in conditions(**settings) if only is None or c.key in only]
    return score_runs(models, images, labels, chosen, batch_size, place, precision, uniform)
