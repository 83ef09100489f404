"""scikit-learn's bundled 8×8 handwritten digits (UCI optdigits test set): a dataset that needs no files.

It ships inside scikit-learn, so it works offline anywhere, which suits smoke runs and CI. The
set has no official split, so we make a fixed one: stratified 80/20 with seed 0 (1,437 train / 360
test images). Pixel values are counts 0..16 (of 4×4 blocks of a 32×32 bitmap); we scale them to 0..255
so every dataset shares the uint8 convention.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits as sklearn_load_digits
from sklearn.model_selection import train_test_split

from study.data.schema import Dataset

TEST_FRACTION = 0.2
SPLIT_SEED = 0
MAX_VALUE = 16  # digits pixels count set bits in a 4×4 block


def load_digits() -> Dataset:
    """The 1,797 digits as (N, 8, 8, 1) uint8 images, split as described in the module docstring."""
    bunch = sklearn_load_digits()
    scaled = np.rint(bunch.images * (255 / MAX_VALUE)).astype(np.uint8)  # (1797, 8, 8), 0..16 -> 0..255
    images = scaled[..., None]  # (1797, 8, 8) -> (1797, 8, 8, 1)
    labels = bunch.target.astype(np.int64)
    train_images, test_images, train_labels, test_labels = train_test_split(
        images, labels, test_size=TEST_FRACTION, stratify=labels, random_state=SPLIT_SEED
    )
    return Dataset(
        name="digits",
        train_images=np.ascontiguousarray(train_images),
        train_labels=train_labels,
        test_images=np.ascontiguousarray(test_images),
        test_labels=test_labels,
        class_names=tuple(str(digit) for digit in range(10)),
        source="sklearn",
    )
