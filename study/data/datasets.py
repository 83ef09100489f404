"""Dataset names the study accepts, and the one entry point that loads any of them by name."""

from __future__ import annotations

from pathlib import Path

from study.data.cifar import load_cifar
from study.data.digits import load_digits
from study.data.fashionmnist import load_fashionmnist
from study.data.schema import Dataset
from study.core.errors import StudyError

DATASETS: tuple[str, ...] = ("fashionmnist", "cifar10", "cifar100", "digits")


def load_dataset(name: str, root: str | Path | None, download: bool = True) -> Dataset:
    """Load dataset ``name`` from files under ``root`` (downloading there if allowed and missing).

    Fashion-MNIST is always checked against the published content; ``digits`` ignores ``root``.
    """
    if name == "fashionmnist":
        return load_fashionmnist(root, download)
    if name in ("cifar10", "cifar100"):
        return load_cifar(name, root, download)
    if name == "digits":
        return load_digits()
    raise StudyError(f"unknown dataset {name!r}; data.dataset must be one of: {', '.join(DATASETS)}")
