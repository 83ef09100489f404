"""Validation of the robustness probes' settings, before any work: one line naming the problem and the fix.

Kept apart from :mod:`study.robustness.probes`, and free of its code, because the parameters layer
(:mod:`study.core.config`) runs it in every stage: every stage's code deps (dvc.yaml) then hold this file only, not the
probe library, so editing a probe makes only the robustness stage stale. The names and limits here are those of
the library; tests/robustness/test_probes.py checks that they agree.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

from study.core.errors import StudyError

# The corruption suite, in the order of study.robustness.probes.CORRUPTIONS: MNIST-C's 15, then three from the
# ImageNet-C / MNIST-C tables.
CORRUPTION_NAMES: tuple[str, ...] = (
    "shot_noise", "impulse_noise", "glass_blur", "motion_blur", "shear", "scale", "rotate", "brightness",
    "translate", "stripe", "fog", "spatter", "dotted_line", "zigzag", "canny_edges",
    "gaussian_noise", "gaussian_blur", "contrast")
# The smallest image side each corruption runs on, where it is above 1 px: spatter blurs its noise with a
# reflected border of ⌈3σ⌉ = 12 px (σ up to 4, corrupt_pixels.SPATTER), which must be smaller than the image
# (torch's reflect padding).
MIN_IMAGE_SIZE: dict[str, int] = {"spatter": 13}


def divisors(n: int) -> list[int]:
    """The grid sizes that tile an ``n``-pixel side exactly."""
    return [d for d in range(1, n + 1) if n % d == 0]


def check_grid(height: int, width: int, grid: int, probe: str) -> tuple[int, int]:
    """The cell size ``(cell_h, cell_w)`` of a ``grid``×``grid`` grid, or a one-line StudyError."""
    if isinstance(grid, bool) or not isinstance(grid, numbers.Integral) or grid < 1:
        raise StudyError(f"{probe}: grid {grid!r} must be a positive integer (cells per side)")
    if height % grid or width % grid:
        raise StudyError(f"{probe}: a {grid}x{grid} grid does not divide the {height}x{width} image; choose "
                         f"a grid that divides {math.gcd(height, width)}: "
                         f"{', '.join(map(str, divisors(math.gcd(height, width))))}")
    return height // grid, width // grid


def check_share(share: float, probe: str = "occlusion") -> float:
    """``share`` as a float in [0, 1], or a one-line StudyError."""
    if isinstance(share, bool) or not isinstance(share, numbers.Real) or not 0.0 <= share <= 1.0:
        raise StudyError(f"{probe}: share {share!r} is outside [0, 1]; give the fraction of cells to hide, "
                         "e.g. 0.5")
    return float(share)


def check_corruption(name: str) -> None:
    """A one-line StudyError listing the valid names unless ``name`` is a known corruption."""
    if name not in CORRUPTION_NAMES:
        raise StudyError(f"unknown corruption {name!r}; choose from {', '.join(CORRUPTION_NAMES)}")


def check_image_size(name: str, height: int, width: int) -> None:
    """A one-line StudyError when corruption ``name`` cannot run on ``height`` × ``width`` images."""
    smallest = MIN_IMAGE_SIZE.get(name, 1)
    if min(height, width) < smallest:
        raise StudyError(f"corruption {name} needs images of at least {smallest}x{smallest} px, got {height}x{width}; "
                         "leave it out for these images")


def check_severity(severity: int) -> int:
    """``severity`` as an int in 0..5, or a one-line StudyError."""
    if isinstance(severity, bool) or not isinstance(severity, numbers.Integral) or not 0 <= severity <= 5:
        raise StudyError(f"corruption severity {severity!r} is out of range; use integers 1 to 5 "
                         "(0 is the clean image)")
    return int(severity)


def check_probe_settings(image_size: int, grids: Iterable[int], shares: Iterable[float],
                         corruptions: Iterable[str], severities: Iterable[int], shifts: Iterable[int] = ()
                         ) -> None:
    """Raise StudyError for the first impossible setting: a grid that does not divide the image side, a
    share outside [0, 1], an unknown corruption or one the image is too small for (:data:`MIN_IMAGE_SIZE`), a
    severity outside 0–5, a shift that is not a whole number of pixels smaller than the image."""
    if isinstance(image_size, bool) or not isinstance(image_size, numbers.Integral) or image_size < 1:
        raise StudyError(f"robustness: image size {image_size!r} must be a positive integer")
    for grid in grids:
        check_grid(image_size, image_size, grid, "robustness")
    for share in shares:
        check_share(share, "robustness")
    for name in corruptions:
        check_corruption(name)
        check_image_size(name, image_size, image_size)
    for severity in severities:
        check_severity(severity)
    for shift in shifts:
        if isinstance(shift, bool) or not isinstance(shift, numbers.Integral) or not 0 <= shift < image_size:
            raise StudyError(f"robustness: shift {shift!r} must be a whole number of pixels in "
                             f"[0, {image_size}); a shift of the whole image leaves it black")
