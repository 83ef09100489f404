"""The DeiT teacher of a distilled student: checked against the student before any step, then wrapped in the loss.

A teacher must be the model ``distill.teacher`` names, trained on the student's fraction and seed (it never saw
data the student lacks), for the student's classes and input geometry; anything else is refused in one line.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from study.archs import traits
from study.core.errors import StudyError
from study.models.cost import forward_flops
from study.train.artifacts import load_trained
from study.train.losses import DistillationLoss, LabelLoss
from study.train.spec import DistillSpec, RunSpec


def distillation_loss(base: LabelLoss, teacher_path: Path, teacher_name: str, teacher_arch: str,
                      teacher_arch_args: dict, kind: str, alpha: float, tau: float, student: RunSpec,
                      device: torch.device) -> tuple[nn.Module, RunSpec]:
    """DeiT's loss around ``base`` with the teacher saved at ``teacher_path``; also ``student``'s spec with the
    distillation recorded."""
    teacher_model, t = load_trained(teacher_path, device)
    fraction, seed = student.fraction, student.seed
    if (t.fraction, t.seed) != (fraction, seed):
        raise StudyError(
            f"{teacher_path}: teacher trained at fraction {t.fraction}, seed {t.seed}; "
            f"the student at fraction {fraction}, seed {seed} must use the teacher of the same fraction and seed"
        )
    found = (t.model_name, t.arch, dict(t.arch_args))
    wanted = (teacher_name, teacher_arch, dict(teacher_arch_args))
    if found != wanted:
        raise StudyError(
            f"{teacher_path}: model '{found[0]}' ({found[1]} {found[2]}), but distill.teacher is '{wanted[0]}' "
            f"({wanted[1]} {wanted[2]}); pass that model's model.pt, trained on the current params (`dvc repro`)"
        )
    if (t.num_classes, t.image_size, t.in_chans) != (student.num_classes, student.image_size, student.in_chans):
        raise StudyError(
            f"{teacher_path}: the teacher takes {t.in_chans}x{t.image_size}x{t.image_size} images and predicts "
            f"{t.num_classes} classes, the student {student.in_chans}x{student.image_size}x{student.image_size} "
            f"and {student.num_classes}; train the teacher on the student's dataset (`dvc repro`)"
        )
    if not traits(t.arch, t.arch_args).transformer:  # a CNN teacher: NHWC convolutions are faster
        teacher_model = teacher_model.to(memory_format=torch.channels_last)
    loss = DistillationLoss(base, teacher_model, kind, alpha, tau)
    recorded = replace(student, distill=DistillSpec(kind, t.model_name, alpha, tau, "batchmean"),
                       teacher_forward_flops=forward_flops(teacher_model, t.image_size, t.in_chans))
    return loss, recorded
