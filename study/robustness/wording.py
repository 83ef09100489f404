"""How the report writes the robustness probes: each probe, variant and level in words, a comparison with its
minus sign, the training-set sizes a claim holds at, and one contrast with its adjusted interval or the
differences it excludes (:mod:`study.robustness.report` words the findings with them)."""

from __future__ import annotations

import pandas as pd

from study.writing.format import interval, no_detectable, plural

PROBE_WORDS = {"occlusion": "occlusion", "rearrangement": "patch shuffle", "translation": "shift",
               "corruption": "corruption", "consistency": "1-px consistency"}
VARIANT_WORDS = {"aligned": "patch grid", "offset": "offset grid", "shuffle": "", "x": "along x", "y": "along y",
                 "diagonal": "diagonally"}


def minus(comparison: str) -> str:
    """"vit - resnet" as the report's sentences write it: "vit − resnet"."""
    return comparison.replace(" - ", " − ")


def level(probe: str, value: float) -> str:
    """A probe's level: "50%" of the cells occluded, a "4x4" shuffle, a "2 px" shift, a corruption's "severity 3"."""
    if probe == "occlusion":
        return f"{100 * value:g}%"
    if probe == "rearrangement":
        return f"{value:g}x{value:g}"
    if probe == "translation":
        return f"{value:g} px"
    return f"severity {value:g}"


def condition(probe: str, variant: str) -> str:
    """A probe and its variant: "occlusion (patch grid)", "shift (along x)", a corruption by its name."""
    if probe == "corruption":
        return str(variant).replace("_", " ")
    words = VARIANT_WORDS.get(str(variant), str(variant))
    return f"{PROBE_WORDS.get(probe, probe)} ({words})" if words else PROBE_WORDS.get(probe, probe)


def sizes(rows: pd.DataFrame, every: int) -> str:
    """The training-set sizes of ``rows``: "every fraction" where they are all ``every`` of them."""
    found = sorted(rows["train_images"].unique())
    if len(found) == every and every > 1:
        return "every fraction"
    return ", ".join(f"{int(n):,}" for n in found) + " images"


def cost(r, scale: float = 100.0, unit: str = " points") -> str:
    """What switching a part of a model off costs, from the contrast ``variant − model`` (``r``): the cost is its
    negative, so positive means the variant scores lower; "a cost of +12.3 points (Holm-adjusted CI +10.1 to
    +14.5)", a null with its equivalence bound, or (too few seeds) the mean only."""
    value = f"{-scale * r.diff_mean:+.1f}{unit}"
    if not r.inference:
        return f"a cost of {value} (descriptive, {plural(int(r.seeds), 'seed')})"
    ci = interval(-r.adj_ci_high, -r.adj_ci_low, 1, scale=scale, signed=True, label="Holm-adjusted CI")
    if r.significant:
        return f"a cost of {value} ({ci})"
    return no_detectable("cost", value, ci, r.equivalence_bound, 1, scale=scale, unit=unit)


def clause(r, a: str, b: str, scale: float = 100.0, unit: str = " points") -> str:
    """One contrast: who is ahead and by how much with the adjusted interval, or no detectable difference with the
    equivalence bound, or (too few seeds) the mean only."""
    mean = f"{scale * r.diff_mean:+.1f}{unit}"
    if not r.inference:
        return f"{mean} (descriptive, {plural(int(r.seeds), 'seed')})"
    ci = interval(r.adj_ci_low, r.adj_ci_high, 1, scale=scale, signed=True, label="Holm-adjusted CI")
    if r.significant:
        winner = a if r.diff_mean > 0 else b  # the difference keeps its sign (a − b), as everywhere in the report
        return f"{mean}, {winner} ahead ({ci})"
    return no_detectable("difference", mean, ci, r.equivalence_bound, 1, scale=scale, unit=unit)
