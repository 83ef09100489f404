"""A cell's seeds trained as one vmapped step end where each seed trained alone ends.

Three seeds of the default study's ViT, ResNet-8 (BatchNorm's running statistics included) and soft-distilled DeiT
(each seed with its own ResNet-8 teacher), at a small size, each seed on its own subset, batch order and
augmentation draws (crop and flip on), under the default recipes (AdamW with clipping and warmup, SGD with
Nesterov momentum): six steps of :class:`study.cell.step.CellStep` against six of
:class:`study.train.step.TrainStep` per seed.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from study.cell.step import CellStep, StackedModels, clip_per_seed, stack_inputs
from study.core.config import load_params
from study.models import build_model
from study.train.augment import Augmentation, BatchAugment
from study.train.batches import DeviceSplit, channel_stats
from study.train.losses import DistillationLoss, LabelLoss
from study.train.recipe import recipe_from_params
from study.train.step import StepSpec, TrainStep
from tests.conftest import ROOT

SEEDS, STEPS, BATCH, IMAGES, SIZE, CLASSES = (100, 101, 102), 6, 16, 40, 8, 10  # 40 images: steps cross epochs
SMALL = {"vit": dict(patch_size=2, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0),
         "deit": dict(patch_size=2, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0),
         "resnet": dict(width=8, stem_stride=1)}
AUGMENT = Augmentation(crop_padding=1, hflip=True)
CPU = torch.device("cpu")
# The tolerance: after six steps the largest difference of any weight or running statistic between a seed trained in
# its cell and alone was 3.2e-6 (ViT), 1.2e-6 (ResNet-8) and 2.9e-6 (DeiT) on an EPYC of family 23, with one thread
# and with two (`pytest -s` prints it): the rounding of batched against unbatched matrix products, magnified where
# AdamW divides by a near-zero second moment. 5e-5 is a fortieth of one AdamW step at the ViT's lr (2e-3); batches or
# augmentation draws crossed between seeds move weights by about the lr.
ATOL, RTOL = 5e-5, 1e-4


def _pool() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (200, SIZE, SIZE, 1), dtype=np.uint8), rng.integers(0, CLASSES, 200)


def _seed_data(seed: int):
    """Seed ``seed``'s subset of the pool, on the device, and its augmentation (its own normalisation)."""
    images, labels = _pool()
    idx = np.random.default_rng(seed).choice(len(labels), IMAGES, replace=False)
    mean, std = channel_stats(images[idx])
    augment = BatchAugment(AUGMENT, torch.tensor(mean), torch.tensor(std), CLASSES, (SIZE, SIZE))
    return DeviceSplit(images[idx], labels[idx], CPU), augment


def _built(name: str, seed: int):
    params = load_params(ROOT / "params.yaml")
    model_params = params.models[name]
    torch.manual_seed(seed)  # a seed's initial weights, as the stage draws them after seeding everything
    model = build_model(model_params.arch, CLASSES, SIZE, 1, **SMALL[name]).train()
    recipe, _ = recipe_from_params(model_params, params.train.augment)
    loss = LabelLoss(recipe.label_smoothing)
    if name == "deit":
        model.set_distilled_training(True)
        torch.manual_seed(seed + 1000)
        teacher = build_model("resnet8", CLASSES, SIZE, 1, **SMALL["resnet"])
        loss = DistillationLoss(loss, teacher, "soft", alpha=0.1, tau=3.0)
    spec = StepSpec(recipe, STEPS, BATCH, seed, CPU, channels_last=name == "resnet", compile=False, precision="fp32")
    return model, loss, spec


@pytest.mark.parametrize("name", ["vit", "resnet", "deit"])
def test_a_cells_seeds_end_where_each_seed_trained_alone_ends(name, one_thread):
    alone, losses_alone = {}, []
    models, losses, splits, augments, specs = [], [], [], [], []
    for seed in SEEDS:
        model, loss, spec = _built(name, seed)
        split, augment = _seed_data(seed)
        models.append(copy.deepcopy(model))
        losses.append(copy.deepcopy(loss))
        splits.append(split)
        augments.append(augment)
        specs.append(spec)
        step = TrainStep(model, loss, split, augment, spec)
        losses_alone.append(torch.stack([step(s) for s in range(STEPS)]))  # (steps,)
        alone[seed] = (model.state_dict(), loss)
    cell = CellStep(models, losses, splits, augments, specs)
    losses_cell = torch.stack([cell(s) for s in range(STEPS)], dim=1)  # (K, steps)

    torch.testing.assert_close(losses_cell, torch.stack(losses_alone), rtol=RTOL, atol=ATOL)
    worst = 0.0
    for k, seed in enumerate(SEEDS):
        expected, got = alone[seed][0], cell.seed_state_dict(k)
        assert expected.keys() == got.keys()
        for key in expected:  # BatchNorm's running statistics and batch counts included
            torch.testing.assert_close(got[key], expected[key], rtol=RTOL, atol=ATOL, msg=f"{name} {seed} {key}")
            worst = max(worst, float((got[key].double() - expected[key].double()).abs().max()))
        if name == "deit":  # the same teacher labels counted for the seed's views
            assert losses[k].teacher_views() == alone[seed][1].teacher_views()
    print(f"{name}: largest difference {worst:.2e}")
    first = next(iter(cell.stack.params.values()))  # the seeds trained apart: their weights differ
    assert not torch.equal(first[0], first[1])
    if name == "resnet":
        assert int(cell.seed_state_dict(0)["bn1.num_batches_tracked"]) == STEPS


