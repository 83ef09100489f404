"""How the report writes numbers and the phrases that recur across its sections: one formatter per kind.

Two kinds of percentage, kept apart because they answer different questions:

- :func:`percent` — a quantity that is set, not measured (a training-set fraction, a split, a confidence
  level): printed exactly, so 0.005 is "0.5%" and 0.01 is "1%", never "0%" or "1.0%".
- :func:`share` — a measured share (accuracy, agreement): one decimal, as the tables round it.

Intervals are written one way everywhere (:func:`interval`), counts with their noun (:func:`plural`).
"""

from __future__ import annotations

import math


def percent(fraction: float) -> str:
    """A set fraction as an exact percentage: 0.005 -> "0.5%", 0.01 -> "1%", 0.95 -> "95%"."""
    return f"{100 * fraction:g}%"


def share(value: float | None, digits: int = 1) -> str:
    """A measured share as a percentage at ``digits`` places: 0.9013 -> "90.1%"; missing -> "n/a"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100 * value:.{digits}f}%"


def points(value: float) -> str:
    """A difference of shares in signed percentage points: -0.097 -> "-9.7"."""
    return f"{100 * value:+.1f}"


def interval(low: float, high: float, digits: int, *, scale: float = 1.0, signed: bool = False,
             unit: str = "", label: str = "CI") -> str:
    """"CI 0.61 to 0.74" (``label``, both ends times ``scale`` at ``digits`` places, then ``unit``), or
    "no interval" when either end is undefined (fewer than two seeds)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "no interval"
    sign = "+" if signed else ""
    return f"{label} {scale * low:{sign}.{digits}f} to {scale * high:{sign}.{digits}f}{unit}"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and its noun: "1 seed", "3 seeds", "0 seeds"; ``nouns`` for an irregular plural."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def images(count: float) -> str:
    """A number of training images: 5700 -> "5,700 images"."""
    return f"{int(round(count)):,} images"


def reference_data(fraction: float) -> str:
    """How sentences name the largest fraction, the reference of every "to the largest" comparison: "full
    data" when it is the whole training set, else "the largest fraction (10% of the data)"."""
    return "full data" if fraction >= 1.0 else f"the largest fraction ({percent(fraction)} of the data)"


def no_inference(seeds: int, min_seeds: int) -> str:
    """Why a comparison is described, not tested."""
    return f"with {plural(seeds, 'seed')} no difference is inferred (at least {min_seeds} are needed)"
