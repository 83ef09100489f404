"""Random crop and flip drawn on the device: the augmentation a captured step can hold (study.train.graphed).

Kornia (:mod:`study.train.augment`) draws its random parameters on the host and applies them to the rows
chosen by a boolean mask, whose size the host must read: neither can be captured in a CUDA graph. Crop after
zero padding and horizontal flip, the augmentation of the study's CNN recipes, need neither: each row's offsets
and flip are drawn on the device, and one gather makes the batch. The distribution is Kornia's (an offset
uniform over the ``2·padding + 1`` positions per axis, a flip with probability 1/2, zero padding on the 0–255
scale, which is 0 on the 0–1 scale Kornia pads); the draws come from the device's generator, so a captured run
sees other crops than an eager run of the same seed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def crop_flip(images: torch.Tensor, padding: int, hflip: bool) -> torch.Tensor:
    """uint8 images ``(B, H, W, C)`` -> ``(B, H, W, C)``: each row cropped at a random offset from its image
    padded by ``padding`` zero pixels, then mirrored left-right with probability 1/2 when ``hflip``."""
    b, h, w, _ = images.shape
    device = images.device
    padded = F.pad(images, (0, 0, padding, padding, padding, padding))  # (B, H + 2p, W + 2p, C)
    dy, dx = torch.randint(0, 2 * padding + 1, (2, b, 1), device=device)  # each (B, 1)
    rows = dy + torch.arange(h, device=device)  # (B, H): source row of each output row
    cols = torch.arange(w, device=device).expand(b, w)  # (B, W)
    if hflip:
        flip = torch.rand(b, 1, device=device) < 0.5  # (B, 1)
        cols = torch.where(flip, w - 1 - cols, cols)
    cols = cols + dx
    batch = torch.arange(b, device=device)[:, None, None]  # (B, 1, 1)
    return padded[batch, rows[:, :, None], cols[:, None, :]]  # (B, H, W, C)

