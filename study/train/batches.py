"""The fast data path: a split lives on the device as one uint8 tensor; batches are index slices.

No DataLoader and no per-image Python: each step draws a fixed-size batch of indices, gathers the
images in one indexing op, and augments and normalises the whole batch at once on the device
(:mod:`study.train.augment`). The order and the augmentation of step ``s`` are pure functions of
``(seed, s)``, so a resumed run sees exactly the batches it would have seen.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

# The stream of the data order (stream 1 was the augmentation's, now in study.train.augment).
_ORDER = 0


def _generator(seed: int, stream: int, counter: int) -> torch.Generator:
    """A generator for ``(seed, stream, counter)``, distinct for every triple.

    torch's CPU generator keeps only the low 32 bits of its seed (its Mersenne twister is seeded with a
    uint32), so packing the training seed into high bits gave every seed the same data order. NumPy's
    SeedSequence hashes the whole triple into one 32-bit word instead.
    """
    word = np.random.SeedSequence([seed, stream, counter]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(word))


class DeviceSplit:
    """Images (N, H, W, C) uint8 and labels (N,) int64 of one split, resident on ``device``."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, device: torch.device):
        # np.array copies: the prepared arrays are read-only memory maps, which torch will not wrap.
        self.images = torch.from_numpy(np.array(images, dtype=np.uint8)).to(device)
        self.labels = torch.from_numpy(np.array(labels, dtype=np.int64)).to(device)

    def __len__(self) -> int:
        return int(self.labels.shape[0])


class BatchOrder:
    """Step -> batch indices: epochs are seeded permutations laid end to end, cut into fixed batches."""

    def __init__(self, n: int, batch_size: int, seed: int):
        self.n, self.batch_size, self.seed = n, batch_size, seed

    @functools.lru_cache(maxsize=2)
    def _permutation(self, epoch: int) -> torch.Tensor:
        return torch.randperm(self.n, generator=_generator(self.seed, _ORDER, epoch))

    def indices(self, step: int) -> torch.Tensor:
        """Indices (batch_size,) of optimiser step ``step``; a batch may straddle two epochs."""
        parts, position, needed = [], step * self.batch_size, self.batch_size
        while needed:
            epoch, offset = divmod(position, self.n)
            part = self._permutation(epoch)[offset : offset + needed]
            parts.append(part)
            position, needed = position + part.numel(), needed - part.numel()
        return torch.cat(parts)

    def table(self, steps: int) -> torch.Tensor:
        """Indices of steps ``0 .. steps - 1`` as one ``(steps, batch_size)`` tensor, row ``s`` equal to
        :meth:`indices` of ``s``: on a GPU the whole run's order moves to the device once, so that no step
        waits for a host-to-device copy of its indices (a copy from pageable memory synchronises the stream)."""
        needed = steps * self.batch_size
        epochs = -(-needed // self.n)  # ceil: the epochs the run reaches into
        order = torch.cat([self._permutation(epoch) for epoch in range(epochs)])  # (epochs * n,)
        return order[:needed].view(steps, self.batch_size)  # (steps, B)


def channel_stats(images: np.ndarray) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of uint8 images (N, H, W, C), on the 0-1 scale."""
    pixels = images.reshape(-1, images.shape[-1])  # (N*H*W, C), still uint8: no float copy of the data
    mean = pixels.mean(axis=0, dtype=np.float64) / 255.0
    std = pixels.std(axis=0, dtype=np.float64) / 255.0
    return mean.tolist(), np.maximum(std, 1e-3).tolist()


def normalise(images: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, C) -> float (B, C, H, W), normalised; memory stays channels-last."""
    x = (images.float() / 255.0 - mean) / std  # (B, H, W, C); mean/std broadcast over C
    return x.permute(0, 3, 1, 2)  # (B, C, H, W) view with NHWC strides, i.e. channels_last

