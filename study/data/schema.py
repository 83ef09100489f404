"""The one in-memory form every dataset takes: uint8 images in NHWC, int64 labels, class names.

Every later stage (subsets, training, analysis) reads only this, so each loader's quirks (IDX files,
CIFAR pickles, sklearn's float digits) end at the loader. The checks in ``__post_init__`` make a loader
bug fail where it happens instead of as a shape error deep inside training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Dataset:
    """A train/test pair of images with labels in ``0 .. len(class_names) - 1``."""

    name: str
    train_images: np.ndarray  # (N, H, W, C) uint8
    train_labels: np.ndarray  # (N,) int64
    test_images: np.ndarray  # (M, H, W, C) uint8
    test_labels: np.ndarray  # (M,) int64
    class_names: tuple[str, ...]
    source: str  # where it was read from: a directory, or "sklearn"

    def __post_init__(self) -> None:
        for split in ("train", "test"):
            _check_split(self, split)
        if self.train_images.shape[1:] != self.test_images.shape[1:]:
            raise ValueError(
                f"{self.name}: train images {self.train_images.shape[1:]} and test images "
                f"{self.test_images.shape[1:]} differ in size"
            )

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of every image."""
        return tuple(self.train_images.shape[1:])  # type: ignore[return-value]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


def _check_split(dataset: Dataset, split: str) -> None:
    images = getattr(dataset, f"{split}_images")
    labels = getattr(dataset, f"{split}_labels")
    if images.dtype != np.uint8 or images.ndim != 4:
        raise ValueError(
            f"{dataset.name}: {split} images must be (N, H, W, C) uint8, got {images.shape} {images.dtype}"
        )
    if labels.dtype != np.int64 or labels.shape != images.shape[:1]:
        raise ValueError(
            f"{dataset.name}: {split} labels must be ({len(images)},) int64, got {labels.shape} {labels.dtype}"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= len(dataset.class_names)):
        raise ValueError(f"{dataset.name}: {split} labels outside 0..{len(dataset.class_names) - 1}")
