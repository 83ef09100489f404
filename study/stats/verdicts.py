"""What an interval allows a report to say: the one place a verdict is decided and worded.

A verdict is given only to a claim of the analysis plan (``analysis.plan``, stage ``plan``), from its
Holm-adjusted interval and the smallest effect of interest declared with it; every other interval a report shows
is exploratory and carries no verdict word.

- :func:`classify` — an interval against the smallest effect: supported, refuted / no effect, reversed,
  inconclusive (with the effects the data exclude), undefined.
- :func:`scope` — a claim with a matched control (the same damage off the ViT's patch grid, say): whether the
  effect is specific to its condition. "Only under the condition" needs the interaction (per seed, the contrast
  under the condition minus the contrast under the control) to exclude 0 in the claim's direction **and** the
  contrast under the control to lie inside the smallest effect; a significant effect under one condition and a
  non-significant one under the other is not a difference (Gelman & Stern 2006; Nieuwenhuis et al. 2011).
- :func:`words` and :func:`scope_words` — the verdict column's text, from the labels above and nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from study.stats.intervals import MIN_SEEDS

SUPPORTED, REFUTED, NO_EFFECT, REVERSED, INCONCLUSIVE, UNDEFINED, TOO_FEW = (
    "supported", "refuted", "no effect", "reversed", "inconclusive", "undefined", "too few seeds")
# An effect shown to exist and shown to be smaller than the smallest effect of interest: its own verdict, since
# the claim asked for an effect of interest.
SMALLER = "smaller than the smallest effect"
# A test outside every family: the plan's exploratory claims, a closed gate, a value fixed by construction.
EXPLORATORY, NOT_TESTED, FACT = "exploratory", "not tested", "fixed by construction"
# Scopes of a controlled claim (:func:`scope`).
ONLY, LARGER, BOTH, OPPOSITE, UNSEPARATED = "only", "larger", "both", "larger under the control", "unseparated"


@dataclass(frozen=True)
class Verdict:
    """What an adjusted interval says about an effect of interest: ``label`` and ``bound``, the largest |effect| the
    interval leaves possible (max(|low|, |high|); NaN where the effect is supported or the interval undefined)."""

    label: str
    bound: float


def classify(low: float, high: float, smallest_effect: float, direction: int = 0, seeds: int | None = None,
             rejected: bool = False) -> Verdict:
    """Classify an adjusted interval ``[low, high]`` of an effect against the smallest effect of interest
    ``smallest_effect`` (> 0), for a claim in ``direction`` (+1: the effect is positive, −1: negative, 0: any
    difference):

    - **smaller than the smallest effect** — an effect on the claimed side is shown (the interval excludes 0, or
      ``rejected``: the family's step-down test rejected it) and the interval lies inside ``±smallest_effect``;
    - **supported** — an effect on the claimed side is shown (either side for direction 0), the interval reaching
      beyond the smallest effect;
    - **refuted** (a directional claim) / **no effect** (direction 0) — the interval lies inside
      ``±smallest_effect``: every effect of interest is excluded (an equivalence statement: a ``1 − a`` interval
      inside the margin is a TOST at level ``a/2``, Schuirmann 1987; Lakens 2017);
    - **reversed** — a directional claim whose interval lies wholly on the other side of 0, beyond the margin;
    - **inconclusive** — anything else: effects beyond ``±bound`` are excluded, smaller ones are not;
    - **undefined** — no interval (NaN bounds: fewer than 2 seeds, or the condition was not run);
    - **too few seeds** — given ``seeds`` below :data:`study.stats.intervals.MIN_SEEDS`: described, never inferred.
    """
    if direction not in (-1, 0, 1):
        raise ValueError(f"direction = {direction}: +1, -1 or 0")
    if not smallest_effect > 0:
        raise ValueError(f"smallest_effect = {smallest_effect}: must be positive")
    if seeds is not None and seeds < MIN_SEEDS:
        return Verdict(TOO_FEW, math.nan)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Verdict(UNDEFINED, math.nan)
    bound = float(max(abs(low), abs(high)))
    inside = -smallest_effect < low and high < smallest_effect
    centre = (low + high) / 2
    shown = (direction >= 0 and (low > 0 or (rejected and centre > 0))) or \
            (direction <= 0 and (high < 0 or (rejected and centre < 0)))
    if shown:
        return Verdict(SMALLER, bound) if inside else Verdict(SUPPORTED, math.nan)
    if inside:
        return Verdict(REFUTED if direction else NO_EFFECT, bound)
    if (direction > 0 and high < 0) or (direction < 0 and low > 0):
        return Verdict(REVERSED, bound)
    return Verdict(INCONCLUSIVE, bound)


def scope(interaction: tuple[float, float], control: tuple[float, float], smallest_effect: float,
          direction: int) -> str:
    """Whether a claim's effect is specific to its condition, from the adjusted intervals of the ``interaction``
    (condition − control, per seed) and of the contrast under the ``control``, in the claim's ``direction`` (±1):

    - **only** — the interaction excludes 0 in ``direction`` and the control's contrast lies inside
      ``±smallest_effect``;
    - **larger** — the interaction excludes 0 in ``direction``, the control's contrast is not shown to be small;
    - **both** — the interaction is not shown, and the control's contrast excludes 0 in ``direction`` too;
    - **larger under the control** — the interaction excludes 0 against ``direction``;
    - **unseparated** — none of these: the data cannot tell the condition from its control;
    - **undefined** — an interval is missing.
    """
    if direction not in (-1, 1):
        raise ValueError(f"direction = {direction}: a controlled claim is directional (+1 or -1)")
    values = (*interaction, *control)
    if not all(math.isfinite(v) for v in values):
        return UNDEFINED
    (i_low, i_high), (c_low, c_high) = interaction, control
    ahead = i_low > 0 if direction > 0 else i_high < 0
    behind = i_high < 0 if direction > 0 else i_low > 0
    if ahead:
        return ONLY if -smallest_effect < c_low and c_high < smallest_effect else LARGER
    if behind:
        return OPPOSITE
    if (c_low > 0) if direction > 0 else (c_high < 0):
        return BOTH
    return UNSEPARATED


def words(verdict: Verdict, unit: str = "points") -> str:
    """The verdict as the findings table writes it: "supported"; "refuted: no effect beyond ±1.9 points";
    "reversed"; "inconclusive: effects beyond ±7.1 points excluded"; "not measured"."""
    label, bound = verdict.label, verdict.bound
    if label == SUPPORTED:
        return "supported"
    if label in (REFUTED, NO_EFFECT):
        return f"{label}: no effect beyond ±{bound:.1f} {unit}"
    if label == REVERSED:
        return "reversed: the other model is ahead"
    if label == INCONCLUSIVE:
        return f"inconclusive: effects beyond ±{bound:.1f} {unit} excluded"
    if label == SMALLER:
        return f"an effect smaller than the smallest effect of interest: none beyond ±{bound:.1f} {unit}"
    if label == EXPLORATORY:
        return "exploratory: no verdict"
    if label == NOT_TESTED:
        return "not tested: a primary test was not rejected, so the secondary family stays closed"
    if label == FACT:
        return "fixed by construction: the same value in every seed, a fact rather than a test"
    if label == TOO_FEW:
        return f"not inferred: fewer than {MIN_SEEDS} seeds"
    return "not measured"


def scope_words(label: str, control: str) -> str:
    """What :func:`scope` found, worded with the control's description (``control``, e.g. "the same cells offset
    by half a patch")."""
    return {
        ONLY: f"only on its condition: the interaction excludes 0 and with {control} the contrast lies inside the "
              "smallest effect",
        LARGER: f"larger than with {control} (the interaction excludes 0); the contrast there is not shown to be "
                "small",
        BOTH: f"also with {control} (the interaction does not exclude 0)",
        OPPOSITE: f"larger with {control} than on its condition",
        UNSEPARATED: f"not shown to differ from {control} (the interaction's interval includes 0)",
        NOT_TESTED: f"not tested against {control}: the secondary family stays closed",
    }.get(label, f"{control}: not measured")
