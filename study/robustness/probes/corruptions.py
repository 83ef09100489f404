"""An MNIST-C-style corruption suite on tensors (Mu & Gilmer 2019; Hendrycks & Dietterich 2019).

Mu & Gilmer, "MNIST-C: A Robustness Benchmark for Computer Vision" (ICML 2019 workshop), chose 15
corruptions that keep a 28×28 digit recognisable to people: shot noise, impulse noise, glass blur,
motion blur, shear, scale, rotate, brightness, translate, stripe, fog, spatter, dotted line, zigzag and
canny edges. Their reference code needs ImageMagick, OpenCV and old NumPy/scikit-image and works on
one image at a time; here each is a batched tensor function (torch and Kornia), deterministic on CPU,
for 28×28 grey and 32×32 colour images. MNIST-C applies each at one severity; five are defined here,
from the severity tables its code shares with ImageNet-C (Hendrycks & Dietterich, ICLR 2019) where
they exist. The parameter tables in :mod:`~study.robustness.probes.corrupt_pixels` and
:mod:`~study.robustness.probes.corrupt_spatial` name MNIST-C's level and every departure from its
tables. Three more from those tables — Gaussian noise, Gaussian blur, contrast — complete the suite;
:data:`MNIST_C` lists the 15.

Severity 0 is the clean image; 1–5 grow. :func:`corrupt` is the entry point. ``docs/robustness.md``
describes what each corruption does at each severity.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from study.robustness.settings import (CORRUPTION_NAMES, MIN_IMAGE_SIZE, check_corruption,  # noqa: F401
                                          check_image_size, check_severity)
from study.robustness.probes import corrupt_pixels as pixels
from study.robustness.probes import corrupt_spatial as spatial
from study.robustness.probes.pixels import check_images, from_unit, to_unit
from study.robustness.probes.streams import ImageStreams, check_seed

# A corruption maps float32 (N, C, H, W) in [0, 1], a severity in 1..5 and the images' random streams to
# corrupted float images (clamped by the caller).
Corruption = Callable[[Tensor, int, ImageStreams], Tensor]

CORRUPTIONS: dict[str, Corruption] = {
    # MNIST-C's 15, in its order
    "shot_noise": pixels.shot_noise,
    "impulse_noise": pixels.impulse_noise,
    "glass_blur": spatial.glass_blur,
    "motion_blur": spatial.motion_blur,
    "shear": spatial.shear,
    "scale": spatial.scale,
    "rotate": spatial.rotate,
    "brightness": pixels.brightness,
    "translate": spatial.translate,
    "stripe": pixels.stripe,
    "fog": pixels.fog,
    "spatter": pixels.spatter,
    "dotted_line": spatial.dotted_line,
    "zigzag": spatial.zigzag,
    "canny_edges": spatial.canny_edges,
    # from the ImageNet-C / MNIST-C tables
    "gaussian_noise": pixels.gaussian_noise,
    "gaussian_blur": spatial.gaussian_blur,
    "contrast": pixels.contrast,
}
MNIST_C: tuple[str, ...] = tuple(list(CORRUPTIONS)[:15])
# Corruptions whose output depends on the seed; the others are fixed functions of the image.
SEEDED: frozenset[str] = frozenset({
    "shot_noise", "impulse_noise", "glass_blur", "motion_blur", "shear", "rotate", "translate", "fog",
    "spatter", "dotted_line", "zigzag", "gaussian_noise"})
SEVERITIES: tuple[int, ...] = (1, 2, 3, 4, 5)  # 0 is also accepted: the clean image
def corrupt(images: Tensor, name: str, severity: int, seed: int, start: int = 0) -> Tensor:
    """Apply corruption ``name`` at ``severity`` (0–5) to ``images``.

    ``images`` ``(N, H, W, C)`` uint8 or float in [0, 1], before normalisation; ``seed`` the recorded
    probe seed; ``start`` the index of ``images[0]`` in the evaluation set, so that batches give the same
    images as one call. Image ``i`` draws from a stream keyed by ``(seed, name, start + i)`` and not by the
    severity (the same noise, line positions, angles at every severity). Returns the same dtype, layout
    and device; uint8 results are rounded to nearest.
    """
    check_corruption(name)
    severity = check_severity(severity)
    check_seed(seed)
    check_images(images, f"corruption {name}")
    check_image_size(name, images.shape[1], images.shape[2])
    if severity == 0 or images.shape[0] == 0:
        return images.clone()
    x = to_unit(images)  # (N, H, W, C) -> float32 (N, C, H, W) in [0, 1]
    rng = ImageStreams(images.shape[0], seed, ("corruption", name), start, device=x.device)
    return from_unit(CORRUPTIONS[name](x, severity, rng), images)
