"""The trainer: budget rule, losses, frozen teacher, NaN stop and determinism. A run killed and resumed ends with
the uninterrupted run's bytes: tests/faults/test_faults.py kills `study train` under `dvc repro` (SIGKILL) and in
the middle of a checkpoint write, and compares every result."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from study.data import stage_prepare as prepare_stage
from study.data import stage_subsets as subsets_stage
from study.core.config import parse_params
from study.core.errors import StudyError
from study.presets import preset_params
from study.train.batches import BatchOrder
from study.train.budget import plan_budget
from study.train.losses import DistillationLoss, LabelLoss
from study.train.schedule import lr_at
from study.train.stage import run as train_stage

ROOT = Path(__file__).resolve().parents[2]


# --- budget and schedule ------------------------------------------------------------------------------


def test_budget_epochs_convention_with_minimum_steps():
    full = plan_budget(54000, 54000, 128, 3.0, "epochs", 60)
    assert full.steps == math.ceil(3 * 54000 / 128) and full.images_seen == full.steps * 128
    small = plan_budget(540, 54000, 128, 3.0, "epochs", 60)
    assert small.steps == 60 and small.epochs == pytest.approx(60 * 128 / 540)


def test_budget_images_convention_sees_as_many_images_as_full_data():
    steps = {f: plan_budget(round(f * 54000), 54000, 128, 2.0, "images", 0).steps for f in (0.01, 0.1, 1.0)}
    assert len(set(steps.values())) == 1


def test_lr_schedule_is_warmup_then_cosine_to_zero():
    lrs = [lr_at(s, 100, 1.0, 10) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))
    assert lrs[-1] < 1e-3 and lr_at(55, 100, 1.0, 10) == pytest.approx(0.5)


def test_training_seeds_draw_different_data_orders():
    # torch keeps only a seed's low 32 bits: seeds packed into high bits once all gave one order.
    orders = [BatchOrder(n=100, batch_size=10, seed=seed).indices(0) for seed in range(3)]
    assert not torch.equal(orders[0], orders[1]) and not torch.equal(orders[1], orders[2])
    assert not torch.equal(BatchOrder(100, 10, 0).indices(0), BatchOrder(100, 10, 0).indices(10))  # epoch 2


def test_batch_order_is_a_function_of_the_step_and_covers_each_epoch():
    order = BatchOrder(n=10, batch_size=4, seed=3)
    first_epochs = torch.cat([order.indices(s) for s in range(5)])  # 20 draws = 2 epochs
    assert sorted(first_epochs[:10].tolist()) == list(range(10))
    assert sorted(first_epochs[10:].tolist()) == list(range(10))
    assert torch.equal(BatchOrder(10, 4, 3).indices(3), order.indices(3))


# --- losses -------------------------------------------------------------------------------------------


class FixedTeacher(torch.nn.Module):
    def __init__(self, logits):
        super().__init__()
        self.logits = logits
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, x):
        return self.logits * self.scale


def _log_softmax(z):
    z = np.asarray(z, dtype=float)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def test_hard_distillation_matches_hand_computation():
    cls = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0]])
    dist = torch.tensor([[0.0, 1.0, 0.0], [1.0, -1.0, 2.0]])
    teacher = torch.tensor([[0.1, 3.0, 0.0], [0.0, 0.0, 5.0]])  # argmax: 1, 2
    labels = torch.tensor([0, 1])
    loss = DistillationLoss(LabelLoss(), FixedTeacher(teacher), "hard", 0.5, 1.0)(None, (cls, dist), labels)
    ce_cls = -(_log_softmax(cls)[0, 0] + _log_softmax(cls)[1, 1]) / 2
    ce_dist = -(_log_softmax(dist)[0, 1] + _log_softmax(dist)[1, 2]) / 2
    assert loss.item() == pytest.approx(0.5 * ce_cls + 0.5 * ce_dist, rel=1e-6)


def test_soft_distillation_matches_hand_computation():
    cls = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0]])
    dist = torch.tensor([[0.0, 1.0, 0.0], [1.0, -1.0, 2.0]])
    teacher = torch.tensor([[0.1, 3.0, 0.0], [0.0, 0.0, 5.0]])
    labels = torch.tensor([0, 1])
    alpha, tau = 0.1, 3.0
    loss = DistillationLoss(LabelLoss(), FixedTeacher(teacher), "soft", alpha, tau)(None, (cls, dist), labels)
    ce = -(_log_softmax(cls)[0, 0] + _log_softmax(cls)[1, 1]) / 2
    log_p_t, log_p_s = _log_softmax(teacher.numpy() / tau), _log_softmax(dist.numpy() / tau)
    kl = (np.exp(log_p_t) * (log_p_t - log_p_s)).sum() / 2  # summed over classes, mean over the batch
    assert loss.item() == pytest.approx((1 - alpha) * ce + alpha * tau**2 * kl, rel=1e-6)


def test_label_smoothing_applies_to_true_labels_only():
    cls = torch.zeros(1, 4)
    teacher = torch.tensor([[0.0, 0.0, 9.0, 0.0]])
    smoothed = DistillationLoss(LabelLoss(0.2), FixedTeacher(teacher), "hard", 0.5, 1.0)
    plain = DistillationLoss(LabelLoss(0.0), FixedTeacher(teacher), "hard", 0.5, 1.0)
    dist = torch.tensor([[0.0, 0.0, 3.0, 0.0]])
    # With uniform class logits, smoothing does not change the class term; the distillation term is the same.
    assert smoothed(None, (cls, dist), torch.tensor([1])).item() == pytest.approx(plain(None, (cls, dist), torch.tensor([1])).item())
    dist_ce = torch.nn.functional.cross_entropy(dist, torch.tensor([2])).item()
    assert plain(None, (cls, dist), torch.tensor([1])).item() == pytest.approx(0.5 * math.log(4) + 0.5 * dist_ce)


def test_teacher_stays_frozen_in_eval_mode():
    teacher = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    student = torch.nn.Linear(4, 6)
    loss_fn = DistillationLoss(LabelLoss(), teacher, "hard", 0.5, 1.0).train()
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(8, 4)
        out = student(x)
        loss = loss_fn(x, (out[:, :3], out[:, 3:]), torch.randint(0, 3, (8,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert not teacher.training
    assert all(not p.requires_grad and p.grad is None for p in teacher.parameters())
    assert all(torch.equal(before[k], v) for k, v in teacher.state_dict().items())  # BN stats too


# --- whole runs on digits -----------------------------------------------------------------------------


SMOKE = preset_params(ROOT, "smoke")  # configs/smoke.yaml merged over params.yaml


def prepare_digits(folder: Path) -> Path:
    """The smoke preset's prepared digits and subsets in ``folder``, written by the real stage functions."""
    params = parse_params(SMOKE)
    prepare_stage.run(params, folder / "prepared")
    subsets_stage.run(params, folder / "prepared", folder / "subsets")
    return folder