def test_clipping_scales_each_seed_by_its_own_norm():
    grads = [torch.tensor([[3.0, 4.0], [0.3, 0.4]]), torch.tensor([[0.0], [0.0]])]  # seed 0 norm 5, seed 1 0.5
    norms = clip_per_seed(grads, max_norm=1.0)
    torch.testing.assert_close(norms, torch.tensor([5.0, 0.5]))
    torch.testing.assert_close(grads[0][0], torch.tensor([3.0, 4.0]) / (5.0 + 1e-6))  # clipped to norm 1
    torch.testing.assert_close(grads[0][1], torch.tensor([0.3, 0.4]))  # under the norm: unchanged


def test_channels_last_inputs_keep_each_seeds_strides():
    xs = [torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last) for _ in range(3)]
    x = stack_inputs(xs, channels_last=True)
    assert x.shape == (3, 2, 3, 4, 5) and x[1].is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(x[2], xs[2]) and stack_inputs(xs, channels_last=False).is_contiguous()


def test_a_cell_refuses_seeds_that_differ_in_more_than_their_seed():
    model, loss, spec = _built("vit", 100)
    split, augment = _seed_data(100)
    other = StepSpec(spec.recipe, STEPS + 1, BATCH, 101, CPU, False, False, "fp32")
    with pytest.raises(ValueError, match="share everything but their seed"):
        CellStep([model, copy.deepcopy(model)], [loss, loss], [split, split], [augment, augment], [spec, other])
    with pytest.raises(ValueError, match="at least one model"):
        StackedModels([])
    bf16 = StepSpec(spec.recipe, STEPS, BATCH, 100, CPU, False, False, "bf16")
    with pytest.raises(ValueError, match="train a cell in fp32"):
        CellStep([model], [loss], [split], [augment], [bf16])


def _cell(name: str) -> CellStep:
    parts = [(*_built(name, seed), *_seed_data(seed)) for seed in SEEDS]  # (model, loss, spec, split, augment)
    return CellStep(*([part[i] for part in parts] for i in (0, 1, 3, 4, 2)))


@pytest.mark.parametrize("name", ["resnet", "deit"])
def test_a_cell_stopped_and_restored_from_its_state_ends_with_the_same_bytes(name, one_thread, tmp_path):
    through = _cell(name)
    for step in range(STEPS):
        through(step)
    stopped = _cell(name)
    for step in range(STEPS // 2):
        stopped(step)
    torch.save(stopped.state_dict(), tmp_path / "cell.pt")
    del stopped
    resumed = _cell(name)  # rebuilt from the seeds, as a killed cell's stage rebuilds it
    resumed.load_state_dict(torch.load(tmp_path / "cell.pt", weights_only=True))
    for step in range(STEPS // 2, STEPS):
        resumed(step)
    for k in range(len(SEEDS)):
        a, b = through.seed_state_dict(k), resumed.seed_state_dict(k)
        assert all(torch.equal(a[key], b[key]) for key in a), f"{name} seed {SEEDS[k]}"
    if name == "deit":  # the teacher-label counts carried over, not restarted
        views = [[loss.teacher_views() for loss in cell.loss_fns] for cell in (resumed, through)]
        assert views[0] == views[1]
        assert resumed.loss_fns[0].teacher_views()[0] == STEPS * BATCH


def test_a_state_of_another_cell_is_refused_and_copies_nothing():
    cell, other = _cell("vit"), _cell("resnet")
    before = cell.seed_state_dict(0)
    before = {key: value.clone() for key, value in before.items()}
    with pytest.raises(ValueError, match="not this stack's"):
        cell.load_state_dict(other.state_dict())
    assert all(torch.equal(before[key], value) for key, value in cell.seed_state_dict(0).items())
