"""The plan's tables as a paper cites them: the columns a reader quotes, intervals written as ranges ("-10.4 to
+2.8") with their level, counts as integers. Written as the ``.tex`` beside each full CSV by stage ``plan``, and
printed by the report's plan section: one layout for both.
"""

from __future__ import annotations

import math

import pandas as pd


def compact_tests(tests: pd.DataFrame) -> pd.DataFrame:
    """The tests as a paper cites them: intervals written as ranges, the simultaneous one with its level (Bonferroni
    at its family's size), Holm's adjusted p-value that decides, counts as integers (the report's table and
    ``tests.tex``)."""
    def span(low, high):
        return "–" if not (math.isfinite(low) and math.isfinite(high)) else f"{low:+.1f} to {high:+.1f}"

    def number(value, digits):
        return f"{value:.{digits}f}" if isinstance(value, (int, float)) and math.isfinite(value) else "–"

    return pd.DataFrame({
        "claim": tests["claim"], "test": tests["test"], "family": tests["family"],
        "condition": tests["condition"], "fractions": tests["fractions_declared"], "images": tests["images"],
        "seeds": [number(n, 0) for n in tests["seeds"]],
        "mean": [f"{m:+.1f}" if math.isfinite(m) else "–" for m in tests["mean"]],
        "95% CI": [span(lo, hi) for lo, hi in zip(tests["ci_low"], tests["ci_high"])],
        "simultaneous CI": [span(lo, hi) + (f" ({100 * c:.2f}%)" if math.isfinite(c) else "")
                            for lo, hi, c in zip(tests["adj_low"], tests["adj_high"], tests["adj_confidence"])],
        "Holm p": [number(v, 4) for v in tests["p_holm"]],
        "seed SD": [number(v, 2) for v in tests["seed_sd"]], "verdict": tests["verdict"],
        "pilot SD": [number(v, 2) for v in tests["pilot_sd"]],
        "power": [number(v, 2) for v in tests["power"]],
        "seeds needed": [number(v, 0) for v in tests["seeds_needed"]], "flagged pairs": tests["flagged_pairs"]})


def compact_claims(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims as a paper cites them (``claims.tex``): each claim's contrast, its control's and the interaction
    as "mean (low to high)" with Holm-adjusted bounds, and the verdict in words."""
    def cell(mean, low, high):
        if not (isinstance(mean, float) and math.isfinite(mean)):
            return "–"
        return f"{mean:+.1f} ({low:+.1f} to {high:+.1f})" if math.isfinite(low) and math.isfinite(high) \
            else f"{mean:+.1f}"

    return pd.DataFrame({
        "claim": claims["text"], "comparison": claims["comparison"], "condition": claims["condition"],
        "contrast": [cell(*r) for r in zip(claims["mean"], claims["adj_low"], claims["adj_high"])],
        "control": claims["control"].fillna(""),
        "under the control": [cell(*r) for r in zip(claims["control_mean"], claims["control_adj_low"],
                                                    claims["control_adj_high"])],
        "interaction": [cell(*r) for r in zip(claims["interaction_mean"], claims["interaction_adj_low"],
                                               claims["interaction_adj_high"])],
        "verdict": [v + (f"; {s}" if isinstance(s, str) and s else "")
                    for v, s in zip(claims["verdict_words"], claims["scope_words"])]})
