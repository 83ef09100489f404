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

from study.core.errors import StudyError
from study.core.io import atomic_dir, read_json, write_json

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
    # The array's buffer itself, not a `tobytes()` copy of it: the same bytes, hashed without a second pass.
    return hashlib.sha256(memoryview(np.ascontiguousarray(array)).cast("B")).hexdigest()


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


def read_prepared(prepared_dir: str | Path, verify: bool = True) -> Prepared:
    """Load the arrays (memory-mapped), checking each one's shape and dtype against the manifest and,
    unless ``verify`` is off, its SHA-256 too (a fraction of a second for Fashion-MNIST's 55 MB): a
    truncated or altered array stops here instead of training on damaged data."""
    prepared_dir = Path(prepared_dir)
    manifest = _read_manifest(prepared_dir)
    arrays = {name: _read_array(prepared_dir / f"{name}.npy", manifest["arrays"][name], verify) for name in ARRAYS}
    return Prepared(**arrays, class_names=tuple(manifest["class_names"]), dataset=manifest["dataset"])


_REBUILD = "run `dvc repro -f prepare` to rebuild it"


def _read_manifest(prepared_dir: Path) -> dict:
    path = prepared_dir / "manifest.json"
    if not path.is_file():
        raise StudyError(f"{prepared_dir}: no prepared dataset here; run `dvc repro prepare` first")
    try:
        manifest = read_json(path)
        complete = {"arrays", "class_names", "dataset"} <= manifest.keys() and all(
            {"shape", "dtype", "sha256"} <= manifest["arrays"][name].keys() for name in ARRAYS
        )
    except (ValueError, KeyError, TypeError, AttributeError):  # not JSON (ValueError), or not a mapping
        complete = False
    if not complete:
        raise StudyError(f"{path} is corrupt; {_REBUILD}")
    return manifest


def _read_array(path: Path, entry: dict, verify: bool) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r")  # never unpickles: allow_pickle is off by default
    except (OSError, ValueError, EOFError):  # missing, cut short, empty, or not an .npy file
        raise StudyError(f"{path} is missing or corrupt; {_REBUILD}") from None
    if list(array.shape) != entry["shape"] or str(array.dtype) != entry["dtype"]:
        raise StudyError(
            f"{path} holds {array.dtype} {list(array.shape)} but its manifest says {entry['dtype']} "
            f"{entry['shape']}; {_REBUILD}"
        )
    if verify and sha256(array) != entry["sha256"]:
        raise StudyError(f"{path} does not match its manifest's SHA-256 (altered or corrupt); {_REBUILD}")
    return array