@pytest.fixture(scope="module")
def digits_data(tmp_path_factory):
    """Prepared digits and its subsets, written by the real stage functions."""
    return prepare_digits(tmp_path_factory.mktemp("digits"))


def _write_params(folder: Path, **budget) -> Path:
    raw = yaml.safe_load(yaml.safe_dump(SMOKE))
    raw["budget"].update(budget)
    raw["train"]["checkpoint_every"] = 10
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _train_cmd(params: Path, data: Path, out: Path, model: str = "vit") -> list[str]:
    return [
        sys.executable, "-m", "study", "train", "--params", str(params), "--model", model, "--fraction", "1.0",
        "--seed", "0", "--prepared", str(data / "prepared"), "--subset", str(data / "subsets/s0/f1.0.npy"),
        "--validation", str(data / "subsets/validation.npy"), "--run", str(out),
    ]


def _accuracies(out: Path) -> dict:
    m = json.loads((out / "metrics.json").read_text())
    return {k: m[k] for k in ("test_top1", "test_loss", "val_top1", "val_loss")}


def _history_without_time(out: Path) -> list[str]:
    """history.csv minus its last column, the wall-clock seconds."""
    return [line.rsplit(",", 1)[0] for line in (out / "history.csv").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["vit", "resnet"])
def test_same_seed_gives_identical_metrics_across_processes(digits_data, tmp_path, model):
    params = _write_params(tmp_path, epochs=2.0, min_steps=0)
    runs = [tmp_path / "a", tmp_path / "b"]
    for out in runs:
        subprocess.run(_train_cmd(params, digits_data, out, model), check=True, capture_output=True)
    assert _accuracies(runs[0]) == _accuracies(runs[1])
    assert _history_without_time(runs[0]) == _history_without_time(runs[1])
    # byte-identical checkpoints, so DVC records the same hash in two clones
    assert (runs[0] / "model.pt").read_bytes() == (runs[1] / "model.pt").read_bytes()


def test_nan_loss_stops_the_run_with_a_clear_error(digits_data, tmp_path, monkeypatch):
    calls = {"n": 0}
    original = LabelLoss.forward

    def poisoned(self, inputs, outputs, labels):
        calls["n"] += 1
        loss = original(self, inputs, outputs, labels)
        return loss * float("nan") if calls["n"] >= 3 else loss

    monkeypatch.setattr(LabelLoss, "forward", poisoned)
    params = parse_params(SMOKE)
    out = tmp_path / "run"
    with pytest.raises(StudyError, match=r"NaN/inf by step 3; lower the model's lr"):
        train_stage(params, "resnet", 1.0, 0, digits_data / "prepared", digits_data / "subsets/s0/f1.0.npy",
                     digits_data / "subsets/validation.npy", None, out / "model.pt", out / "metrics.json",
                     out / "history.csv", out / "resume.pt", out / "predictions.npy")
    assert not (out / "metrics.json").exists() and not (out / "model.pt").exists()


@pytest.mark.slow
def test_distilled_student_refuses_a_teacher_of_another_fraction(digits_data, tmp_path):
    params = parse_params(SMOKE)
    teacher = tmp_path / "teacher"
    train_stage(params, "resnet", 0.5, 0, digits_data / "prepared", digits_data / "subsets/s0/f0.5.npy",
                 digits_data / "subsets/validation.npy", None, teacher / "model.pt", teacher / "metrics.json",
                 teacher / "history.csv", teacher / "resume.pt", teacher / "predictions.npy")
    out = tmp_path / "student"
    with pytest.raises(StudyError, match="same fraction and seed"):
        train_stage(params, "deit", 1.0, 0, digits_data / "prepared", digits_data / "subsets/s0/f1.0.npy",
                     digits_data / "subsets/validation.npy", teacher / "model.pt", out / "model.pt",
                     out / "metrics.json", out / "history.csv", out / "resume.pt", out / "predictions.npy")
