"""Translation by whole pixels, and the share of predictions a shift changes (Azulay & Weiss, JMLR 2019).

Azulay & Weiss, "Why do deep convolutional networks generalize so poorly to small image
transformations?": CNNs change their prediction under shifts of a pixel or two, because striding
subsamples without respecting the sampling theorem. They embed each image in a larger black canvas and
move it; on Fashion-MNIST and CIFAR-size images whose border is background, shifting with zero fill is
the same operation, without resizing the model's input. A ViT is expected to be worse off: a shift that
is not a multiple of the patch size changes every token (Ding et al. 2023).

Levels: the shift in pixels along x (``dx``, positive = right), y (``dy``, positive = down) or both
(diagonal). ``translation(images, 0, 0)`` is the identity. The probe has no randomness, so no seed.
The consistency measure of Azulay & Weiss is :func:`prediction_change` between the predictions on the
clean and on the 1-px-shifted images (its complement is the usual "consistency").
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from torch import Tensor

from study.robustness.probes.pixels import check_images
from study.core.errors import StudyError


def _check_shift(value: int, axis: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise StudyError(f"translation: {axis} {value!r} must be a whole number of pixels")
    return int(value)


def translation(images: Tensor, dx: int, dy: int) -> Tensor:
    """Shift every image ``dx`` px right and ``dy`` px down (negative: left, up); vacated pixels are 0.

    ``images`` ``(N, H, W, C)`` uint8 or float in [0, 1]; returns the same dtype, layout and device.
    A shift of a whole side or more leaves a black image.
    """
    check_images(images, "translation")
    dx, dy = _check_shift(dx, "dx"), _check_shift(dy, "dy")
    height, width = images.shape[1:3]
    shifted = torch.zeros_like(images)
    if abs(dx) >= width or abs(dy) >= height:
        return shifted
    # destination rows [max(dy, 0), H + min(dy, 0)) receive source rows [max(−dy, 0), H − max(dy, 0)); columns alike
    shifted[:, max(dy, 0):height + min(dy, 0), max(dx, 0):width + min(dx, 0)] = \
        images[:, max(-dy, 0):height - max(dy, 0), max(-dx, 0):width - max(dx, 0)]
    return shifted


def prediction_change(before, after) -> float:
    """Share of images whose predicted class differs between two prediction arrays of the same images.

    Azulay & Weiss's "probability of change of the top-1 prediction"; with ``before`` the predictions on
    the clean images and ``after`` those on the images shifted by 1 px, it is the shift *inconsistency*
    (1 − consistency). Accepts NumPy arrays, tensors or lists of class indices, shape ``(N,)``.
    """
    first = np.asarray(before.cpu() if isinstance(before, Tensor) else before)
    second = np.asarray(after.cpu() if isinstance(after, Tensor) else after)
    if first.ndim != 1 or first.shape != second.shape or first.size == 0:
        raise StudyError(f"prediction_change: needs two non-empty 1-D prediction arrays of the same length, "
                         f"got shapes {first.shape} and {second.shape}")
    return float(np.mean(first != second))
