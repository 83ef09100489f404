"""Find, read and verify Fashion-MNIST (Xiao, Rasul & Vollgraf, 2017), the study's default dataset.

The four IDX files may sit in several places, tried in this order:

1. ``root`` itself (the files copied there by hand),
2. ``root/FashionMNIST/raw`` (where ``torchvision.datasets.FashionMNIST`` keeps them),
3. ``/usr/share/datasets/fashion-mnist`` (Debian package ``dataset-fashion-mnist``; it ships the four
   ``.gz`` files under the published names),
4. a download through torchvision into ``root/FashionMNIST/raw``.

Each file may be gzipped or not. Whatever the source, the decoded arrays are checked against SHA-256
digests of the published data. We hash decoded content, not the ``.gz`` files, because the Debian
package's archives carry different gzip headers (23–24 bytes smaller) than the published ones while
holding the same data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torchvision

from study.data import fetch
from study.data.schema import Dataset
from study.data.idx import IdxError, read_idx
from study.core.errors import StudyError

SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")  # from `apt-get install dataset-fashion-mnist`

# part -> (published file name without ".gz", IDX dimensions); the names are those of the Fashion-MNIST
# release, used unchanged by torchvision and by the Debian package.
FILES: dict[str, tuple[str, int]] = {
    "train_images": ("train-images-idx3-ubyte", 3),
    "train_labels": ("train-labels-idx1-ubyte", 1),
    "test_images": ("t10k-images-idx3-ubyte", 3),
    "test_labels": ("t10k-labels-idx1-ubyte", 1),
}

# SHA-256 of each decoded IDX payload as uint8 C-order bytes (``hashlib.sha256(array.tobytes())``, header
# excluded), computed from the published archives (those whose md5s torchvision checks); the Debian package
# 0.0~git20200523.55506a9-1 decodes to the same four digests.
SHA256: dict[str, str] = {
    "train_images": "2e487a6c89124f78f2d7521542223cafe96f7123c3ca13d447772ac6ecbb3012",
    "train_labels": "657fbd221bfc9f4198cc14b5619cc33ec57c58dd0e47af4d99d6650759e869a7",
    "test_images": "c867c93ff95360594e8ec3287995350b824dd110b11595c0e13d5423f621867a",
    "test_labels": "3d0e6c6ea990b53b6f8f500a41cac93881d981b315f84578b7d915342ade01e9",
}

_FIX = "delete the bad file(s), reinstall dataset-fashion-mnist, or point data.root at a good copy"


def load_fashionmnist(
    root: str | Path | None,
    download: bool = True,
    *,
    system_dir: Path = SYSTEM_DIR,
    digests: Mapping[str, str] | None = SHA256,
) -> Dataset:
    """Load Fashion-MNIST from the first complete location, downloading into ``root`` if allowed.

    ``digests=None`` skips the content check; only tests do that, to read tiny generated files.
    """
    places = candidate_dirs(root, system_dir)
    directory = next((place for place in places if find_files(place) is not None), None)
    if directory is None:
        fetch.download("fashionmnist", torchvision.datasets.FashionMNIST, root, download, places)
        directory = Path(root) / "FashionMNIST" / "raw"  # where torchvision puts them; root is set here
    return read_fashionmnist_dir(directory, digests)


def candidate_dirs(root: str | Path | None, system_dir: Path) -> list[Path]:
    """Directories that may hold the four files, in search order."""
    places = [] if root is None else [Path(root), Path(root) / "FashionMNIST" / "raw"]
    return places + [Path(system_dir)]


def find_files(directory: Path) -> dict[str, Path] | None:
    """The path of each part in ``directory`` (raw preferred over ``.gz``: no decompression), or None
    unless all four are there."""
    found = {}
    for part, (name, _) in FILES.items():
        existing = [path for path in (directory / name, directory / f"{name}.gz") if path.is_file()]
        if not existing:
            return None
        found[part] = existing[0]
    return found


def read_fashionmnist_dir(directory: Path, digests: Mapping[str, str] | None) -> Dataset:
    """Decode the four files in ``directory`` and, unless ``digests`` is None, verify their content."""
    files = find_files(directory)
    if files is None:
        raise StudyError(f"Fashion-MNIST files missing in {directory}; {_FIX}")
    arrays = {part: _read_part(files[part], FILES[part][1]) for part in FILES}
    if digests is not None:
        for part, array in arrays.items():
            _verify(files[part], array, digests[part])
    return Dataset(
        name="fashionmnist",
        train_images=arrays["train_images"][..., None],  # (N, 28, 28) -> (N, 28, 28, 1)
        train_labels=arrays["train_labels"].astype(np.int64),
        test_images=arrays["test_images"][..., None],  # (M, 28, 28) -> (M, 28, 28, 1)
        test_labels=arrays["test_labels"].astype(np.int64),
        class_names=tuple(torchvision.datasets.FashionMNIST.classes),
        source=str(directory),
    )


def _read_part(path: Path, ndim: int) -> np.ndarray:
    try:
        return read_idx(path, ndim)
    except IdxError as exc:
        raise StudyError(f"{exc}; {_FIX}") from exc


def _verify(path: Path, array: np.ndarray, expected: str) -> None:
    actual = hashlib.sha256(array.tobytes()).hexdigest()
    if actual != expected:
        raise StudyError(
            f"{path} decodes to data that differs from the published Fashion-MNIST (SHA-256 "
            f"{actual[:12]}... != {expected[:12]}...); {_FIX}"
        )
