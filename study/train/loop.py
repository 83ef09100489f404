"""The one training loop: every model, every fraction, every seed, distilled or not.

A run is: build the model, take ``budget.steps`` optimiser steps over fixed-size batches of its training
subset, score the validation split now and then (history), checkpoint regularly so a killed run resumes
exactly, and finally score the test set once with the final weights (no test-set model selection).
:func:`finish_run` is that last part and writes the run's files; a cell of seeds trained together
(:mod:`study.cell.loop`) finishes each of its seeds with it, so both leave the same files.

A distilled run also reports how often the teacher's label of a training view differs from the true label
(:class:`study.train.losses.DistillationLoss` counts it): in history.csv as the share so far at each validation
point (a column only distilled runs have, so every other run's files stay as they were), and in metrics.json
over the whole run. Without augmentation, a teacher that fits its training images gives a share of 0, and hard
distillation then adds nothing to the true labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from study.core.errors import StudyError
from study.core.io import atomic_path, write_json
from study.train.artifacts import save_trained
from study.train.augment import Augmentation, BatchAugment
from study.train.batches import DeviceSplit, channel_stats
from study.train.budget import Budget
from study.train.convergence import convergence
from study.train.evaluate import evaluate
from study.train.graphed import GraphedTrainStep, wants_graph
from study.train.losses import DistillationLoss
from study.train.recipe import Recipe
from study.train.resume import load_resume, run_fingerprint, save_resume
from study.train.spec import RunSpec
from study.train.step import StepSpec, TrainStep, resolved_precision
from study.train.stepping import Progress, walk

# Validation evaluations per run, evenly spaced: a coarse learning curve whose last two points span the last
# quarter of the steps, for the convergence check (study.train.convergence). Each is one validation pass.
_HISTORY_POINTS = 4
# Training images scored after training (the subset's first ones, unaugmented): the train-test gap and
# whether a teacher's labels on its own training data differ from the truth, at a bounded cost: 2,000 images
# give a standard error of at most 1.1 points, sqrt(0.25 / 2000).
_TRAIN_SCORE_IMAGES = 2000


@dataclass(frozen=True)
class RunPaths:
    checkpoint: Path  # final weights (model.pt)
    metrics: Path  # metrics.json
    history: Path  # history.csv, one row per validation point
    resume: Path  # resume state, rewritten every `checkpoint_every` steps
    predictions: Path  # predictions.npy: test-set argmax, int16 (rows, N); row 0 the model's, then each head's
    initial: Path | None = None  # init.pt: the weights before the first step (the attention analysis's baseline)


@dataclass(frozen=True)
class TrainSpec:
    """Everything that determines how one run trains, built once from the validated params at the edge
    (:func:`study.train.stage.run`): what is trained, how, for how long, on which images, where it is written."""

    run: RunSpec  # what is trained; train_run adds the training set's normalisation before writing it
    recipe: Recipe
    augmentation: Augmentation
    budget: Budget
    device: torch.device
    channels_last: bool  # NHWC inputs and weights: a CNN's (the registry's traits, study.archs)
    compile: bool  # train.compile
    precision: str  # train.precision
    graph: str  # train.graph: "auto" captures the step as a CUDA graph on CUDA (study.train.graphed)
    eval_batch_size: int
    checkpoint_every: int  # optimiser steps between resume points
    subset: str  # digest of the training subset's indices
    validation: str  # digest of the validation split's indices
    paths: RunPaths
    label: str  # names the run in progress bars and messages
    cell_switch: int = 1  # train.cell for this device: seeds per vmapped step (study.cell); recorded in metrics

    @property
    def step(self) -> StepSpec:
        """How each optimiser step is taken (:class:`study.train.step.TrainStep`)."""
        return StepSpec(self.recipe, self.budget.steps, self.budget.batch_size, self.run.seed, self.device,
                        self.channels_last, self.compile, self.precision)

    @property
    def fingerprint(self) -> str:
        """A digest of everything that determines the run's weights: a resume state written under another one is
        ignored. The timing and output settings (checkpoint_every, eval_batch_size, paths, label) are not in it."""
        return run_fingerprint(
            spec=self.run.as_dict(), recipe=self.recipe, budget=self.budget.as_dict(),
            augment=self.augmentation.as_dict(), device=self.device.type, compile=self.compile,
            precision=resolved_precision(self.device, self.precision), subset=self.subset, validation=self.validation,
            **({"graph": self.graph} if self.device.type == "cuda" else {}),  # CPU runs: always eager
        )


@dataclass(frozen=True)
class RunData:
    """A run's images ``(N, H, W, C)`` uint8 and labels ``(N,)``: its training subset, the validation split and the
    test set, as the model sees them (scrambled for a scrambled model)."""

    train: tuple[np.ndarray, np.ndarray]
    validation: tuple[np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray]


def train_run(spec: TrainSpec, model: nn.Module, loss_fn: nn.Module, data: RunData) -> dict:
    """Train ``model`` under ``loss_fn`` for ``spec.budget.steps`` steps and write the run's files; return its
    metrics."""
    device, budget, paths, label = spec.device, spec.budget, spec.paths, spec.label
    train = data.train
    mean_list, std_list = channel_stats(train[0])
    mean = torch.tensor(mean_list, device=device)
    std = torch.tensor(std_list, device=device)
    run = spec.run.with_normalisation(mean_list, std_list)
    if paths.initial is not None:  # before any step (a resumed run rebuilt the same weights from its seed)
        save_trained(paths.initial, model, run)
    train_split, val_split = DeviceSplit(*train, device), DeviceSplit(*data.validation, device)

    model = model.to(device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    loss_fn = loss_fn.to(device)
    image_size = tuple(train[0].shape[1:3])  # (H, W) of the (N, H, W, C) images
    augment = BatchAugment(spec.augmentation, mean, std, run.num_classes, image_size)
    graphed = wants_graph(device, spec.graph)
    train_step = (GraphedTrainStep if graphed else TrainStep)(model, loss_fn, train_split, augment, spec.step)
    optimizer, autocast = train_step.optimizer, train_step.autocast
    channels_last, eval_batch_size, fingerprint = spec.channels_last, spec.eval_batch_size, spec.fingerprint
    eval_every = math.ceil(budget.steps / _HISTORY_POINTS)

    distilled = loss_fn if isinstance(loss_fn, DistillationLoss) else None  # counts the teacher's labels
    state = load_resume(paths.resume, fingerprint, model, optimizer, device, teacher_views=distilled is not None)
    step, history = state["step"], state["history"]
    if distilled is not None:
        distilled.restore_teacher_views(*state["teacher_views"])
    progress = Progress(step, torch.tensor(state["loss_sum"], device=device), state["loss_steps"],
                        state["train_seconds"])
    if step:
        print(f"{label}: resuming at step {step}/{budget.steps}")

    model.train()
    loss_fn.train()

    def validate(at: Progress) -> dict:
        val = evaluate(model, val_split, mean, std, eval_batch_size, channels_last, autocast)
        history.append(_history_row(at.step, budget, float(at.loss_sum) / at.loss_steps, val, optimizer,
                                    at.train_seconds, _teacher_views(distilled)))
        return {"val_top1": f"{val['top1']:.3f}"}

    def checkpoint(at: Progress) -> None:
        save_resume(paths.resume, fingerprint, model, optimizer, at.step, history, at.loss_sum, at.loss_steps,
                    at.train_seconds, _teacher_views(distilled))

    walk(progress, budget.steps, train_step, device=device, eval_every=eval_every,
         checkpoint_every=spec.checkpoint_every, label=label,
         check_finite=lambda at: _check_finite(at.loss_sum, at.step, label), validate=validate, checkpoint=checkpoint)
    views = _teacher_views(distilled)
    extra = {"cell": {"switch": spec.cell_switch, "seeds": [run.seed]}}
    if graphed:  # only where it applies, so that CPU runs' files stay as they were
        extra["graph"] = ("after host-side augmentation" if not train_step.inline_batch else
                          "whole step, crop and flip drawn on the device" if train_step.device_crop else "whole step")
    return finish_run(spec, model, run, data, Trained(progress.step, history, float(progress.loss_sum),
                                                      progress.train_seconds, views, train_step.precision,
                                                      train_step.compiled, extra), autocast)


@dataclass(frozen=True)
class Trained:
    """Where a run's loop ended, for :func:`finish_run`."""

    steps: int
    history: list[dict]  # one row per validation point (_history_row)
    loss_sum: float  # the training loss summed since the last validation point
    train_seconds: float
    teacher_views: tuple[int, int] | None  # a distilled run's (views labelled, views the teacher labels otherwise)
    precision: str  # of the forward passes: "bf16" or "fp32"
    compiled: bool
    extra: dict  # the loop's own metrics entries (how the step ran), written after the common ones


