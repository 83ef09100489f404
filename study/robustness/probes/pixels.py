"""The image convention every probe shares: pixel space, before normalisation, ``(N, H, W, C)``.

Probes act where a camera or an occluder would: on the stored pixels, before the per-channel mean/std
normalisation of :func:`study.runs.table.normalised_images`. That is Naseer et al.'s (2021)
protocol — dropped patches are 0 in [0, 1] pixel space, so black, rather than 0 after normalisation
(the dataset mean). Accepted images: a ``torch.uint8`` tensor with values 0–255 (the layout
:mod:`study.data.prepared` stores) or a floating tensor with values in [0, 1]; every probe returns the
same dtype, layout and device. The range check rejects already-normalised floats, the likely mistake.

Geometric probes (occlusion, rearrangement, translation) move or zero pixels in the input dtype and are
exact. Corruptions compute in float32 ``(N, C, H, W)`` in [0, 1] (the convention of Kornia and of
Hendrycks & Dietterich's code, which divides by 255) and convert back: uint8 by rounding to nearest,
floats by clamping to [0, 1].
"""

from __future__ import annotations

import torch
from torch import Tensor

from study.core.errors import StudyError


def check_images(images: Tensor, probe: str) -> None:
    """One-line StudyError unless ``images`` is a ``(N, H, W, C)`` uint8 tensor or a float one in [0, 1]."""
    if not isinstance(images, Tensor):
        raise StudyError(f"{probe}: images must be a torch tensor (N, H, W, C), got {type(images).__name__}; "
                         "convert with torch.from_numpy(np.array(images))")
    if images.ndim != 4:
        raise StudyError(f"{probe}: images must be 4-D (N, H, W, C), got shape {tuple(images.shape)}; "
                         "add the batch or channel axis")
    if images.dtype != torch.uint8 and not images.is_floating_point():
        raise StudyError(f"{probe}: images must be uint8 (0-255) or float (0-1), got {images.dtype}")
    if images.is_floating_point() and images.numel() and (images.min() < 0 or images.max() > 1):
        raise StudyError(f"{probe}: float images must lie in [0, 1] pixel space; apply probes before "
                         "normalisation, or pass the uint8 images")


def to_unit(images: Tensor) -> Tensor:
    """``(N, H, W, C)`` uint8 or float -> float32 ``(N, C, H, W)`` in [0, 1], on the same device."""
    x = images.float()
    if images.dtype == torch.uint8:
        x = x / 255.0
    return x.permute(0, 3, 1, 2).contiguous()  # (N, H, W, C) -> (N, C, H, W)


def from_unit(x: Tensor, like: Tensor) -> Tensor:
    """float ``(N, C, H, W)`` in about [0, 1] -> ``like``'s dtype and ``(N, H, W, C)`` layout."""
    x = x.clamp(0.0, 1.0).permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
    if like.dtype == torch.uint8:
        return (x * 255.0).round().to(torch.uint8).contiguous()
    return x.to(like.dtype).contiguous()
