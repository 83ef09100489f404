"""The GPU code path, run on CPU as far as it goes: ``torch.compile`` on and bf16 autocast forced.

No GPU is needed: ``train.precision: bf16`` autocasts on CPU too, so the dtypes, the compiled graphs and
the checkpoint round trip of a GPU run are exercised here; only CUDA kernels, fused optimisers and speed
are not. Each model (ViT, DeiT distilled from a ResNet, ResNet) takes a few steps of the real
:class:`~study.train.step.TrainStep` on tiny learnable data; compilation (the slow part on 2 cores) is
paid once per model in a module fixture that the tests read.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torch._dynamo.utils
import yaml
from torch import nn

from study.core.cli import main
from study.core.config import parse_params
from study.core.errors import StudyError
from study.presets import preset_params
from study.archs import traits
from study.models import build_model
from study.train.artifacts import load_trained, save_trained
from study.train.spec import RunSpec
from study.train.augment import Augmentation, BatchAugment
from study.train.batches import DeviceSplit, channel_stats, normalise
from study.train.budget import Budget
from study.train.loop import RunData, RunPaths, TrainSpec, train_run
from study.train.recipe import Recipe
from study.train.step import StepSpec, TrainStep, autocast_for, resolved_precision
from study.train.losses import DistillationLoss, LabelLoss

ROOT = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")
SIDE, CHANNELS, CLASSES = 8, 1, 4
BATCH, STEPS, IMAGES = 16, 12, 64
TINY_VIT = {"patch_size": 4, "embed_dim": 32, "depth": 2, "num_heads": 2, "mlp_ratio": 2.0}
# model -> (arch, arch_args, recipe); warmup makes the lr change every early step, grad_clip is the ViTs'.
MODELS = {
    "resnet": ("resnet8", {"width": 8}, Recipe("sgd", 0.05, 5e-4, 0.9, 0.999, 0.0, 0.0, 0.2)),
    "vit": ("vit", TINY_VIT, Recipe("adamw", 1e-2, 0.05, 0.9, 0.999, 0.0, 1.0, 0.2)),
    "deit": ("deit", TINY_VIT, Recipe("adamw", 1e-2, 0.05, 0.9, 0.999, 0.0, 1.0, 0.2)),
}


def learnable_data(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images (N, H, W, C) of noise where class k has rows 2k and 2k+1 bright: easy to learn."""
    rng = np.random.default_rng(seed)
    labels = np.arange(count) % CLASSES
    images = rng.normal(60, 30, size=(count, SIDE, SIDE, CHANNELS))
    for k in range(CLASSES):
        images[labels == k, 2 * k : 2 * k + 2] += 140  # rows 2k, 2k+1 of class k's images
    return np.clip(images, 0, 255).astype(np.uint8), labels.astype(np.int64)


class DtypeProbe(nn.Module):
    """The training loss, noting the dtype of the logits it is handed (the compiled forward's output)."""

    def __init__(self, loss: nn.Module):
        super().__init__()
        self.loss, self.dtypes = loss, set()

    def forward(self, inputs, outputs, labels):
        self.dtypes.update(o.dtype for o in (outputs if isinstance(outputs, tuple) else (outputs,)))
        return self.loss(inputs, outputs, labels)


@dataclass
class Run:
    model: nn.Module
    step: TrainStep
    losses: list[float]
    logit_dtypes: set
    first_step_graphs: int  # graphs dynamo compiled during step 0
    later_graphs: int  # graphs compiled during every later step
    checkpoint: Path


def _graphs() -> int:
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _train(name: str, folder: Path, teacher: Path | None) -> Run:
    arch, arch_args, recipe = MODELS[name]
    torch.manual_seed(0)
    model = build_model(arch, CLASSES, SIDE, CHANNELS, **arch_args)
    loss: nn.Module = LabelLoss()
    if teacher is not None:
        model.set_distilled_training(True)
        teacher_model, _ = load_trained(teacher)  # as the distill stage loads its teacher
        loss = DistillationLoss(loss, teacher_model, "hard", 0.5, 1.0)
    probe = DtypeProbe(loss)
    images, labels = learnable_data(IMAGES)
    mean, std = (torch.tensor(v) for v in channel_stats(images))
    channels_last = not traits(arch, arch_args).transformer  # as the train stage chooses
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    augment = BatchAugment(Augmentation(), mean, std, CLASSES, (SIDE, SIDE))  # normalisation only
    step = TrainStep(model, probe, DeviceSplit(images, labels, CPU), augment,
                     StepSpec(recipe, STEPS, BATCH, 0, CPU, channels_last, compile=True, precision="bf16"))
    model.train()
    probe.train()
    before = _graphs()
    losses = [float(step(0))]
    after_first = _graphs()
    # From step 1 on, a recompilation (a guard failing on the lr, the step number, ...) raises instead.
    with torch.compiler.set_stance("fail_on_recompile"):
        losses += [float(step(s)) for s in range(1, STEPS)]
    checkpoint = folder / name / "model.pt"
    spec = RunSpec(model_name=name, arch=arch, arch_args=arch_args, num_classes=CLASSES, image_size=SIDE,
                   in_chans=CHANNELS, fraction=1.0, seed=0, params=0, forward_flops=0)
    save_trained(checkpoint, model, spec)
    return Run(model, step, losses, probe.dtypes, after_first - before, _graphs() - after_first, checkpoint)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    """The three models trained compiled under bf16; the ResNet first, as the DeiT's teacher."""
    folder = tmp_path_factory.mktemp("gpu_path")
    torch._dynamo.reset()
    trained = {"resnet": _train("resnet", folder, None)}
    trained["vit"] = _train("vit", folder, None)
    trained["deit"] = _train("deit", folder, trained["resnet"].checkpoint)
    return trained


