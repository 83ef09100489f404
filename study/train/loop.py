"""The one training loop: every model, every fraction, every seed, distilled or not.

A run is: build the model, take ``budget.steps`` optimiser steps over fixed-size batches of its training
subset, score the validation split now and then (history), checkpoint regularly so a killed run resumes
exactly, and finally score the test set once with the final weights (no test-set model selection).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm

from study.errors import StudyError
from study.io import atomic_path, write_json
from study.train.artifacts import CorruptCheckpoint, read_checkpoint, save_atomic, save_trained
from study.train.augment import Augmentation, BatchAugment
from study.train.batches import BatchOrder, DeviceSplit, channel_stats, normalise
from study.train.budget import Budget
from study.train.convergence import convergence
from study.train.schedule import lr_at
from study.train.spec import RunSpec

# Parameters exempt from weight decay besides biases and norm weights (all 1-D): ViT's learned tokens
# and position embeddings (as in timm's `no_weight_decay`).
_NO_DECAY_NAMES = ("cls_token", "dist_token", "pos_embed")
# Validation evaluations per run, evenly spaced: a coarse learning curve whose last two points span the last
# quarter of the steps, for the convergence check (study.train.convergence). Each is one validation pass.
_HISTORY_POINTS = 4
# Training images scored after training (the subset's first ones, unaugmented): the train-test gap and
# whether a teacher's labels on its own training data differ from the truth, at a bounded cost: 2,000 images
# give a standard error of at most 1.1 points, sqrt(0.25 / 2000).
_TRAIN_SCORE_IMAGES = 2000


@dataclass(frozen=True)
class Recipe:
    """The optimisation recipe of one model (mirrors study.config.ModelParams)."""

    optimizer: str
    lr: float
    weight_decay: float
    momentum: float
    beta2: float
    label_smoothing: float
    grad_clip: float
    warmup: float


@dataclass(frozen=True)
class RunPaths:
    checkpoint: Path  # final weights (model.pt)
    metrics: Path  # metrics.json
    history: Path  # history.csv, one row per validation point
    resume: Path  # resume state, rewritten every `checkpoint_every` steps
    predictions: Path  # predictions.npy: test-set argmax, int16 (rows, N); row 0 the model's, then each head's
    initial: Path | None = None  # init.pt: the weights before the first step (the attention analysis's baseline)


def make_optimizer(model: nn.Module, recipe: Recipe, fused: bool) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or name.split(".")[-1] in _NO_DECAY_NAMES else decay).append(p)
    groups = [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=recipe.lr, momentum=recipe.momentum, nesterov=True, fused=fused or None)
    return torch.optim.AdamW(groups, lr=recipe.lr, betas=(0.9, recipe.beta2), fused=fused or None)


@torch.no_grad()
def evaluate(
    model: nn.Module, split: DeviceSplit, mean: torch.Tensor, std: torch.Tensor, batch_size: int,
    channels_last: bool, autocast: contextlib.AbstractContextManager, predictions: list | None = None,
) -> dict[str, float]:
    """Loss and top-1 on a split; for a two-head model also each head's top-1 alone.

    ``predictions``, if given, receives per batch the argmax rows ``(1 + heads, B)``: the model's prediction,
    then each head's for a two-head model.
    """
    was_training = model.training
    model.eval()
    totals: dict[str, torch.Tensor] = {}

    def add(key: str, value: torch.Tensor) -> None:
        totals[key] = totals.get(key, 0) + value

    for start in range(0, len(split), batch_size):
        x = _to_input(normalise(split.images[start : start + batch_size], mean, std), channels_last)
        y = split.labels[start : start + batch_size]
        with autocast:
            heads = model.forward_heads(x) if hasattr(model, "forward_heads") else (model(x),)
        heads = [h.float() for h in heads]
        logits = sum(heads) / len(heads)  # DeiT's inference: the mean of the two heads' logits
        add("loss", F.cross_entropy(logits, y, reduction="sum"))
        add("top1", (logits.argmax(1) == y).sum())
        if len(heads) == 2:
            add("top1_cls", (heads[0].argmax(1) == y).sum())
            add("top1_dist", (heads[1].argmax(1) == y).sum())
        if predictions is not None:
            rows = [logits] + (heads if len(heads) == 2 else [])
            predictions.append(torch.stack([r.argmax(1) for r in rows]))  # (1 + heads, B)
    model.train(was_training)
    return {k: float(v) / len(split) for k, v in totals.items()}


def _to_input(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    return x.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def resolved_precision(device: torch.device, precision: str) -> str:
    """``train.precision`` on ``device``: "bf16" or "fp32".

    ``auto`` autocasts on GPU only: CPU bf16 kernels are slower than float32 on most CPUs and would change
    the numbers of the reference float32 path; ``bf16`` forces autocast on CPU too (the CI test of the GPU path).
    """
    if precision not in ("auto", "bf16", "fp32"):
        raise ValueError(f"precision must be 'auto', 'bf16' or 'fp32', not {precision!r}")
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


def autocast_for(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """The context every forward pass runs in: bf16 autocast on ``device``'s type, or nothing (float32)."""
    if resolved_precision(device, precision) == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


