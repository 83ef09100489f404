"""Validation of the robustness settings, before any work: one line naming the problem and the fix."""

from __future__ import annotations

import numbers
from collections.abc import Iterable

from study.analysis.probes.corruptions import check_corruption, check_severity
from study.analysis.probes.grid import check_grid, check_share
from study.errors import StudyError


def check_probe_settings(image_size: int, grids: Iterable[int], shares: Iterable[float],
                         corruptions: Iterable[str], severities: Iterable[int], shifts: Iterable[int] = ()
                         ) -> None:
    """Raise StudyError for the first impossible setting: a grid that does not divide the image side, a
    share outside [0, 1], an unknown corruption, a severity outside 0–5, a shift that is not a whole
    number of pixels smaller than the image."""
    if isinstance(image_size, bool) or not isinstance(image_size, numbers.Integral) or image_size < 1:
        raise StudyError(f"robustness: image size {image_size!r} must be a positive integer")
    for grid in grids:
        check_grid(image_size, image_size, grid, "robustness")
    for share in shares:
        check_share(share, "robustness")
    for name in corruptions:
        check_corruption(name)
    for severity in severities:
        check_severity(severity)
    for shift in shifts:
        if isinstance(shift, bool) or not isinstance(shift, numbers.Integral) or not 0 <= shift < image_size:
            raise StudyError(f"robustness: shift {shift!r} must be a whole number of pixels in "
                             f"[0, {image_size}); a shift of the whole image leaves it black")
