"""Download a missing dataset through torchvision, or fail with one line saying where we looked.

torchvision knows the URLs, mirrors and archive checksums, so we let its dataset classes fetch the files
and then read them with our own stricter readers. Offline, torchvision raises a multi-line
``RuntimeError`` or a ``URLError``; the user should instead see where the data was looked for and what
to do about it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from study.core.errors import StudyError


def download(
    name: str, dataset_class: Callable[..., object], root: str | Path | None, allowed: bool, places: Sequence[Path]
) -> None:
    """Let ``dataset_class`` (a torchvision dataset class: FashionMNIST, CIFAR10, CIFAR100) download into
    ``root``; raise the not-found error if downloading is off or fails."""
    if not allowed:
        raise not_found_error(name, places, "downloading is off")
    if root is None:
        raise not_found_error(name, places, "there is no data.root to download into")
    try:
        dataset_class(str(root), train=True, download=True)
    except (OSError, RuntimeError) as exc:  # URLError is an OSError; torchvision wraps mirror failures
        raise not_found_error(name, places, f"the download failed ({_one_line(exc)})") from exc


def not_found_error(name: str, places: Sequence[Path], why: str) -> StudyError:
    """The one-line error for a dataset that is nowhere on disk and could not be fetched."""
    where = ", ".join(str(place) for place in places) or "no folder (data.root is not set)"
    debian = "install the Debian package dataset-fashion-mnist, " if name == "fashionmnist" else ""
    return StudyError(
        f"dataset {name} not found at {where} and {why}; {debian}set data.root to a folder holding "
        "the files, or go online and rerun"
    )


def _one_line(exc: BaseException) -> str:
    """torchvision's messages span lines; keep the CLI's error on one."""
    return " ".join(str(exc).split())[:200]