def finish_run(spec: TrainSpec, model: nn.Module, run: RunSpec, data: RunData, trained: Trained,
               autocast) -> dict:
    """Score the trained ``model`` once on the test set and on its first training images, and write the run's
    files (model.pt, predictions.npy, history.csv, metrics.json, the resume state marked complete); return its
    metrics. ``run`` is the spec with the training set's normalisation, which every score uses."""
    device, paths = spec.device, spec.paths
    mean, std = torch.tensor(run.mean, device=device), torch.tensor(run.std, device=device)
    history, views = trained.history, trained.teacher_views
    predictions: list[torch.Tensor] = []
    test_split = DeviceSplit(*data.test, device)
    test_scores = evaluate(model, test_split, mean, std, spec.eval_batch_size, spec.channels_last, autocast,
                           predictions)
    train = data.train
    scored = DeviceSplit(train[0][:_TRAIN_SCORE_IMAGES], train[1][:_TRAIN_SCORE_IMAGES], device)
    train_scores = evaluate(model, scored, mean, std, spec.eval_batch_size, spec.channels_last, autocast)
    save_trained(paths.checkpoint, model, run)
    with atomic_path(paths.predictions) as tmp, tmp.open("wb") as file:
        np.save(file, torch.cat(predictions, dim=1).to(torch.int16).cpu().numpy())  # (1 + heads, N)
    import pandas as pd  # here, not at the top: its import is a quarter second of every training stage's start

    with atomic_path(paths.history) as tmp:
        pd.DataFrame(history).to_csv(tmp, index=False)
    metrics = _metrics(run, spec.budget, test_scores, history, trained.train_seconds, device, trained.precision,
                       trained.compiled)
    metrics["train_top1"] = round(train_scores["top1"], 6)  # on the subset's first images, unaugmented
    metrics["train_scored_images"] = len(scored)
    metrics["augment"] = spec.augmentation.as_dict()
    metrics["convergence"] = convergence(history)
    metrics.update(trained.extra)
    if views is not None:
        metrics["teacher_views_seen"], metrics["teacher_views_disagreeing"] = views
        metrics["teacher_view_disagreement"] = round(_share(views), 6)
    write_json(paths.metrics, metrics)
    # The resume state now equals the final model; keeping it would let a rerun with the same settings
    # skip training, but DVC reruns a stage only when something changed, so it is dropped to save space.
    save_resume(paths.resume, "complete", None, None, trained.steps, history, trained.loss_sum, 0,
                trained.train_seconds, views)
    return metrics


