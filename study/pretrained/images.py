"""The image folder and each model's own preprocessing.

A pretrained model expects the images it was trained on: its resolution, resize filter, crop and
normalisation. Those come with the checkpoint (timm's data config, a Hugging Face image-processor config, the
study's own run spec) as a :class:`Preprocessing`, and every model's batch is made from the same decoded
images by its own :meth:`Preprocessing.batch`. The folder is an ImageFolder layout (one subfolder per class)
or flat; its JPEG and PNG files are taken in sorted path order, so every run sees the same images.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import torch
from PIL import Image
from torch import Tensor
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as TF

from study.core.errors import StudyError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
INTERPOLATIONS = {mode.value: mode for mode in InterpolationMode}  # "bilinear", "bicubic", "nearest", ...


@dataclass(frozen=True)
class Preprocessing:
    """Resize, centre-crop, scale to [0, 1], normalise: the usual evaluation transform.

    ``resize``: an int resizes the shorter side to it (aspect ratio kept, as timm and torchvision), an
    ``(H, W)`` pair resizes to exactly that (Hugging Face's ViT processor). ``crop`` ``(H, W)`` is the model's
    input size. ``source`` says where these values came from, for the report.
    """

    resize: int | tuple[int, int]
    crop: tuple[int, int]
    interpolation: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    source: str

    def __post_init__(self) -> None:
        if self.interpolation not in INTERPOLATIONS:
            raise StudyError(f"interpolation {self.interpolation!r} ({self.source}) is not supported; use one of "
                             f"{', '.join(sorted(INTERPOLATIONS))}")
        if len(self.mean) != len(self.std) or len(self.mean) not in (1, 3):
            raise StudyError(f"mean {self.mean} and std {self.std} ({self.source}) need 1 or 3 values each")

    @property
    def channels(self) -> int:
        return len(self.mean)

    def pictures(self, images: Sequence[Image.Image]) -> Tensor:
        """Decoded images -> the model's crops in [0, 1], ``(B, C, H, W)`` float32, not normalised."""
        mode = "L" if self.channels == 1 else "RGB"
        crops = []
        size = list(self.resize) if isinstance(self.resize, tuple) else [self.resize]
        for image in images:
            # Resized by Pillow, as timm's and Hugging Face's evaluation transforms do: the same filter, the
            # same pixels.
            image = TF.resize(image.convert(mode), size, interpolation=INTERPOLATIONS[self.interpolation])
            crops.append(TF.pil_to_tensor(TF.center_crop(image, list(self.crop))))  # (C, H, W) uint8
        return torch.stack(crops).float() / 255.0  # (B, C, H, W)

    def normalise(self, pictures: Tensor) -> Tensor:
        """Crops in [0, 1] ``(B, C, H, W)`` -> the model's input."""
        mean = torch.tensor(self.mean, dtype=pictures.dtype, device=pictures.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=pictures.dtype, device=pictures.device).view(1, -1, 1, 1)
        return (pictures - mean) / std

    def batch(self, images: Sequence[Image.Image]) -> Tensor:
        """Decoded images -> normalised model input ``(B, C, H, W)``."""
        return self.normalise(self.pictures(images))

    def describe(self) -> str:
        resize = f"{self.resize[0]}x{self.resize[1]}" if isinstance(self.resize, tuple) else f"short side {self.resize}"
        return (f"resize {resize} ({self.interpolation}), crop {self.crop[0]}x{self.crop[1]}, "
                f"mean {_floats(self.mean)}, std {_floats(self.std)}")


def _floats(values: Sequence[float]) -> str:
    return "(" + ", ".join(f"{v:.4g}" for v in values) + ")"


def list_images(folder: str | Path, count: int) -> list[Path]:
    """The first ``count`` JPEG/PNG files under ``folder`` (any depth), in sorted path order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise StudyError(f"{folder}: no such image folder; put JPEG/PNG images there (flat or one subfolder per class)")
    paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if len(paths) < count:
        raise StudyError(f"{folder}: {len(paths)} JPEG/PNG images, but the preset asks for {count}; "
                         "add images or lower images.count")
    return paths[:count]


def read_images(paths: Sequence[Path]) -> list[Image.Image]:
    """Decode ``paths``; a file that is not an image is one line naming it."""
    images = []
    for path in paths:
        try:
            with Image.open(path) as image:
                image.load()
                images.append(image)
        except (OSError, ValueError) as error:
            raise StudyError(f"{path}: not a readable image ({' '.join(str(error).split())}); remove it") from None
    return images


def batches(paths: Sequence[Path], batch_size: int) -> Iterator[list[Image.Image]]:
    """Decoded images, ``batch_size`` at a time; only whole batches (minibatch CKA weighs each batch equally)."""
    usable = len(paths) - len(paths) % batch_size
    for start in range(0, usable, batch_size):
        yield read_images(paths[start : start + batch_size])