@pytest.mark.slow  # the `runs` fixture compiles three models: 101-106 s on the 2-core CPU, empty compile cache
@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_bf16_training_is_finite_and_the_loss_falls(runs, name):
    run = runs[name]
    assert isinstance(run.step.forward, torch._dynamo.eval_frame.OptimizedModule)
    assert run.step.precision == "bf16" and run.step.compiled
    assert run.logit_dtypes == {torch.bfloat16}  # the compiled forward really ran under autocast
    assert all(math.isfinite(v) for v in run.losses), run.losses
    assert np.mean(run.losses[-3:]) < 0.8 * np.mean(run.losses[:3]), run.losses


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_no_recompilation_after_the_first_step(runs, name):
    run = runs[name]
    assert run.first_step_graphs >= 1  # compiled: the check below is not vacuous
    assert run.later_graphs == 0


@pytest.mark.slow
def test_the_recompile_guard_would_catch_a_recompilation(runs):
    """A batch of another size must recompile; under the fixture's stance that raises, not compiles."""
    run = runs["vit"]
    x = torch.zeros(BATCH + 1, CHANNELS, SIDE, SIDE)
    with torch.compiler.set_stance("fail_on_recompile"), pytest.raises(RuntimeError, match="Detected recompile"):
        with autocast_for(CPU, "bf16"):
            run.step.forward(x)


def _eval_logits(model: nn.Module, x: torch.Tensor, precision: str = "fp32") -> torch.Tensor:
    with torch.no_grad(), autocast_for(CPU, precision):
        return model.eval()(x).float()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_checkpoint_written_under_bf16_loads_into_a_float32_model(runs, name):
    run = runs[name]
    loaded, spec = load_trained(run.checkpoint)
    assert spec.model_name == name
    assert all(p.dtype == torch.float32 for p in loaded.parameters())
    images, _ = learnable_data(32, seed=1)
    mean, std = (torch.tensor(v) for v in channel_stats(images))
    x = normalise(torch.from_numpy(images), mean, std).contiguous()  # (B, C, H, W)
    fp32 = _eval_logits(run.model, x)
    torch.testing.assert_close(_eval_logits(loaded, x), fp32, rtol=1e-5, atol=1e-5)
    # The analyses' float32 logits are what bf16 inference gave, up to bf16 rounding (8 mantissa bits).
    bf16 = _eval_logits(run.model, x, "bf16")
    assert (bf16 - fp32).abs().max() <= 0.05 * fp32.abs().max()


def test_precision_resolves_per_device():
    assert resolved_precision(CPU, "auto") == "fp32"
    assert resolved_precision(torch.device("cuda"), "auto") == "bf16"  # resolving needs no GPU
    assert resolved_precision(CPU, "bf16") == "bf16" and resolved_precision(torch.device("cuda"), "fp32") == "fp32"
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    for precision, dtype in (("auto", torch.float32), ("fp32", torch.float32), ("bf16", torch.bfloat16)):
        with autocast_for(CPU, precision):
            assert (a @ b).dtype == dtype, precision


def test_train_run_records_precision_and_compilation(tmp_path):
    """Uncompiled, so cheap: the run's metrics say which precision and whether compiled."""
    images, labels = learnable_data(IMAGES)
    arch, arch_args, recipe = MODELS["resnet"]
    paths = RunPaths(checkpoint=tmp_path / "model.pt", metrics=tmp_path / "metrics.json",
                     history=tmp_path / "history.csv", resume=tmp_path / "resume.pt",
                     predictions=tmp_path / "predictions.npy")
    torch.manual_seed(0)
    spec = RunSpec(model_name="resnet", arch=arch, arch_args=arch_args, num_classes=CLASSES, image_size=SIDE,
                   in_chans=CHANNELS, fraction=1.0, seed=0, params=0, forward_flops=0)
    training = TrainSpec(run=spec, recipe=recipe, augmentation=Augmentation(), budget=Budget("epochs", BATCH, 4,
                                                                                           IMAGES),
                         device=CPU, channels_last=True, compile=False, precision="bf16", graph="off",
                         eval_batch_size=32, checkpoint_every=100, subset="test", validation="test", paths=paths,
                         label="resnet")
    train_run(training, build_model(arch, CLASSES, SIDE, CHANNELS, **arch_args), LabelLoss(),
              RunData(train=(images, labels), validation=(images, labels), test=(images, labels)))
    metrics = json.loads(paths.metrics.read_text())
    assert metrics["precision"] == "bf16" and metrics["compiled"] is False
    loaded, _ = load_trained(paths.checkpoint)
    assert all(p.dtype == torch.float32 for p in loaded.parameters())


def test_an_unknown_precision_is_refused_in_one_line(tmp_path):
    raw = preset_params(ROOT, "smoke")
    raw["train"]["precision"] = "fp16"
    with pytest.raises(StudyError) as err:
        parse_params(raw, source="params.yaml")
    message = str(err.value)
    assert "\n" not in message and "train.precision" in message and "'fp16'" in message
    assert "auto" in message and "bf16" in message and "fp32" in message  # says what is allowed
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        assert main(["check", "--params", str(path)]) == 2
    assert stderr.getvalue().startswith("error: ") and stderr.getvalue().count("\n") == 1