def _check_finite(loss_sum: torch.Tensor, step: int, label: str) -> None:
    if not torch.isfinite(loss_sum):
        raise StudyError(
            f"{label}: training loss became NaN/inf by step {step}; lower the model's lr or set grad_clip"
        )


def _teacher_views(distilled: DistillationLoss | None) -> tuple[int, int] | None:
    """A distilled run's (views labelled, views the teacher labels differently from the truth); one device sync."""
    return None if distilled is None else distilled.teacher_views()


def _share(views: tuple[int, int]) -> float:
    seen, disagreeing = views
    return disagreeing / seen if seen else math.nan


def _history_row(step, budget: Budget, train_loss, val, optimizer, train_seconds, teacher_views=None) -> dict:
    row = {
        "step": step,
        "epoch": round(step * budget.batch_size / budget.train_images, 4),
        "images_seen": step * budget.batch_size,
        "train_loss": round(train_loss, 6),
        "val_loss": round(val["loss"], 6),
        "val_top1": round(val["top1"], 6),
        "lr": float(optimizer.param_groups[0]["lr"]),  # a device tensor in a captured step
    }
    if teacher_views is not None:  # distilled runs only; the share of all views so far, ending at metrics.json's
        row["teacher_view_disagreement"] = round(_share(teacher_views), 6)
    row["train_seconds"] = round(train_seconds, 3)  # the wall clock stays the last column
    return row


def _metrics(spec: RunSpec, budget: Budget, test, history, train_seconds, device, precision: str, compiled: bool) -> dict:
    last = history[-1]
    metrics = {
        "model": spec.model_name,
        "arch": spec.arch,
        "fraction": spec.fraction,
        "seed": spec.seed,
        "test_top1": round(test["top1"], 6),
        "test_loss": round(test["loss"], 6),
        "val_top1": last["val_top1"],
        "val_loss": last["val_loss"],
        "budget": budget.as_dict(),
        "params": spec.params,
        "forward_flops": spec.forward_flops,
        # Training FLOPs ≈ 3 × forward (backward ≈ 2 × forward); the teacher's forward is extra.
        "train_flops": 3 * spec.forward_flops * budget.images_seen,
        "teacher_flops": (spec.teacher_forward_flops or 0) * budget.images_seen,
        "train_seconds": round(train_seconds, 3),
        "throughput_images_per_s": round(budget.images_seen / max(train_seconds, 1e-9), 1),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "precision": precision,  # of the forward passes: "bf16" (autocast) or "fp32"
        "compiled": compiled,
        "torch": torch.__version__,
    }
    if "top1_cls" in test:
        metrics["test_top1_cls"] = round(test["top1_cls"], 6)
        metrics["test_top1_dist"] = round(test["top1_dist"], 6)
    if spec.distill is not None:
        metrics["distill"] = spec.as_dict()["distill"]
    if spec.budget_factor != 1.0:  # the budget check's longer runs; left out at 1, so other runs' files are unchanged
        metrics["budget_factor"] = spec.budget_factor
    return metrics


