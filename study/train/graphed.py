"""The study's training step captured once as a CUDA graph and replayed (``train.graph: auto`` on CUDA).

Eager PyTorch launches each of a step's hundreds of kernels from Python, and on a fast GPU the kernels finish
before the host has launched the next ones: on an H200 the default study's ViT trained at 14,500 img/s eagerly
and 84,000 as one graph (docs/gpu/). A CUDA graph records the launches once and replays them with one call.

What the graph holds, as :class:`study.train.step.TrainStep` does it eagerly: the batch gather (the run's
whole order on the device, indexed by a device step counter), normalisation, the learning rate (a device
tensor read from a table of :func:`study.train.schedule.lr_at`), forward, loss, backward, clipping and the
fused optimiser. Crop and flip alone are drawn on the device inside the graph (:mod:`study.train.device_crop`);
other augmentation draws its parameters on the host (Kornia, :mod:`study.train.augment`) and cannot be
captured: then the batch is made eagerly and copied into the input buffers the graph reads.

Capture follows PyTorch's whole-network recipe (torch.cuda.graphs, "Whole-network capture"): a few eager steps
on a side stream first (cuDNN autotuning, ``torch.compile``, the optimiser's lazily created state), gradients
set to None so that backward allocates them in the graph's pool, then one captured step. The warm-up steps
change the weights, so every tensor of the training state is copied before and restored after: the first
replayed step starts from exactly the state the eager step would have. Autocast's weight cache is off under
capture, as that recipe requires.

:meth:`GraphedTrainStep.body` is the function that gets captured; on a CPU it runs eagerly, which is how the
tests check its arithmetic against the eager step without a GPU.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn as nn

from study.train.batches import normalise
from study.train.device_crop import crop_flip
from study.train.schedule import lr_at
from study.train.step import TrainStep, make_optimizer, to_input

# Eager steps before capture: the first runs the lazy initialisations, the others let autotuning settle.
_WARMUP_STEPS = 3


def wants_graph(device: torch.device, setting: str) -> bool:
    """Whether ``train.graph`` captures the step on ``device``: "auto" on CUDA only, "off" never."""
    if setting not in ("auto", "off"):
        raise ValueError(f"train.graph must be 'auto' or 'off', not {setting!r}")
    return setting == "auto" and device.type == "cuda"


class GraphedTrainStep(TrainStep):
    """:class:`TrainStep` as one CUDA graph: built at the first call (after a resume state is loaded), then
    replayed; it takes the same arguments and returns the same loss."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        device = self.device
        rates = [lr_at(s, self.total_steps, self.recipe.lr, self.warmup_steps) for s in range(self.total_steps)]
        self.lr_table = torch.tensor(rates, dtype=torch.float32, device=device)  # (steps,); fused kernels read float32
        self.lr = torch.zeros((), dtype=torch.float32, device=device)
        self.step_t = torch.zeros((), dtype=torch.int64, device=device)
        if self.order_table is None:  # on a CPU, where the tests run the body
            self.order_table = self.order.table(self.total_steps)  # (steps, B)
        # Fused kernels take the lr as a device tensor; AdamW must also be told it will be captured.
        self.optimizer = make_optimizer(self.model, self.recipe, fused=True, lr=self.lr,
                                        capturable=device.type == "cuda" and self.recipe.optimizer != "sgd")
        if self.precision == "bf16":
            self.autocast = torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)
        # Normalisation alone, or crop and flip drawn on the device: the gather and augmentation go in the graph.
        settings = self.augment.settings
        self.device_crop = settings.crop_flip_only
        self.inline_batch = not settings.active or self.device_crop
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_x = self.static_y = self.static_loss = None

    def body(self) -> torch.Tensor:
        """One step at the step counter ``step_t``: the captured function (eager on a CPU)."""
        if self.inline_batch:
            idx = self.order_table.index_select(0, self.step_t.view(1)).view(-1)  # (1, B) -> (B,)
            images, y = self.split.images[idx], self.split.labels[idx]  # (B, H, W, C) uint8, (B,)
            if self.device_crop:
                images = crop_flip(images, self.augment.settings.crop_padding, self.augment.settings.hflip)
            x = to_input(normalise(images, self.augment.mean, self.augment.std), self.channels_last)
        else:
            x, y = self.static_x, self.static_y
        self.lr.copy_(self.lr_table.index_select(0, self.step_t.view(1)).view(()))  # (1,) -> 0-d
        with self.autocast:
            loss = self.loss_fn(x, self.forward(x), y)
        loss.backward()
        if self.recipe.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.recipe.grad_clip, foreach=True)
        self.optimizer.step()
        return loss.detach()

    def eager(self, step: int) -> torch.Tensor:
        """The body run without a graph, at ``step``: the CPU's and the tests' way in."""
        self._feed(step)
        self.optimizer.zero_grad(set_to_none=True)
        return self.body()

    def __call__(self, step: int) -> torch.Tensor:
        if self.device.type != "cuda":
            return self.eager(step)
        if self.graph is None:
            self._capture(step)
        self._feed(step)
        self.graph.replay()
        return self.static_loss

    def _feed(self, step: int) -> None:
        """Point the step counter at ``step`` and, when augmentation runs on the host's draws, fill the inputs."""
        self.step_t.fill_(step)
        if not self.inline_batch:
            x, y = self.batch(step)
            if self.static_x is None:
                self.static_x, self.static_y = x.clone(), y.clone()  # clone keeps channels_last strides
            else:
                self.static_x.copy_(x)
                self.static_y.copy_(y)

    def _capture(self, step: int) -> None:
        for group in self.optimizer.param_groups:  # a loaded resume state brings its own lr tensor
            group["lr"] = self.lr
        saved = _TrainingState(self.model, self.loss_fn, self.optimizer)
        rng = torch.cuda.get_rng_state(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*capturable=True.*")  # eager steps of a capturable AdamW
            for _ in range(_WARMUP_STEPS):
                self.eager(step)
        torch.cuda.current_stream(self.device).wait_stream(side)
        saved.restore(self.optimizer)
        torch.cuda.set_rng_state(rng, self.device)
        self._feed(step)
        self.optimizer.zero_grad(set_to_none=True)  # backward allocates the gradients in the graph's pool
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self.body()


class _TrainingState:
    """Copies of every tensor a step changes: weights, buffers (BatchNorm's statistics, a distillation loss's
    counters) and the optimiser's state; :meth:`restore` writes them back in place, zeroing optimiser state
    that did not exist yet (a fresh AdamW or momentum buffer starts from zeros with step 0)."""

    def __init__(self, model: nn.Module, loss_fn: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        tensors = [*model.parameters(), *model.buffers(), *loss_fn.buffers()]
        self.copies = [(t, t.detach().clone()) for t in tensors]
        self.optimizer_copies = {id(t): t.detach().clone() for t in _optimizer_tensors(optimizer)}

    @torch.no_grad()
    def restore(self, optimizer: torch.optim.Optimizer) -> None:
        for tensor, copy in self.copies:
            tensor.copy_(copy)
        for tensor in _optimizer_tensors(optimizer):
            copy = self.optimizer_copies.get(id(tensor))
            tensor.copy_(copy) if copy is not None else tensor.zero_()


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
