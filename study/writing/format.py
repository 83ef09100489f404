"""How the report writes numbers and the phrases that recur across its sections: one formatter per kind.

Two kinds of percentage, kept apart because they answer different questions:

- :func:`percent` — a quantity that is set, not measured (a training-set fraction, a split, a confidence
  level): printed exactly, so 0.005 is "0.5%" and 0.01 is "1%", never "0%" or "1.0%".
- :func:`share` — a measured share (accuracy, agreement): one decimal, as the tables round it.

Intervals are written one way everywhere (:func:`interval`), counts with their noun (:func:`plural`), a null
result with the differences it excludes (:func:`no_detectable`), and why intervals come at several confidence
levels is said once (:func:`confidence_levels`).
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


def no_detectable(what: str, mean: str, ci: str, bound: float, digits: int, *, scale: float = 1.0, unit: str = "",
                  versus: str = "") -> str:
    """A null result with the equivalence bound of its table (:func:`study.stats.intervals.equivalence_bound`):
    "no detectable difference from X (+1.0 points, CI -2.0 to +3.0; differences beyond ±3.0 points excluded)".

    ``mean`` and ``ci`` come written; ``bound`` is printed times ``scale`` at ``digits`` places with ``unit``. An
    undefined bound (NaN) leaves its clause out. A reader can then tell "equal within 0.5 points" from "anything
    between −10 and +10 points", which "no detectable difference" alone does not say.
    """
    excluded = f"; {what}s beyond ±{scale * bound:.{digits}f}{unit} excluded" if math.isfinite(bound) else ""
    return f"no detectable {what}{versus} ({mean}, {ci}{excluded})"


def confidence_levels(confidence: float) -> str:
    """Why the report's intervals come at several confidence levels (Holm 1979): a short paragraph, said once.

    Holm's step-down procedure tests the comparison with the k-th smallest of m p-values at level α/(m − k + 1);
    the report shows each comparison's interval at the matching confidence, so it excludes 0 exactly when Holm
    rejects (:func:`study.stats.intervals.holm_intervals`).
    """
    alpha = 1.0 - confidence
    examples = ", ".join(share(1.0 - alpha / m) for m in (2, 3, 4))
    return (f"Intervals are {percent(confidence)} Student-t intervals over seeds unless marked Holm-adjusted. In a "
            "family of m comparisons, the one with the k-th smallest p-value is shown at the level Holm's procedure "
            f"tests it at, 1 − α/(m − k + 1) with α = {percent(alpha)} (hence {examples} …); once Holm stops "
            "rejecting, the remaining comparisons keep that step's level. An adjusted interval therefore excludes 0 "
            "exactly when Holm rejects; where it includes 0, the differences it excludes are stated as an "
            "equivalence bound, the larger of its two ends in absolute value. Only the analysis plan's claims carry "
            "verdicts (\"The plan's claims\", one Holm family across all of them); every other statement below is "
            "exploratory: its family is its own table's, and it describes an interval, not a finding.")
