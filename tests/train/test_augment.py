"""Batched augmentation on the device: per-image parameters, determinism per (seed, step), label mixing,
the teacher seeing the student's batch, soft-target losses, and per-model params threaded into a run (what
augmentation costs is benchmarked: tests/benchmarks/test_study_vs_usual.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from torch import nn

from study.data import stage_prepare as prepare_stage
from study.data import stage_subsets as subsets_stage
from study.core.config import parse_params
from study.core.errors import StudyError
from study.presets import preset_params
from study.train.augment import Augmentation, BatchAugment, apply_per_row
from study.train.batches import BatchOrder, DeviceSplit, normalise
from study.train.recipe import Recipe
from study.train.step import StepSpec, TrainStep
from study.train.losses import DistillationLoss, LabelLoss
from study.train.stage import run as train_stage

ROOT = Path(__file__).resolve().parents[2]
CLASSES = 10
HEAVY = Augmentation(crop_padding=2, hflip=True, auto_augment="rand", rand_n=2, rand_m=9, erasing=0.5,
                     mixup_alpha=0.8, cutmix_alpha=1.0)
# Mean 0 and std 1 keep the pixels on the 0-1 scale, so a test can read them back as value / 255.
UNIT = (torch.zeros(1), torch.ones(1))


def _augment(settings: Augmentation, side: int = 8, mean_std=UNIT) -> BatchAugment:
    return BatchAugment(settings, *mean_std, CLASSES, (side, side))


def _pattern(batch: int, side: int = 8) -> torch.Tensor:
    """``batch`` copies of one image whose pixels are all different and non-zero: uint8 (B, H, W, 1)."""
    image = torch.arange(1, side * side + 1, dtype=torch.uint8).reshape(1, side, side, 1)
    return image.repeat(batch, 1, 1, 1)


def _labels(batch: int) -> torch.Tensor:
    return torch.arange(batch) % CLASSES


# --- per-image parameters -----------------------------------------------------------------------------


def test_no_augmentation_is_exactly_the_normalised_batch_and_the_labels():
    images = torch.randint(0, 256, (16, 8, 8, 3), dtype=torch.uint8)
    mean, std = torch.tensor([0.2, 0.5, 0.7]), torch.tensor([0.3, 0.2, 0.25])
    labels = _labels(16)
    state = torch.get_rng_state()
    x, targets = BatchAugment(Augmentation(), mean, std, CLASSES, (8, 8))(images, labels, seed=0, step=3)
    assert torch.equal(x, normalise(images, mean, std)) and x.stride() == normalise(images, mean, std).stride()
    assert targets is labels
    assert torch.equal(state, torch.get_rng_state())


def test_crop_offsets_and_flips_differ_within_a_batch_and_copy_pixels_exactly():
    images = _pattern(64)
    x, _ = _augment(Augmentation(crop_padding=2, hflip=True))(images, _labels(64), seed=0, step=0)
    padded = F.pad(images[0, :, :, 0].float() / 255.0, (2, 2, 2, 2))  # (12, 12), zeros around the image
    windows = {(dy, dx, flip): padded[dy : dy + 8, dx : dx + 8].flip(1) if flip else padded[dy : dy + 8, dx : dx + 8]
               for dy in range(5) for dx in range(5) for flip in (False, True)}
    found = []
    for row in x[:, 0]:  # (8, 8) each
        matches = [key for key, window in windows.items() if torch.equal(row, window)]
        assert matches, "every output is a padded window of the input, pixel for pixel"
        found.append(matches[0])
    assert len({(dy, dx) for dy, dx, _ in found}) > 5  # offsets drawn per image
    assert {flip for _, _, flip in found} == {False, True}  # flips drawn per image


def test_erasing_boxes_differ_within_a_batch_and_fill_the_channel_mean():
    images = torch.full((32, 8, 8, 1), 200, dtype=torch.uint8)
    mean, std = torch.tensor([0.5]), torch.tensor([0.25])
    x, _ = _augment(Augmentation(erasing=1.0), mean_std=(mean, std))(images, _labels(32), seed=0, step=0)
    kept = (200 / 255 - 0.5) / 0.25
    erased = x == 0  # normalised value 0 is the channel mean
    assert torch.all(erased | torch.isclose(x, torch.tensor(kept)))
    assert erased.flatten(1).any(1).all()  # every image lost a box (p = 1)
    assert len({tuple(mask.flatten().tolist()) for mask in erased}) > 10  # boxes drawn per image


def test_operations_are_routed_per_image_in_slot_order():
    class Stamp(nn.Module):  # x -> 10·x + (k + 1): the order of the stamps stays readable
        def __init__(self, k: int):
            super().__init__()
            self.k = k

        def forward(self, x):
            return 10 * x + self.k + 1

    choice = torch.tensor([[0, 1], [2, 0], [1, 2], [0, 1]])  # (B, slots)
    out = apply_per_row(torch.zeros(4, 1, 2, 2), [Stamp(k) for k in range(3)], choice)
    expected = torch.tensor([10 * (a + 1) + b + 1 for a, b in choice.tolist()], dtype=torch.float32)
    assert torch.equal(out, expected.view(4, 1, 1, 1).expand(4, 1, 2, 2))


@pytest.mark.parametrize("kind", ["trivial", "rand"])
def test_auto_augment_differs_within_a_batch_of_identical_images(kind):
    images = _pattern(32)
    x, _ = _augment(Augmentation(auto_augment=kind))(images, _labels(32), seed=0, step=0)
    assert x.shape == (32, 1, 8, 8) and torch.isfinite(x).all()
    assert len({tuple(row.flatten().tolist()) for row in x}) > 8


# --- determinism --------------------------------------------------------------------------------------


def test_a_seed_and_step_give_one_batch_and_another_step_another():
    images, labels = torch.randint(0, 256, (32, 8, 8, 1), dtype=torch.uint8), _labels(32)
    augment = _augment(HEAVY)
    x, t = augment(images, labels, seed=1, step=5)
    again_x, again_t = _augment(HEAVY)(images, labels, seed=1, step=5)  # a fresh object, as after a resume
    assert torch.equal(x, again_x) and torch.equal(t, again_t)
    for seed, step in ((1, 6), (2, 5)):
        other_x, other_t = augment(images, labels, seed=seed, step=step)
        assert not torch.equal(x, other_x) and not torch.equal(t, other_t)


def test_an_augmentation_call_leaves_the_global_rng_alone():
    images, labels = torch.randint(0, 256, (16, 8, 8, 1), dtype=torch.uint8), _labels(16)
    torch.manual_seed(123)
    expected = torch.rand(5)
    torch.manual_seed(123)
    _augment(HEAVY)(images, labels, seed=0, step=0)
    assert torch.equal(torch.rand(5), expected)


# --- Mixup and CutMix ---------------------------------------------------------------------------------


def test_mixup_targets_are_the_pixel_weights_of_the_two_images():
    batch = 16
    a = torch.tensor([10 + 15 * i for i in range(batch)])  # pixel (0, 0) of image i
    b = torch.tensor([i * i for i in range(batch)])  # pixel (0, 1): points (a, b) on a parabola, no three collinear
    images = torch.zeros(batch, 4, 4, 1, dtype=torch.uint8)
    images[:, 0, 0, 0], images[:, 0, 1, 0] = a.to(torch.uint8), b.to(torch.uint8)
    labels = _labels(batch)
    x, targets = _augment(Augmentation(mixup_alpha=0.8), side=4)(images, labels, seed=0, step=0)
    p, q = x[:, 0, 0, 0] * 255, x[:, 0, 0, 1] * 255  # the mixed pixels
    one_hot = F.one_hot(labels, CLASSES).float()
    mixed = 0
    for i in range(batch):
        expected = one_hot[i]
        for j in range(batch):  # the partner j and weight w with p = (1 − w)·a_i + w·a_j, q likewise
            if j == i:
                continue
            w = float((p[i] - a[i]) / (a[j] - a[i]))
            if 1e-6 < w <= 1 and abs(float(q[i] - ((1 - w) * b[i] + w * b[j]))) < 1e-3:
                expected, mixed = (1 - w) * one_hot[i] + w * one_hot[j], mixed + 1
        assert torch.allclose(targets[i], expected, atol=1e-5), i
    assert mixed > batch // 2


def test_cutmix_targets_are_the_area_shares_of_the_two_images():
    batch, side = 16, 8
    values = torch.tensor([10 + 15 * i for i in range(batch)], dtype=torch.uint8)
    images = values.view(batch, 1, 1, 1).expand(batch, side, side, 1).contiguous()  # image i is all values[i]
    labels = _labels(batch)
    x, targets = _augment(Augmentation(cutmix_alpha=1.0))(images, labels, seed=0, step=0)
    pixels = torch.round(x[:, 0] * 255).to(torch.uint8)  # (B, H, W)
    one_hot = F.one_hot(labels, CLASSES).float()
    by_value = {int(v): i for i, v in enumerate(values)}
    cut = 0
    for i in range(batch):
        present = pixels[i].unique().tolist()
        kept = float((pixels[i] == values[i]).float().mean())
        others = [by_value[v] for v in present if v != int(values[i])]
        assert len(others) <= 1  # one partner per image
        expected = one_hot[i] if not others else kept * one_hot[i] + (1 - kept) * one_hot[others[0]]
        cut += bool(others)
        assert torch.allclose(targets[i], expected, atol=1e-6), i
    assert cut > batch // 2


def test_unmixed_batches_get_one_hot_targets():
    images, labels = torch.randint(0, 256, (8, 8, 8, 1), dtype=torch.uint8), _labels(8)
    x, targets = _augment(Augmentation(mixup_alpha=1.0, cutmix_alpha=1.0, mix_prob=0.0))(images, labels, 0, 0)
    assert torch.equal(x, normalise(images, *UNIT)) and torch.equal(targets, F.one_hot(labels, CLASSES).float())


# --- the distillation teacher sees the student's batch --------------------------------------------------


class Recorder(nn.Module):
    """A linear model on 8×8×1 images that keeps every input it is called on; two heads for a student."""

    def __init__(self, heads: int):
        super().__init__()
        self.linear, self.heads, self.seen = nn.Linear(64, CLASSES * heads), heads, []

    def forward(self, x):
        self.seen.append(x.detach().clone())
        logits = self.linear(x.flatten(1))  # (B, C, H, W) -> (B, 64) -> (B, classes · heads)
        return tuple(logits.chunk(2, dim=1)) if self.heads == 2 else logits


def test_teacher_sees_exactly_the_students_augmented_batch():
    images, labels = torch.randint(0, 256, (32, 8, 8, 1), dtype=torch.uint8), _labels(32)
    student, teacher = Recorder(heads=2), Recorder(heads=1)
    loss_fn = DistillationLoss(LabelLoss(0.1), teacher, "hard", alpha=0.5, tau=3.0)
    recipe = Recipe("adamw", 1e-3, 0.05, 0.9, 0.999, 0.1, 1.0, 0.0)
    mean, std = torch.tensor([0.5]), torch.tensor([0.25])
    step = TrainStep(student, loss_fn, DeviceSplit(images.numpy(), labels.numpy(), torch.device("cpu")),
                     BatchAugment(HEAVY, mean, std, CLASSES, (8, 8)),
                     StepSpec(recipe, total_steps=2, batch_size=16, seed=0, device=torch.device("cpu"),
                              channels_last=False, compile=False, precision="fp32"))
    for s in range(2):
        assert torch.isfinite(step(s))
    plain = normalise(images[BatchOrder(32, 16, 0).indices(0)], mean, std)
    assert len(student.seen) == len(teacher.seen) == 2
    assert all(torch.equal(a, b) for a, b in zip(student.seen, teacher.seen))
    assert not torch.allclose(student.seen[0], plain)  # what they saw was augmented


# --- losses on soft targets -----------------------------------------------------------------------------


def test_label_loss_on_soft_targets_matches_hand_computation():
    torch.manual_seed(0)
    logits, eps = torch.randn(6, CLASSES), 0.1
    targets = torch.softmax(torch.randn(6, CLASSES), dim=1)
    smoothed = (1 - eps) * targets + eps / CLASSES
    hand = -(smoothed * torch.log_softmax(logits, dim=1)).sum(1).mean()
    assert torch.allclose(LabelLoss(eps)(None, logits, targets), hand, atol=1e-6)
    labels = torch.randint(0, CLASSES, (6,))  # one-hot rows give the loss of the class indices
    assert torch.allclose(LabelLoss(eps)(None, logits, F.one_hot(labels, CLASSES).float()),
                          LabelLoss(eps)(None, logits, labels), atol=1e-6)


def test_hard_distillation_on_mixed_targets_smooths_the_labels_only():
    torch.manual_seed(1)
    cls_logits, dist_logits, teacher_logits = (torch.randn(6, CLASSES) for _ in range(3))
    targets, eps = torch.softmax(torch.randn(6, CLASSES), dim=1), 0.2

    class Fixed(nn.Module):
        def forward(self, x):
            return teacher_logits

    loss = DistillationLoss(LabelLoss(eps), Fixed(), "hard", alpha=0.5, tau=3.0)(None, (cls_logits, dist_logits), targets)
    label_term = -(((1 - eps) * targets + eps / CLASSES) * torch.log_softmax(cls_logits, dim=1)).sum(1).mean()
    teacher_term = F.cross_entropy(dist_logits, teacher_logits.argmax(1))  # unsmoothed
    assert torch.allclose(loss, 0.5 * label_term + 0.5 * teacher_term, atol=1e-6)


# --- params ---------------------------------------------------------------------------------------------


SMOKE = preset_params(ROOT, "smoke")  # configs/smoke.yaml merged over params.yaml


def test_a_bad_augmentation_value_is_one_line_naming_the_key():
    raw = yaml.safe_load(yaml.safe_dump(SMOKE))
    raw["models"]["vit"]["augment"] = {"auto_augment": "auto"}
    with pytest.raises(StudyError) as err:
        parse_params(raw, source="params.yaml")
    message = str(err.value)
    assert "\n" not in message and "models.vit.augment.auto_augment" in message and "'auto'" in message


@pytest.mark.slow
def test_each_model_trains_with_its_own_augmentation_or_the_study_default(tmp_path):
    raw = yaml.safe_load(yaml.safe_dump(SMOKE))
    raw["budget"].update(epochs=0.05, min_steps=2)
    raw["models"]["resnet"]["augment"] = {"auto_augment": "trivial", "erasing": 0.25, "cutmix_alpha": 1.0}
    params = parse_params(raw)
    prepare_stage.run(params, tmp_path / "prepared")
    subsets_stage.run(params, tmp_path / "prepared", tmp_path / "subsets")
    recorded = {}
    for model in ("resnet", "vit"):
        out = tmp_path / model
        train_stage(params, model, 1.0, 0, tmp_path / "prepared", tmp_path / "subsets/s0/f1.0.npy",
                    tmp_path / "subsets/validation.npy", None, out / "model.pt", out / "metrics.json",
                    out / "history.csv", out / "resume.pt", out / "predictions.npy")
        recorded[model] = json.loads((out / "metrics.json").read_text())["augment"]
    assert recorded["resnet"] == {**Augmentation().as_dict(), "auto_augment": "trivial", "erasing": 0.25,
                                  "cutmix_alpha": 1.0}
    assert recorded["vit"] == {**Augmentation().as_dict(), **SMOKE["train"]["augment"]}  # train.augment
