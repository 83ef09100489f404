"""The steps of a training loop and its stops: one optimiser step at a time, a validation point every
``eval_every`` steps and at the last, a resume point every ``checkpoint_every`` steps before the last.

A run alone (:func:`study.train.loop.train_run`) and a cell of seeds (:func:`study.cell.loop.train_cell`) walk this
one loop with their own step, validation and resume point, so both stop at the same steps and time the same span:
``train_seconds`` counts the steps and leaves out validation and checkpoints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tqdm import tqdm


@dataclass
class Progress:
    """Where a loop is: restored from a resume point, advanced by :func:`walk`."""

    step: int
    loss_sum: torch.Tensor  # the training loss summed since the last validation point: () alone, (K,) for a cell
    loss_steps: int  # steps summed in loss_sum
    train_seconds: float


def walk(progress: Progress, steps: int, step_fn: Callable[[int], torch.Tensor], *, device: torch.device,
         eval_every: int, checkpoint_every: int, label: str, check_finite: Callable[[Progress], None],
         validate: Callable[[Progress], dict | None], checkpoint: Callable[[Progress], None]) -> None:
    """Take ``step_fn(step)`` until ``steps``; at each validation point call ``validate`` (its dict, if any, is shown
    beside the progress bar) and then restart the loss sum; at each resume point call ``checkpoint``."""
    bar = tqdm(total=steps, initial=progress.step, desc=label, unit="step", mininterval=2, disable=None)
    tic = time.perf_counter()
    while progress.step < steps:
        progress.loss_sum += step_fn(progress.step).float()
        progress.loss_steps += 1
        progress.step += 1
        bar.update()
        # On CPU a finiteness check costs nothing (no device to sync); on GPU it waits for the log points.
        if device.type != "cuda":
            check_finite(progress)
        if progress.step % eval_every == 0 or progress.step == steps:
            check_finite(progress)
            progress.train_seconds += sync_elapsed(tic, device)
            shown = validate(progress)
            progress.loss_sum.zero_()
            progress.loss_steps = 0
            if shown:
                bar.set_postfix(shown)
            tic = time.perf_counter()
        if progress.step % checkpoint_every == 0 and progress.step < steps:
            check_finite(progress)
            progress.train_seconds += sync_elapsed(tic, device)
            checkpoint(progress)
            tic = time.perf_counter()
    bar.close()


def sync_elapsed(tic: float, device: torch.device) -> float:
    """Seconds since ``tic``, once the device has finished what was queued."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - tic
