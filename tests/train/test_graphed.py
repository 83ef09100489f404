"""The captured training step (:mod:`study.train.graphed`): its body against the eager step, on any machine.

On a CPU the body runs eagerly, so its arithmetic (device-side batch order, lr from a device table, fused
optimiser with a tensor lr) is checked here against :class:`~study.train.step.TrainStep` without a GPU. The
capture itself needs CUDA: its test is skipped without one and runs on the device machine
(``pytest tests/train/test_graphed.py`` there).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from study.archs import traits
from study.models import build_model
from study.train.augment import Augmentation, BatchAugment
from study.train.batches import BatchOrder, DeviceSplit, channel_stats
from study.train.device_crop import crop_flip
from study.train.graphed import GraphedTrainStep, _TrainingState, wants_graph
from study.train.losses import LabelLoss
from study.train.step import StepSpec, TrainStep, make_optimizer
from tests.train.test_gpu_path import MODELS, learnable_data

CPU = torch.device("cpu")
BATCH, STEPS, IMAGES = 16, 12, 72  # 72 images: batches straddle epochs


def make_step(kind: str, cls: type, device: torch.device, augmentation: Augmentation = Augmentation(),
              precision: str = "fp32", steps: int = STEPS, label_smoothing: float = 0.1) -> TrainStep:
    arch, arch_args, recipe = MODELS[kind]
    recipe = dataclasses.replace(recipe, label_smoothing=label_smoothing)
    torch.manual_seed(0)
    model = build_model(arch, 4, 8, 1, **arch_args).to(device)
    channels_last = not traits(arch, arch_args).transformer
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    images, labels = learnable_data(IMAGES)
    mean, std = (torch.tensor(v, device=device) for v in channel_stats(images))
    augment = BatchAugment(augmentation, mean, std, 4, (8, 8))
    step = cls(model, LabelLoss(recipe.label_smoothing).to(device), DeviceSplit(images, labels, device), augment,
               StepSpec(recipe, steps, BATCH, 0, device, channels_last, compile=False, precision=precision))
    model.train()
    return step


def params_of(step: TrainStep) -> list[torch.Tensor]:
    return [p.detach().float().cpu().clone() for p in step.model.parameters()]


def relative_distance(a: TrainStep, b: TrainStep) -> float:
    flat = [torch.cat([p.flatten() for p in params_of(step)]) for step in (a, b)]
    return float((flat[0] - flat[1]).norm() / flat[0].norm())


def test_order_table_rows_are_each_steps_indices():
    order = BatchOrder(72, 16, seed=3)
    table = order.table(10)  # 160 positions: into a third epoch
    assert table.shape == (10, 16)
    for s in range(10):
        assert torch.equal(table[s], order.indices(s))


# Erasing is drawn on the host, so the batch is made eagerly and copied into the graph's inputs; crop and flip
# alone are drawn on the device (other draws than the eager step's: tested on their own below).
HOST_AUGMENTATION = Augmentation(crop_padding=1, hflip=True, erasing=0.5)


@pytest.mark.parametrize("kind", ["resnet", "vit"])  # SGD with momentum, AdamW with clipping
@pytest.mark.parametrize("augmented", [False, True], ids=["whole-step", "host-augment"])
def test_body_matches_the_eager_step(kind, augmented):
    augmentation = HOST_AUGMENTATION if augmented else Augmentation()
    eager = make_step(kind, TrainStep, CPU, augmentation)
    eager.optimizer = make_optimizer(eager.model, eager.recipe, fused=True)  # the body's kind, its lr a float
    body = make_step(kind, GraphedTrainStep, CPU, augmentation)
    assert body.inline_batch is not augmented
    for s in range(STEPS):
        a, b = eager(s), body.eager(s)
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (s, float(a), float(b))
    # The lr as a float32 tensor rounds differently from a Python float, and the clipping norm sums in another
    # order; AdamW's normalisation magnifies such rounding in weights whose gradients are near zero, so the
    # weights agree as a whole to 1e-4 (measured here: 5e-6 to 3e-5 for the ViT after 12 steps).
    assert relative_distance(eager, body) < 1e-4
    assert not body.device_crop
    assert float(body.lr) == pytest.approx(eager.optimizer.param_groups[0]["lr"], rel=1e-6)  # the last step's


def test_training_state_restores_weights_and_zeroes_new_optimiser_state():
    step = make_step("vit", GraphedTrainStep, CPU)
    before = params_of(step)
    saved = _TrainingState(step.model, step.loss_fn, step.optimizer)
    for s in range(3):
        step.eager(s)
    assert any(not torch.equal(p, q) for p, q in zip(before, params_of(step)))
    saved.restore(step.optimizer)
    assert all(torch.equal(p, q) for p, q in zip(before, params_of(step)))
    state = [v for st in step.optimizer.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
    assert state and all(not v.any() for v in state)
    # A restored AdamW takes the same first step as a fresh one.
    fresh = make_step("vit", GraphedTrainStep, CPU)
    assert torch.equal(step.eager(0), fresh.eager(0))
    assert all(torch.equal(p, q) for p, q in zip(params_of(step), params_of(fresh)))


def test_wants_graph_only_on_cuda():
    assert not wants_graph(CPU, "auto")
    assert not wants_graph(torch.device("cuda"), "off")
    assert wants_graph(torch.device("cuda"), "auto")
    with pytest.raises(ValueError, match="train.graph"):
        wants_graph(CPU, "on")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="capture needs CUDA")
@pytest.mark.parametrize("kind", ["resnet", "vit"])
@pytest.mark.parametrize("augmented", [False, True], ids=["whole-step", "host-augment"])
def test_captured_step_matches_the_eager_one_on_cuda(kind, augmented):
    """20 replayed steps against 20 eager ones from the same start, in bf16: within bf16's noise."""
    cuda = torch.device("cuda")
    augmentation = HOST_AUGMENTATION if augmented else Augmentation()
    eager = make_step(kind, TrainStep, cuda, augmentation, precision="bf16", steps=20)
    graphed = make_step(kind, GraphedTrainStep, cuda, augmentation, precision="bf16", steps=20)
    losses = [(float(eager(s)), float(graphed(s).clone())) for s in range(20)]
    assert graphed.graph is not None
    for s, (a, b) in enumerate(losses):
        assert abs(a - b) <= 0.05 * max(1.0, abs(a)), (s, a, b)
    assert relative_distance(eager, graphed) < 2e-2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="capture needs CUDA")
