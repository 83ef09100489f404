"""Read CIFAR-10 / CIFAR-100 (Krizhevsky, 2009) from the python-pickle release that torchvision uses.

Layout: ``root/<base_folder>/`` holds pickled dicts whose ``data`` is an (N, 3072) uint8 array, each row
one image as 3 channel planes of 32×32 in row-major order, with ``labels`` (CIFAR-10) or
``fine_labels`` (CIFAR-100) beside it, plus a meta pickle with the class names. Folder and file names
come from torchvision's dataset classes so both always agree on where the files live.

We read the pickles ourselves instead of through ``torchvision.datasets.CIFAR10`` because that class
md5-checks every file, which makes it unusable on small generated test files, and its errors do not say
which file is wrong. The pickles are read by :class:`_CifarUnpickler`, which rebuilds only what the
release holds (numpy arrays, lists, dicts, strings): a pickle can name any importable function to call,
and a batch file someone sent must not run code.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torchvision

from study.data import fetch
from study.data.schema import Dataset
from study.core.errors import StudyError

SIDE = 32
CHANNELS = 3
ROW_LENGTH = CHANNELS * SIDE * SIDE  # 3072 bytes per image in ``data``


@dataclass(frozen=True)
class Variant:
    """What differs between CIFAR-10 and CIFAR-100."""

    torchvision_class: type
    labels_key: str
    num_classes: int


VARIANTS: dict[str, Variant] = {
    "cifar10": Variant(torchvision.datasets.CIFAR10, "labels", 10),
    "cifar100": Variant(torchvision.datasets.CIFAR100, "fine_labels", 100),  # the 100 fine classes
}


def load_cifar(name: str, root: str | Path | None, download: bool = True) -> Dataset:
    """Load ``name`` ("cifar10" or "cifar100") from ``root``, downloading there first if allowed."""
    variant = VARIANTS[name]
    spec = variant.torchvision_class
    folder = None if root is None else Path(root) / spec.base_folder
    if folder is None or not all((folder / file).is_file() for file in required_files(spec)):
        fetch.download(name, spec, root, download, [] if folder is None else [folder])
        folder = Path(root) / spec.base_folder  # root is set: fetch.download raised otherwise
    class_names = _read_class_names(folder / spec.meta["filename"], spec.meta["key"], variant.num_classes)
    train_images, train_labels = _read_batches(folder, [file for file, _md5 in spec.train_list], variant)
    test_images, test_labels = _read_batches(folder, [file for file, _md5 in spec.test_list], variant)
    return Dataset(
        name=name,
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        class_names=class_names,
        source=str(folder),
    )


def required_files(spec: type) -> list[str]:
    """Every file the torchvision class ``spec`` expects in its ``base_folder``."""
    return [file for file, _md5 in spec.train_list + spec.test_list] + [spec.meta["filename"]]


def _read_batches(folder: Path, files: list[str], variant: Variant) -> tuple[np.ndarray, np.ndarray]:
    batches = [_read_batch(folder / file, variant) for file in files]
    images = np.concatenate([images for images, _ in batches])  # (N, 32, 32, 3)
    labels = np.concatenate([labels for _, labels in batches])  # (N,)
    return images, labels


def _read_batch(path: Path, variant: Variant) -> tuple[np.ndarray, np.ndarray]:
    entry = _read_pickle(path)
    data = _field(entry, "data", path)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != ROW_LENGTH:
        shape = getattr(data, "shape", type(data).__name__)
        raise _corrupt(path, f"'data' is {shape}, expected an (N, {ROW_LENGTH}) uint8 array")
    labels = np.asarray(_field(entry, variant.labels_key, path), dtype=np.int64)
    if labels.shape != (len(data),):
        raise _corrupt(path, f"{labels.size} labels for {len(data)} images")
    if labels.size and (labels.min() < 0 or labels.max() >= variant.num_classes):
        raise _corrupt(path, f"labels span {labels.min()}..{labels.max()}, expected 0..{variant.num_classes - 1}")
    images = data.reshape(-1, CHANNELS, SIDE, SIDE)  # (N, 3072) -> (N, 3, 32, 32): channel planes
    images = np.ascontiguousarray(images.transpose(0, 2, 3, 1))  # (N, 3, 32, 32) -> (N, 32, 32, 3)
    return images, labels


def _read_class_names(path: Path, key: str, num_classes: int) -> tuple[str, ...]:
    names = _field(_read_pickle(path), key, path)
    if len(names) != num_classes:
        raise _corrupt(path, f"{len(names)} class names under '{key}', expected {num_classes}")
    return tuple(str(name) for name in names)


class _CifarUnpickler(pickle.Unpickler):
    """An unpickler for the CIFAR release only: dicts, lists, tuples and strings need no import, and the
    one import allowed is what rebuilds a numpy array. Anything else a pickle names is refused unloaded."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),  # the release's (numpy 1.x) name
        ("numpy._core.multiarray", "_reconstruct"),  # numpy 2.x's name, in pickles written again today
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # how Python 3 writes bytes (an array's buffer) at pickle protocol 2
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise _Refused(f"{module}.{name}")
        return super().find_class(module, name)


class _Refused(pickle.UnpicklingError):
    """The pickle asked for an import a CIFAR file never needs; the message is what it asked for."""


def _read_pickle(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            # latin1 is how torchvision (and the CIFAR page) decode the Python 2 pickles of the release.
            entry = _CifarUnpickler(file, encoding="latin1").load()
    except _Refused as exc:
        raise _corrupt(path, f"refused: its pickle asks to import {exc}, which CIFAR data never needs") from None
    except Exception as exc:  # a damaged pickle can fail with almost any exception type
        raise _corrupt(path, f"not a readable pickle ({' '.join(str(exc).split())})") from exc
    if not isinstance(entry, dict):
        raise _corrupt(path, f"holds a {type(entry).__name__}, expected a dict")
    return entry


def _field(entry: dict[str, Any], key: str, path: Path) -> Any:
    if key not in entry:
        raise _corrupt(path, f"has no '{key}' entry (keys: {', '.join(map(str, entry))})")
    return entry[key]


def _corrupt(path: Path, problem: str) -> StudyError:
    return StudyError(
        f"{path}: {problem}; delete its folder and rerun to download it again, or point data.root at a good copy"
    )
