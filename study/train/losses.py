"""Training losses with one call signature, ``loss(inputs, outputs, labels)``, for every model.

Distillation is a wrapper, not a second training loop: the distilled ViT is trained by the same loop as
every other model; only the loss differs. Definitions follow DeiT (Touvron et al. 2021, §4):

- hard: ``½·CE(z_cls, y) + ½·CE(z_dist, argmax z_teacher)``; label smoothing applies to the true labels only.
- soft: ``(1−α)·CE(z_cls, y) + α·τ²·KL(softmax(z_teacher/τ) ‖ softmax(z_dist/τ))``. The KL is summed over
  classes and averaged over the batch (``reduction="batchmean"``, as timm does; the official DeiT code
  divides a summed KL by batch × classes instead, which is the same loss scaled by 1/classes).

The teacher is frozen: eval mode, no gradients, and it sees exactly the student's augmented batch.

Targets are class indices ``(B,)`` or, under Mixup/CutMix, class probabilities ``(B, classes)`` (see
:mod:`study.train.augment`). Both go to ``nn.CrossEntropyLoss``, which smooths either kind as
``(1 − ε)·target + ε/classes`` (timm's ``mixup_target`` gives the same). The distillation token's target is the
teacher's argmax on the same (mixed) image and is never smoothed, as in DeiT and timm.

Without augmentation, a teacher that fits all its training images labels every student image with the true
class, and hard distillation adds nothing to the labels; DeiT's gain comes with augmentation, where the
teacher's label of an augmented view can differ from the true one. :class:`DistillationLoss` therefore counts,
from the teacher logits it computes anyway, the views it labelled and those whose teacher argmax differs from
the true label (:meth:`DistillationLoss.teacher_views`).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class LabelLoss(nn.Module):
    """Cross-entropy on the labels, hard ``(B,)`` or soft ``(B, classes)``, with optional label smoothing."""

    def __init__(self, label_smoothing: float = 0.0):
        super().__init__()
        self.ce = nn.CrossEntropyLoss(label_smoothing=label_smoothing)

    def forward(self, inputs: torch.Tensor, outputs, labels: torch.Tensor) -> torch.Tensor:
        return self.ce(outputs, labels)


class DistillationLoss(nn.Module):
    """DeiT's hard or soft distillation; ``outputs`` is ``(class_logits, dist_logits)``.

    Every batch it scores also adds to two counts, kept on the device so that no step waits for the host: the
    views the teacher labelled and those whose teacher argmax differs from the true label. A mixed view's
    (Mixup/CutMix) true label is its dominant class, the argmax of its soft target: the image's own class
    when the partner's weight is below one half, else the partner's (an exact tie goes to the lower class index,
    as argmax breaks ties). The counts are read (one sync) only at evaluation and checkpoint time; a resumed
    run restores them from its resume state (:meth:`restore_teacher_views`).
    """

    def __init__(self, base: LabelLoss, teacher: nn.Module, kind: str, alpha: float, tau: float):
        super().__init__()
        if kind not in ("soft", "hard"):
            raise ValueError(f"distillation kind must be 'soft' or 'hard', not {kind!r}")
        self.base, self.kind, self.alpha, self.tau = base, kind, alpha, tau
        self.teacher = teacher.eval().requires_grad_(False)
        # (views labelled, views whose teacher argmax differs from the true label); a buffer, so .to(device)
        # moves it with the teacher; not persistent, as the resume state stores it (study.train.resume).
        self.register_buffer("_views", torch.zeros(2, dtype=torch.int64), persistent=False)

    def train(self, mode: bool = True) -> "DistillationLoss":
        super().train(mode)
        self.teacher.eval()  # the teacher never leaves eval mode (BatchNorm statistics stay frozen)
        return self

    def teacher_views(self) -> tuple[int, int]:
        """``(views labelled, views whose teacher label differs from the true one)`` so far; syncs the device."""
        seen, disagreeing = self._views.tolist()
        return seen, disagreeing

    def restore_teacher_views(self, seen: int, disagreeing: int) -> None:
        """Set the counts, as a resumed run's state saved them."""
        self._views.copy_(torch.tensor([seen, disagreeing], dtype=torch.int64))

    def forward(self, inputs: torch.Tensor, outputs, labels: torch.Tensor) -> torch.Tensor:
        class_logits, dist_logits = outputs
        with torch.no_grad():
            teacher_logits = self.teacher(inputs).float()
            teacher_labels = teacher_logits.argmax(dim=1)  # (B,)
            true_labels = labels if labels.ndim == 1 else labels.argmax(dim=1)  # soft targets: the dominant class
            self._views[0] += len(teacher_labels)
            self._views[1] += (teacher_labels != true_labels).sum()
        if self.kind == "hard":
            return 0.5 * self.base(inputs, class_logits, labels) + 0.5 * F.cross_entropy(dist_logits, teacher_labels)
        kl = F.kl_div(
            F.log_softmax(dist_logits.float() / self.tau, dim=1),
            F.log_softmax(teacher_logits / self.tau, dim=1),
            reduction="batchmean",
            log_target=True,
        )
        return (1 - self.alpha) * self.base(inputs, class_logits, labels) + self.alpha * self.tau**2 * kl
