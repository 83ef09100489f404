"""The ``prepare`` stage's output: a dataset as four ``.npy`` arrays plus a manifest.

Arrays are uint8 images (N, H, W, C) and int64 labels, so every later stage memory-maps them in well
under a second instead of decoding the original files again. The manifest records shapes, class names,
SHA-256 digests of the arrays and where the data came from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from study.errors import StudyError
from study.io import atomic_dir, read_json, write_json

ARRAYS = ("train_images", "train_labels", "test_images", "test_labels")


@dataclass(frozen=True)
class Prepared:
    train_images: np.ndarray  # (N, H, W, C) uint8
    train_labels: np.ndarray  # (N,) int64
    test_images: np.ndarray  # (M, H, W, C) uint8
    test_labels: np.ndarray  # (M,) int64
    class_names: tuple[str, ...]
    dataset: str

    @property
    def image_size(self) -> int:
        return int(self.train_images.shape[1])

    @property
    def in_chans(self) -> int:
        return int(self.train_images.shape[3])

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


def sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def write_prepared(dataset, out_dir: str | Path) -> dict:
    """Write a loaded :class:`study.data.datasets.Dataset` to ``out_dir``; return the manifest."""
    manifest = {
        "dataset": dataset.name,
        "source": dataset.source,
        "class_names": list(dataset.class_names),
        "arrays": {},
    }
    with atomic_dir(out_dir) as tmp:
        for name in ARRAYS:
            array = np.ascontiguousarray(getattr(dataset, name))
            np.save(tmp / f"{name}.npy", array)
            manifest["arrays"][name] = {
                "shape": list(array.shape),
                "dtype": str(array.dtype),
                "sha256": sha256(array),
            }
        write_json(tmp / "manifest.json", manifest)
    return manifest


def read_prepared(prepared_dir: str | Path, verify: bool = False) -> Prepared:
    """Load the arrays (memory-mapped); with ``verify`` also check their digests."""
    prepared_dir = Path(prepared_dir)
    manifest_path = prepared_dir / "manifest.json"
    if not manifest_path.is_file():
        raise StudyError(f"{prepared_dir}: no prepared dataset here; run `dvc repro prepare` first")
    manifest = read_json(manifest_path)
    arrays = {}
    for name in ARRAYS:
        try:
            arrays[name] = np.load(prepared_dir / f"{name}.npy", mmap_mode="r")
        except (OSError, ValueError):
            raise StudyError(f"{prepared_dir / name}.npy is missing or corrupt; run `dvc repro -f prepare`") from None
        if verify and sha256(arrays[name]) != manifest["arrays"][name]["sha256"]:
            raise StudyError(f"{prepared_dir / name}.npy does not match its manifest; run `dvc repro -f prepare`")
    return Prepared(**arrays, class_names=tuple(manifest["class_names"]), dataset=manifest["dataset"])
