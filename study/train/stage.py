"""The ``study train`` stage: one model, one fraction, one seed, from validated params to a finished run.

This is where params meet the training library: it checks the request against params, builds the model
(and for a distilled student loads the teacher trained on the same fraction and seed), plans the budget,
fingerprints everything that determines the run (so a stale resume state is ignored) and calls
:func:`study.train.loop.train_run`. It lives in ``study/train`` so that ``dvc.yaml``'s dependency on
that folder covers it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from study import runtime
from study.config import DistillParams, ModelParams, Params
from study.data.prepared import read_prepared, sha256
from study.data.subsets import read_subset
from study.errors import StudyError
from study.models import build_model
from study.models.cost import count_parameters, forward_flops
from study.train.artifacts import load_trained
from study.train.augment import Augmentation
from study.train.budget import plan_budget
from study.train.loop import Recipe, RunPaths, resolved_precision, run_fingerprint, train_run
from study.train.losses import DistillationLoss, LabelLoss


def train_stage(
    params: Params, model_name: str, fraction: float, seed: int, prepared: Path, subset: Path,
    validation: Path, teacher: Path | None, checkpoint: Path, metrics: Path, history: Path, resume: Path,
    predictions: Path,
) -> str:
    if model_name not in params.trained_models:
        raise StudyError(f"--model {model_name}: not a trained model of this study ({list(params.trained_models)})")
    if fraction not in params.fractions or seed not in params.seeds:
        raise StudyError(f"--fraction {fraction} --seed {seed}: not in params fractions/seeds")
    recipe_params = params.models[model_name]
    device = runtime.pick_device(params.train.device)
    runtime.seed_everything(seed)

    data = read_prepared(prepared)
    train_idx, val_idx = read_subset(subset), read_subset(validation)
    full_images = len(data.train_labels) - len(val_idx)
    b = params.budget
    budget = plan_budget(len(train_idx), full_images, b.batch_size, b.epochs, b.convention, b.min_steps)

    model = build_model(recipe_params.arch, data.num_classes, data.image_size, data.in_chans, **recipe_params.arch_args)
    spec = {
        "model_name": model_name, "arch": recipe_params.arch, "arch_args": dict(recipe_params.arch_args),
        "num_classes": data.num_classes, "image_size": data.image_size, "in_chans": data.in_chans,
        "fraction": fraction, "seed": seed, "params": count_parameters(model),
        "forward_flops": forward_flops(model, data.image_size, data.in_chans),
    }
    loss_fn = LabelLoss(recipe_params.label_smoothing)
    distill = params.distill if params.distill and model_name == params.distill.student else None
    if distill is not None:
        model.set_distilled_training(distill.kind != "none")
    if distill is not None and distill.kind != "none":
        if teacher is None:
            raise StudyError(f"--model {model_name} is distilled: pass --teacher <path of the teacher's model.pt>")
        loss_fn, distill_spec = _distillation_loss(
            loss_fn, distill, params.models[distill.teacher], teacher, spec, device
        )
        spec.update(distill_spec)

    recipe = Recipe(**{k: getattr(recipe_params, k) for k in Recipe.__dataclass_fields__})
    aug = recipe_params.augment or params.train.augment  # the model's own, else the study-wide one
    augmentation = Augmentation(**{k: getattr(aug, k) for k in Augmentation.__dataclass_fields__})
    fingerprint = run_fingerprint(
        spec=spec, recipe=recipe, budget=budget.as_dict(), augment=augmentation.as_dict(), device=device.type,
        compile=params.train.compile, precision=resolved_precision(device, params.train.precision),
        subset=sha256(train_idx), validation=sha256(val_idx),
    )
    is_cnn = not hasattr(model, "num_prefix_tokens")
    metrics_out = train_run(
        model=model, spec=spec, recipe=recipe, budget=budget,
        train=(data.train_images[train_idx], data.train_labels[train_idx]),
        validation=(data.train_images[val_idx], data.train_labels[val_idx]),
        test=(data.test_images, data.test_labels),
        seed=seed, augmentation=augmentation, device=device, loss_fn=loss_fn,
        channels_last=is_cnn, compile_model=params.train.compile, precision=params.train.precision,
        eval_batch_size=params.train.eval_batch_size, checkpoint_every=params.train.checkpoint_every,
        fingerprint=fingerprint, paths=RunPaths(checkpoint=checkpoint, metrics=metrics, history=history, resume=resume,
                               predictions=predictions),
        label=f"{model_name} f={fraction} s={seed}",
    )
    heads = ""
    if "test_top1_cls" in metrics_out:
        heads = f" (cls {metrics_out['test_top1_cls']:.4f}, dist {metrics_out['test_top1_dist']:.4f})"
    return (
        f"train: {model_name} fraction {fraction} seed {seed}: test top-1 {metrics_out['test_top1']:.4f}{heads} "
        f"after {budget.steps} steps x {budget.batch_size} ({budget.epochs:.1f} epochs of {budget.train_images} images) "
        f"in {metrics_out['train_seconds']:.0f}s, {metrics_out['throughput_images_per_s']:.0f} img/s on {metrics_out['device']}"
    )


def _distillation_loss(base: LabelLoss, distill: DistillParams, teacher_params: ModelParams, teacher: Path,
                       student: dict, device: torch.device) -> tuple[nn.Module, dict]:
    """DeiT's loss around ``base`` with the teacher at ``teacher``; also the spec entries that record it.

    Before any training, the teacher must be the model ``distill.teacher`` names, as ``teacher_params``
    build it, trained on the student's fraction and seed (it never saw data the student lacks), for the
    student's classes and input geometry (``student``: the student's spec).
    """
    teacher_model, teacher_spec = load_trained(teacher, device)
    fraction, seed = student["fraction"], student["seed"]
    if (teacher_spec["fraction"], teacher_spec["seed"]) != (fraction, seed):
        raise StudyError(
            f"{teacher}: teacher trained at fraction {teacher_spec['fraction']}, seed {teacher_spec['seed']}; "
            f"the student at fraction {fraction}, seed {seed} must use the teacher of the same fraction and seed"
        )
    found = (teacher_spec["model_name"], teacher_spec["arch"], teacher_spec["arch_args"])
    wanted = (distill.teacher, teacher_params.arch, dict(teacher_params.arch_args))
    if found != wanted:
        raise StudyError(
            f"{teacher}: model '{found[0]}' ({found[1]} {found[2]}), but distill.teacher is '{wanted[0]}' "
            f"({wanted[1]} {wanted[2]}); pass that model's model.pt, trained on the current params (`dvc repro`)"
        )
    geometry = ("num_classes", "image_size", "in_chans")
    if any(teacher_spec[key] != student[key] for key in geometry):
        raise StudyError(
            f"{teacher}: the teacher takes {teacher_spec['in_chans']}x{teacher_spec['image_size']}"
            f"x{teacher_spec['image_size']} images and predicts {teacher_spec['num_classes']} classes, the "
            f"student {student['in_chans']}x{student['image_size']}x{student['image_size']} and "
            f"{student['num_classes']}; train the teacher on the student's dataset (`dvc repro`)"
        )
    if not hasattr(teacher_model, "num_prefix_tokens"):  # a CNN teacher: NHWC convolutions are faster
        teacher_model = teacher_model.to(memory_format=torch.channels_last)
    loss = DistillationLoss(base, teacher_model, distill.kind, distill.alpha, distill.tau)
    spec = {
        "distill": {"kind": distill.kind, "teacher": teacher_spec["model_name"], "alpha": distill.alpha,
                    "tau": distill.tau, "kl_reduction": "batchmean"},
        "teacher_forward_flops": forward_flops(teacher_model, teacher_spec["image_size"], teacher_spec["in_chans"]),
    }
    return loss, spec
