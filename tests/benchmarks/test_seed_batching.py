"""Seeds vmapped into one step train exactly as the same seeds trained one model at a time."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from benchmarks.seed_batching import bench_seed_batching, seed_batches, stacked_step
from benchmarks.workload import CNN_RECIPE, VIT_RECIPE, BenchModel, Shape
from study.cell.step import StackedModels
from study.models import build_model
from study.train.losses import LabelLoss
from study.train.step import make_optimizer

SHAPE = Shape(image_size=8, in_chans=1, num_classes=10)
ARCHS = {"vit": ("vit", dict(patch_size=2, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0), VIT_RECIPE),
         "resnet": ("resnet8", dict(width=8, stem_stride=1), CNN_RECIPE)}


def _separate_steps(model: nn.Module, recipe, x: torch.Tensor, y: torch.Tensor, steps: int) -> nn.Module:
    """``steps`` textbook optimiser steps of one model on one fixed batch, as study.train.step makes them."""
    optimizer = make_optimizer(model, recipe, fused=False)
    loss_fn = LabelLoss(recipe.label_smoothing)
    for _ in range(steps):
        loss = loss_fn(x, model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if recipe.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
    return model


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_three_vmapped_seeds_equal_three_models_trained_apart(name):
    arch, args, recipe = ARCHS[name]
    torch.manual_seed(0)
    models = [build_model(arch, SHAPE.num_classes, SHAPE.image_size, SHAPE.in_chans, **args).train()
              for _ in range(3)]
    stack = StackedModels([copy.deepcopy(m) for m in models])
    x, y = seed_batches(3, 16, SHAPE, torch.device("cpu"), channels_last=False)  # (3, 16, 1, 8, 8), (3, 16)
    step = stacked_step(stack, LabelLoss(recipe.label_smoothing), recipe, x, y, torch.device("cpu"), "fp32")
    for _ in range(4):
        step()
    for k, model in enumerate(models):
        apart = _separate_steps(model, recipe, x[k], y[k], 4).state_dict()
        together = stack.model(k, model).state_dict()
        assert apart.keys() == together.keys()
        for key in apart:  # BatchNorm's running statistics included
            # atol: AdamW's update m/sqrt(v) magnifies a rounding difference where a weight's gradient is near 0.
            # On a Zen 3 (AVX2) one ViT weight of 512 ended 1.06e-5 apart after 4 steps (within 1e-5 with AVX-512).
            # 5e-5 is a twentieth of one step's largest update (lr 1e-3); batches crossed between seeds would move
            # weights by about the lr per step.
            torch.testing.assert_close(together[key], apart[key], rtol=1e-4, atol=5e-5, msg=f"{name} seed {k} {key}")
    # The seeds did train apart: their weights differ from one another.
    first = next(iter(stack.params.values()))
    assert not torch.equal(first[0], first[1])


def test_the_benchmark_table_has_a_row_per_model_and_seed_count_on_cpu():
    models = [BenchModel(n, a, args, recipe) for n, (a, args, recipe) in ARCHS.items()]
    table = bench_seed_batching(models, SHAPE, seeds=(1, 2), batch_size=8, steps=2, warmup_steps=1, repeats=1,
                                device=torch.device("cpu"), precision="fp32")
    assert (table["error"] == "").all(), table["error"].tolist()
    assert sorted(zip(table["model"], table["seeds"])) == [("resnet", 1), ("resnet", 2), ("vit", 1), ("vit", 2)]
    assert (table["images_per_s"] > 0).all()
    assert table.loc[table["seeds"] == 1, "vs_one_seed"].eq(1.0).all()