class TrainStep:
    """One optimiser step of the study, as a function of the step number: the whole hot path.

    Batch ``step`` is gathered from the device-resident split, augmented and normalised there by
    ``augment`` (which also turns the labels into the loss's targets: soft ones under Mixup/CutMix), the lr
    set from the schedule, then forward (under :func:`autocast_for`), loss, backward, optional gradient
    clipping and the optimiser update. No host sync happens inside. ``train_run`` calls it, and so does
    ``study bench``, so the benchmark times exactly the step that trains the study's models.
    """

    def __init__(self, model: nn.Module, loss_fn: nn.Module, recipe: Recipe, split: DeviceSplit,
                 augment: BatchAugment, total_steps: int, batch_size: int, seed: int, device: torch.device,
                 channels_last: bool, compile_model: bool, precision: str) -> None:
        on_gpu = device.type == "cuda"
        self.model, self.loss_fn, self.recipe, self.split = model, loss_fn, recipe, split
        self.augment, self.total_steps, self.seed = augment, total_steps, seed
        self.device, self.channels_last = device, channels_last
        self.optimizer = make_optimizer(model, recipe, fused=on_gpu)
        self.forward = torch.compile(model) if compile_model else model
        self.compiled = compile_model
        self.precision = resolved_precision(device, precision)  # "bf16" or "fp32", as recorded in metrics
        self.autocast = autocast_for(device, precision)
        self.order = BatchOrder(len(split), batch_size, seed)
        self.warmup_steps = math.ceil(recipe.warmup * total_steps)

    def __call__(self, step: int) -> torch.Tensor:
        """Take optimiser step ``step``; return its loss (a detached scalar on the device)."""
        idx = self.order.indices(step).to(self.device)
        x, y = self.augment(self.split.images[idx], self.split.labels[idx], self.seed, step)
        x = _to_input(x, self.channels_last)  # (B, C, H, W); y: labels (B,) or soft targets (B, classes)
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(step, self.total_steps, self.recipe.lr, self.warmup_steps)
        with self.autocast:
            loss = self.loss_fn(x, self.forward(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.recipe.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.recipe.grad_clip)
        self.optimizer.step()
        return loss.detach()


def run_fingerprint(**parts) -> str:
    """A digest of everything that determines a run; a resume state from other settings is ignored."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def train_run(
    *,
    model: nn.Module,
    spec: RunSpec,
    recipe: Recipe,
    budget: Budget,
    train: tuple[np.ndarray, np.ndarray],
    validation: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    seed: int,
    augmentation: Augmentation,
    device: torch.device,
    loss_fn: nn.Module,
    channels_last: bool,
    compile_model: bool,
    precision: str,
    eval_batch_size: int,
    checkpoint_every: int,
    fingerprint: str,
    paths: RunPaths,
    label: str,
) -> dict:
    """Train ``model`` for ``budget.steps`` steps and write the run's files; return its metrics."""
    on_gpu = device.type == "cuda"
    mean_list, std_list = channel_stats(train[0])
    mean = torch.tensor(mean_list, device=device)
    std = torch.tensor(std_list, device=device)
    spec = spec.with_normalisation(mean_list, std_list)
    if paths.initial is not None:  # before any step (a resumed run rebuilt the same weights from its seed)
        save_trained(paths.initial, model, spec)
    train_split, val_split, test_split = (DeviceSplit(*arrays, device) for arrays in (train, validation, test))

    model = model.to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    loss_fn = loss_fn.to(device)
    image_size = tuple(train[0].shape[1:3])  # (H, W) of the (N, H, W, C) images
    augment = BatchAugment(augmentation, mean, std, spec.num_classes, image_size)
    train_step = TrainStep(model, loss_fn, recipe, train_split, augment, budget.steps, budget.batch_size, seed,
                           device, channels_last, compile_model, precision)
    optimizer, autocast = train_step.optimizer, train_step.autocast
    eval_every = math.ceil(budget.steps / _HISTORY_POINTS)

    state = _load_resume(paths.resume, fingerprint, model, optimizer, device)
    step, history = state["step"], state["history"]
    loss_sum = torch.tensor(state["loss_sum"], device=device)
    loss_steps, train_seconds = state["loss_steps"], state["train_seconds"]
    if step:
        print(f"{label}: resuming at step {step}/{budget.steps}")

    model.train()
    loss_fn.train()
    progress = tqdm(total=budget.steps, initial=step, desc=label, unit="step", mininterval=2, disable=None)
    tic = time.perf_counter()
    while step < budget.steps:
        loss_sum += train_step(step).float()
        loss_steps += 1
        step += 1
        progress.update()
        # On CPU a finiteness check costs nothing (no device to sync); on GPU it waits for the log points.
        if not on_gpu:
            _check_finite(loss_sum, step, label)
        if step % eval_every == 0 or step == budget.steps:
            _check_finite(loss_sum, step, label)
            train_seconds += _sync_elapsed(tic, device)
            val = evaluate(model, val_split, mean, std, eval_batch_size, channels_last, autocast)
            history.append(_history_row(step, budget, float(loss_sum) / loss_steps, val, optimizer, train_seconds))
            loss_sum.zero_()
            loss_steps = 0
            progress.set_postfix(val_top1=f"{val['top1']:.3f}")
            tic = time.perf_counter()
        if step % checkpoint_every == 0 and step < budget.steps:
            _check_finite(loss_sum, step, label)
            train_seconds += _sync_elapsed(tic, device)
            _save_resume(paths.resume, fingerprint, model, optimizer, step, history, loss_sum, loss_steps, train_seconds)
            tic = time.perf_counter()
    progress.close()

    predictions: list[torch.Tensor] = []
    test_scores = evaluate(model, test_split, mean, std, eval_batch_size, channels_last, autocast, predictions)
    scored = DeviceSplit(train[0][:_TRAIN_SCORE_IMAGES], train[1][:_TRAIN_SCORE_IMAGES], device)
    train_scores = evaluate(model, scored, mean, std, eval_batch_size, channels_last, autocast)
    save_trained(paths.checkpoint, model, spec)
    with atomic_path(paths.predictions) as tmp, tmp.open("wb") as file:
        np.save(file, torch.cat(predictions, dim=1).to(torch.int16).cpu().numpy())  # (1 + heads, N)
    with atomic_path(paths.history) as tmp:
        pd.DataFrame(history).to_csv(tmp, index=False)
    metrics = _metrics(spec, budget, test_scores, history, train_seconds, device,
                       train_step.precision, train_step.compiled)
    metrics["train_top1"] = round(train_scores["top1"], 6)  # on the subset's first images, unaugmented
    metrics["train_scored_images"] = len(scored)
    metrics["augment"] = augmentation.as_dict()
    metrics["convergence"] = convergence(history)
    write_json(paths.metrics, metrics)
    # The resume state now equals the final model; keeping it would let a rerun with the same settings
    # skip training, but DVC reruns a stage only when something changed, so it is dropped to save space.
    _save_resume(paths.resume, "complete", None, None, step, history, loss_sum, 0, train_seconds)
    return metrics


def _sync_elapsed(tic: float, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - tic


def _check_finite(loss_sum: torch.Tensor, step: int, label: str) -> None:
    if not torch.isfinite(loss_sum):
        raise StudyError(
            f"{label}: training loss became NaN/inf by step {step}; lower the model's lr or set grad_clip"
        )


def _history_row(step, budget: Budget, train_loss, val, optimizer, train_seconds) -> dict:
    return {
        "step": step,
        "epoch": round(step * budget.batch_size / budget.train_images, 4),
        "images_seen": step * budget.batch_size,
        "train_loss": round(train_loss, 6),
        "val_loss": round(val["loss"], 6),
        "val_top1": round(val["top1"], 6),
        "lr": optimizer.param_groups[0]["lr"],
        "train_seconds": round(train_seconds, 3),
    }


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
    return metrics


def _save_resume(path, fingerprint, model, optimizer, step, history, loss_sum, loss_steps, train_seconds) -> None:
    state = {
        "fingerprint": fingerprint,
        "step": step,
        "history": history,
        "loss_sum": float(loss_sum),
        "loss_steps": loss_steps,
        "train_seconds": train_seconds,
        "torch_rng": torch.get_rng_state(),
    }
    if model is not None:
        state["model"] = model.state_dict()
        state["optimizer"] = optimizer.state_dict()
    save_atomic(state, path)


# The resume state's scalars and their types, as _save_resume writes them.
_RESUME_FIELDS = {"step": int, "history": list, "loss_sum": float, "loss_steps": int, "train_seconds": float}


def _load_resume(path: Path, fingerprint: str, model, optimizer, device) -> dict:
    """The state saved at ``path`` by a run with the same ``fingerprint``, restored into ``model``,
    ``optimizer`` and torch's RNG; otherwise a fresh start. A damaged or malformed file is discarded with a
    message, never trusted: it is read with ``weights_only`` (no code runs) after a CRC check, and a state
    that does not fit the model leaves the model and optimizer as they were."""
    fresh = {"step": 0, "history": [], "loss_sum": 0.0, "loss_steps": 0, "train_seconds": 0.0}
    if not path.is_file():
        return fresh
    try:
        state = read_checkpoint(path, device)
    except CorruptCheckpoint as exc:
        return _discard_resume(path, str(exc), fresh)
    if not isinstance(state, dict) or state.get("fingerprint") != fingerprint or "model" not in state:
        return fresh  # another run's state, or a finished one's: nothing to resume
    wrong = [k for k, kind in _RESUME_FIELDS.items() if not isinstance(state.get(k), kind)]
    if wrong:
        return _discard_resume(path, f"missing or mistyped {', '.join(wrong)}", fresh)
    model_before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer_before = copy.deepcopy(optimizer.state_dict())
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        model.load_state_dict(model_before)  # a failed load may have copied some tensors already
        optimizer.load_state_dict(optimizer_before)
        return _discard_resume(path, f"it does not fit this model: {' '.join(str(exc).split())[:160]}", fresh)
    return state


def _discard_resume(path: Path, reason: str, fresh: dict) -> dict:
    print(f"{path}: unreadable resume state ({reason}); discarding it and starting from scratch")
    return fresh
