"""One optimiser step of a cell's seeds as one program: K runs of one model, fraction and recipe, stacked.

A study cell is one model at one fraction over several seeds. Its runs have the same shapes, recipe, budget and
batch size; they differ in their subsets, batch orders, augmentation draws and initial weights. On a GPU one small
model does not fill the device, so the seeds train together: their parameters stacked along a new first dimension
(``torch.func.stack_module_state``), the forward ``vmap``-ed over it, each seed on its own batch. AdamW and SGD act
element by element (weight decay included), so one optimiser over the stack is K optimisers; gradient clipping is per
seed, over each seed's own slice. The seeds share no parameter, so the sum of their losses gives each seed the
gradient of its own loss.

Each seed's batch is the one :class:`study.train.step.TrainStep` gives that seed: its own device-resident split,
:class:`study.train.batches.BatchOrder` and :class:`study.train.augment.BatchAugment` (normalised with its own
subset's statistics), all drawn from ``(seed, step)``; the learning rate is the same function of the step for every
seed. A seed trained in a cell therefore equals the same seed trained alone up to floating-point rounding (a
batched matrix product adds in another order), which tests/cell/test_step.py measures. Dropout and stochastic depth
draw per seed under ``vmap(randomness="different")``, from another stream than a run trained alone: the study's
models use neither. A cell trains in float32: bf16 autocast under vmap failed in the backward of both the ViT and the
ResNet-8 on an H100 (docs/gpu/h100-2026-11-28/), so it is refused rather than tried.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from study.train.augment import BatchAugment
from study.train.batches import BatchOrder, DeviceSplit
from study.train.losses import DistillationLoss
from study.train.recipe import Recipe
from study.train.schedule import lr_at
from study.train.step import _NO_DECAY_NAMES, StepSpec, resolved_precision

# clip_grad_norm_'s epsilon: the scale is max_norm / (norm + 1e-6), at most 1.
_CLIP_EPS = 1e-6


class StackedModels:
    """K models of one architecture as stacked tensors: ``params[name]`` and ``buffers[name]`` are
    ``(K, *shape)``; BatchNorm's running statistics are stacked buffers, one set per seed, updated in place."""

    def __init__(self, models: list[nn.Module]):
        if not models:
            raise ValueError("a stack needs at least one model")
        params, buffers = stack_module_state(models)  # each value (K, ...), detached copies
        self.seeds = len(models)
        self.params = {n: p.detach().clone().requires_grad_() for n, p in params.items()}
        self.buffers = {n: b.clone() for n, b in buffers.items()}
        self.base = copy.deepcopy(models[0]).to("meta")  # the structure only: functional_call supplies the tensors

    def forward(self, x: torch.Tensor):
        """Seed k's model on seed k's batch: ``x`` (K, B, C, H, W) to logits (K, B, classes), or a tuple of such
        for a model with two heads."""
        def one(params: dict, buffers: dict, xk: torch.Tensor):
            return functional_call(self.base, (params, buffers), (xk,))
        return vmap(one, randomness="different")(self.params, self.buffers, x)

    def train(self, mode: bool = True) -> "StackedModels":
        self.base.train(mode)
        return self

    def seed_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Seed ``k``'s weights and buffers, as its model's ``state_dict`` names them."""
        return {**{n: p[k].detach() for n, p in self.params.items()}, **{n: b[k] for n, b in self.buffers.items()}}

    def model(self, k: int, like: nn.Module) -> nn.Module:
        """Seed ``k``'s weights in a copy of ``like``."""
        out = copy.deepcopy(like)
        out.load_state_dict(self.seed_state_dict(k))
        return out

    def state_dict(self) -> dict[str, dict[str, torch.Tensor]]:
        """Every seed's weights and buffers, stacked (K, ...): what a cell's resume state keeps."""
        return {"params": {n: p.detach() for n, p in self.params.items()}, "buffers": dict(self.buffers)}

    def load_state_dict(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        """Copy a :meth:`state_dict` in place (an optimiser over the stack keeps its tensors); the names and shapes
        must be this stack's, else ValueError and nothing is copied."""
        for kind, mine in (("params", self.params), ("buffers", self.buffers)):
            theirs = state.get(kind, {})
            if theirs.keys() != mine.keys() or any(theirs[n].shape != t.shape for n, t in mine.items()):
                raise ValueError(f"a stacked state whose {kind} are not this stack's (another model or seed count)")
        with torch.no_grad():
            for kind, mine in (("params", self.params), ("buffers", self.buffers)):
                for name, tensor in mine.items():
                    tensor.copy_(state[kind][name])


def stacked_optimizer(stack: StackedModels, recipe: Recipe, fused: bool, capturable: bool = False,
                      ) -> torch.optim.Optimizer:
    """The recipe's optimiser over the stacked parameters, with :func:`study.train.step.make_optimizer`'s
    weight-decay groups: a stacked parameter's own shape is all but its first dimension."""
    decay, no_decay = [], []
    for name, p in stack.params.items():
        (no_decay if p.ndim - 1 < 2 or name.split(".")[-1] in _NO_DECAY_NAMES else decay).append(p)
    groups = [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=recipe.lr, momentum=recipe.momentum, nesterov=True, fused=fused or None)
    return torch.optim.AdamW(groups, lr=recipe.lr, betas=(0.9, recipe.beta2), fused=fused or None,
                             capturable=capturable)


def clip_per_seed(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Each seed's gradients scaled to a total norm of at most ``max_norm``, as ``clip_grad_norm_`` scales one
    model's; returns the seeds' norms before clipping (K,)."""
    squares = torch.stack([g.float().flatten(1).pow(2).sum(1) for g in grads]).sum(0)  # (K,)
    norms = squares.sqrt()
    scale = (max_norm / (norms + _CLIP_EPS)).clamp(max=1.0)  # (K,)
    for g in grads:
        g.mul_(scale.view(-1, *([1] * (g.ndim - 1))).to(g.dtype))  # (K, 1, ..., 1) against (K, ...)
    return norms


def stack_inputs(xs: list[torch.Tensor], channels_last: bool) -> torch.Tensor:
    """The seeds' model inputs, each (B, C, H, W), as one (K, B, C, H, W) tensor; with ``channels_last`` each seed's
    slice keeps NHWC strides, as :func:`study.train.step.to_input` gives a CNN's batch."""
    if not channels_last:
        return torch.stack([x.contiguous() for x in xs])  # (K, B, C, H, W), contiguous
    nhwc = torch.stack([x.permute(0, 2, 3, 1) for x in xs])  # (K, B, H, W, C), contiguous
    return nhwc.permute(0, 1, 4, 2, 3)  # (K, B, C, H, W) view: each seed's (B, C, H, W) channels-last


def check_cell_specs(specs: list[StepSpec]) -> None:
    """ValueError, naming the fix, unless ``specs`` can train as one cell: seeds that share everything but their
    seed, eagerly, in float32. Checked before a cell writes anything."""
    if not specs:
        raise ValueError("a cell needs at least one seed")
    if len({replace(spec, seed=0) for spec in specs}) != 1:
        raise ValueError("a cell's seeds must share everything but their seed (recipe, steps, batch, device)")
    spec = specs[0]
    if spec.compile:
        raise ValueError("a cell's step runs eagerly: torch.compile of its vmap is not supported; set compile off")
    if resolved_precision(spec.device, spec.precision) == "bf16":
        raise ValueError("bf16 autocast under vmap failed in the backward of both the ViT and the ResNet-8 "
                         "(docs/gpu/h100-2026-11-28); train a cell in fp32 (train.precision: fp32)")


class CellStep:
    """One optimiser step of every seed of a cell, as a function of the step number.

    ``models``, ``loss_fns``, ``splits``, ``augments`` and ``specs`` are per seed, in one order; the specs must be
    equal but for their seeds. The models are stacked (copied): :meth:`seed_state_dict` gives each seed's weights
    back.
    A distilled student's loss holds its own seed's teacher, which scores that seed's batch outside the vmap.
    """

    def __init__(self, models: list[nn.Module], loss_fns: list[nn.Module], splits: list[DeviceSplit],
                 augments: list[BatchAugment], specs: list[StepSpec]) -> None:
        if not len(models) == len(loss_fns) == len(splits) == len(augments) == len(specs):
            raise ValueError("a cell needs one model, loss, split, augmentation and step spec per seed")
        check_cell_specs(specs)
        spec = specs[0]
        self.seeds = [s.seed for s in specs]
        self.loss_fns, self.splits, self.augments = loss_fns, splits, augments
        self.recipe, self.total_steps, self.device, self.channels_last = (spec.recipe, spec.total_steps, spec.device,
                                                                          spec.channels_last)
        self.stack = StackedModels(models)
        self.optimizer = stacked_optimizer(self.stack, spec.recipe, fused=spec.device.type == "cuda")
        self.precision = "fp32"
        self.orders = [BatchOrder(len(split), spec.batch_size, s.seed) for split, s in zip(splits, specs)]
        # On a GPU each seed's whole order lives on the device, as in TrainStep: indexing with host indices would
        # copy them from pageable memory and synchronise the stream every step.
        self.order_tables = ([order.table(spec.total_steps).to(spec.device) for order in self.orders]
                             if spec.device.type == "cuda" else None)  # each (steps, B)
        self.warmup_steps = math.ceil(spec.recipe.warmup * spec.total_steps)  # TrainStep's rule

    def batch(self, step: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Step ``step``'s inputs (K, B, C, H, W) and each seed's loss targets, as TrainStep draws them per seed."""
        xs, ys = [], []
        for k, (seed, order, split, augment) in enumerate(zip(self.seeds, self.orders, self.splits, self.augments)):
            idx = order.indices(step) if self.order_tables is None else self.order_tables[k][step]
            x, y = augment(split.images[idx], split.labels[idx], seed, step)
            xs.append(x)
            ys.append(y)
        return stack_inputs(xs, self.channels_last), ys

    def __call__(self, step: int) -> torch.Tensor:
        """Take optimiser step ``step`` of every seed; return their losses (K,), detached, on the device."""
        x, ys = self.batch(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(step, self.total_steps, self.recipe.lr, self.warmup_steps)
        # vmap has no batching rule for the fused attention kernels (flash, memory-efficient): the math kernel,
        # matrix products, is batched over the seeds.
        with sdpa_kernel([SDPBackend.MATH]):
            outputs = self.stack.forward(x)  # (K, B, classes), or a tuple of them
            losses = torch.stack([loss_fn(x[k], _seed_output(outputs, k), ys[k])
                                  for k, loss_fn in enumerate(self.loss_fns)])  # (K,)
        self.optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        if self.recipe.grad_clip > 0:
            clip_per_seed([p.grad for p in self.stack.params.values()], self.recipe.grad_clip)
        self.optimizer.step()
        return losses.detach()

    def seed_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Seed ``k``'s weights and buffers now (the k-th of the specs given)."""
        return self.stack.seed_state_dict(k)

    def state_dict(self) -> dict:
        """What resumes the cell exactly: the stacked weights and buffers, the optimiser's state and, for distilled
        seeds, each one's teacher-label counts. The step number and histories are the loop's."""
        views = [loss.teacher_views() if isinstance(loss, DistillationLoss) else None for loss in self.loss_fns]
        return {"stack": self.stack.state_dict(), "optimizer": self.optimizer.state_dict(), "teacher_views": views}

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict`; ValueError if it is another cell's (its stack does not fit)."""
        self.stack.load_state_dict(state["stack"])
        self.optimizer.load_state_dict(state["optimizer"])
        for loss, views in zip(self.loss_fns, state["teacher_views"]):
            if views is not None:
                loss.restore_teacher_views(*views)


def _seed_output(outputs, k: int):
    """Seed ``k``'s share of the stacked outputs: a tensor (B, classes) or a tuple of them."""
    return tuple(o[k] for o in outputs) if isinstance(outputs, tuple) else outputs[k]
