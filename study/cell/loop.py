"""A cell's training loop: K seeds of one model, fraction and budget, one vmapped step, each seed's run written.

The loop of :func:`study.train.loop.train_run`, over a :class:`study.cell.step.CellStep`: the same validation points
(each seed scored with its own normalisation), the same resume points (each seed's share in its own ``resume.pt``,
:mod:`study.cell.resume`), and the same finish (:func:`study.train.loop.finish_run`), so each seed leaves exactly
the files a run alone leaves, its ``metrics.json`` naming the cell it trained in. A seed's weights equal those of the
seed trained alone up to the rounding of batched matrix products (tests/cell).
"""

from __future__ import annotations

import contextlib
import math

import torch

from study.cell.resume import cell_fingerprint, load_cell, save_cell
from study.cell.step import CellStep, check_cell_specs
from study.core.errors import StudyError
from study.train.artifacts import save_trained
from study.train.augment import BatchAugment
from study.train.batches import DeviceSplit, channel_stats
from study.train.evaluate import evaluate
from study.train.loop import _HISTORY_POINTS, RunData, Trained, TrainSpec, _history_row, finish_run
from study.train.stepping import Progress, walk
from study.train.losses import DistillationLoss

# A cell trains in float32 (study.cell.step): its scores too.
_FP32 = contextlib.nullcontext()


def train_cell(specs: list[TrainSpec], models: list, loss_fns: list, data: list[RunData]) -> list[dict]:
    """Train each seed's ``models[k]`` under ``loss_fns[k]`` on ``data[k]`` as one cell and write each seed's run
    files at ``specs[k].paths``; return each seed's metrics."""
    if len({spec.budget for spec in specs}) != 1:
        raise StudyError("a cell's seeds train for one budget: give seeds of one fraction (their subsets are one size)")
    spec0 = specs[0]
    device, budget = spec0.device, spec0.budget
    seeds = [spec.run.seed for spec in specs]
    label = f"{spec0.run.model_name} f={spec0.run.fraction} s={','.join(map(str, seeds))}"
    try:  # before anything is written: a setting the cell step does not take (bf16, compile) names its fix
        check_cell_specs([spec.step for spec in specs])
    except ValueError as exc:
        raise StudyError(f"{label}: {exc}") from None
    runs, splits, val_splits, augments, norms = [], [], [], [], []
    for spec, model, loss_fn, images in zip(specs, models, loss_fns, data):
        mean_list, std_list = channel_stats(images.train[0])
        run = spec.run.with_normalisation(mean_list, std_list)
        save_trained(spec.paths.initial, model, run)  # before any step, as a run alone writes it
        mean, std = torch.tensor(mean_list, device=device), torch.tensor(std_list, device=device)
        runs.append(run)
        norms.append((mean, std))
        splits.append(DeviceSplit(*images.train, device))
        val_splits.append(DeviceSplit(*images.validation, device))
        image_size = tuple(images.train[0].shape[1:3])  # (H, W) of the (N, H, W, C) images
        augments.append(BatchAugment(spec.augmentation, mean, std, run.num_classes, image_size))
        model.to(device)
        if spec.channels_last:
            model.to(memory_format=torch.channels_last)
        loss_fn.to(device).train()
    cell = CellStep([m.train() for m in models], loss_fns, splits, augments, [spec.step for spec in specs])
    resumes = [spec.paths.resume for spec in specs]
    fingerprint = cell_fingerprint([spec.fingerprint for spec in specs])

    histories: list[list[dict]] = [[] for _ in seeds]
    progress = Progress(0, torch.zeros(len(seeds), device=device), 0, 0.0)
    restored = load_cell(resumes, fingerprint, device)
    if restored is not None:
        step, state, loops = restored
        state["teacher_views"] = [loop.get("teacher_views") for loop in loops]
        cell.load_state_dict(state)
        histories = [loop["history"] for loop in loops]
        progress = Progress(step, torch.tensor([loop["loss_sum"] for loop in loops], device=device),
                            loops[0]["loss_steps"], loops[0]["train_seconds"])
        print(f"{label}: resuming the cell at step {step}/{budget.steps}")

    def validate(at: Progress) -> None:
        for k, spec in enumerate(specs):
            model = cell.stack.model(k, like=models[k])
            val = evaluate(model, val_splits[k], *norms[k], spec.eval_batch_size, spec.channels_last, _FP32)
            histories[k].append(_history_row(at.step, budget, float(at.loss_sum[k]) / at.loss_steps, val,
                                             cell.optimizer, at.train_seconds, _views(loss_fns[k])))

    def checkpoint(at: Progress) -> None:
        state = cell.state_dict()
        views = state.pop("teacher_views")
        loops = [{"history": h, "loss_sum": float(s), "loss_steps": at.loss_steps, "train_seconds": at.train_seconds,
                  **({"teacher_views": list(v)} if v is not None else {})}
                 for h, s, v in zip(histories, at.loss_sum, views)]
        save_cell(resumes, fingerprint, at.step, state, loops)

    walk(progress, budget.steps, cell, device=device, eval_every=math.ceil(budget.steps / _HISTORY_POINTS),
         checkpoint_every=spec0.checkpoint_every, label=label,
         check_finite=lambda at: _check_finite(at.loss_sum, at.step, label, seeds), validate=validate,
         checkpoint=checkpoint)

    results = []
    for k, spec in enumerate(specs):
        trained = Trained(progress.step, histories[k], float(progress.loss_sum[k]), progress.train_seconds,
                          _views(loss_fns[k]), cell.precision, False,
                          {"cell": {"switch": spec.cell_switch, "seeds": seeds}})
        results.append(finish_run(spec, cell.stack.model(k, like=models[k]), runs[k], data[k], trained, _FP32))
    return results


def _views(loss_fn) -> tuple[int, int] | None:
    return loss_fn.teacher_views() if isinstance(loss_fn, DistillationLoss) else None


def _check_finite(loss_sum: torch.Tensor, step: int, label: str, seeds: list[int]) -> None:
    bad = [seed for seed, finite in zip(seeds, torch.isfinite(loss_sum).tolist()) if not finite]
    if bad:
        raise StudyError(f"{label}: training loss of seed {', '.join(map(str, bad))} became NaN/inf by step {step}; "
                         "lower the model's lr or set grad_clip")