def test_captured_step_draws_crop_and_flip_on_the_device():
    """Crop and flip in the graph: other draws than the eager step's, so the losses agree only on average."""
    cuda = torch.device("cuda")
    augmentation = Augmentation(crop_padding=1, hflip=True)
    eager = make_step("resnet", TrainStep, cuda, augmentation, precision="bf16", steps=20)
    graphed = make_step("resnet", GraphedTrainStep, cuda, augmentation, precision="bf16", steps=20)
    assert graphed.device_crop and graphed.inline_batch
    a = torch.tensor([float(eager(s)) for s in range(20)])
    b = torch.tensor([float(graphed(s).clone()) for s in range(20)])
    assert torch.isfinite(b).all()
    assert abs(float(a.mean() - b.mean())) <= 0.1 * float(a.mean())


def padded(images: torch.Tensor, p: int) -> torch.Tensor:
    return torch.nn.functional.pad(images, (0, 0, p, p, p, p))  # (B, H + 2p, W + 2p, C)


def test_crop_is_a_window_of_the_zero_padded_image_at_every_offset():
    torch.manual_seed(0)
    images = torch.randint(1, 256, (400, 6, 5, 2), dtype=torch.uint8)  # no zeros: padding is recognisable
    out = crop_flip(images, padding=2, hflip=False)
    assert out.shape == images.shape and out.dtype == torch.uint8
    big, seen = padded(images, 2), set()
    for i in range(len(images)):
        hits = [(dy, dx) for dy in range(5) for dx in range(5) if torch.equal(big[i, dy:dy + 6, dx:dx + 5], out[i])]
        assert len(hits) == 1, i
        seen.add(hits[0])
    assert seen == {(dy, dx) for dy in range(5) for dx in range(5)}  # 400 draws over 25 offsets reach all


def test_flip_mirrors_about_half_the_rows():
    torch.manual_seed(0)
    images = torch.randint(0, 256, (200, 4, 7, 1), dtype=torch.uint8)
    out = crop_flip(images, padding=0, hflip=True)
    same = [torch.equal(o, i) for o, i in zip(out, images)]
    mirrored = [torch.equal(o, i.flip(1)) for o, i in zip(out, images)]
    assert all(s or m for s, m in zip(same, mirrored))
    assert 70 <= sum(mirrored) <= 130  # Binomial(200, 1/2): 5 standard deviations either side


def test_crop_and_flip_alone_go_in_the_graph():
    step = make_step("resnet", GraphedTrainStep, CPU, Augmentation(crop_padding=1, hflip=True))
    assert step.device_crop and step.inline_batch
    assert torch.isfinite(torch.stack([step.eager(s) for s in range(3)])).all()
    assert not Augmentation(crop_padding=1, erasing=0.1).crop_flip_only
    assert not Augmentation().crop_flip_only
