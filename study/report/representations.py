"""The report's sentences about representations: what the CKA tables support saying about why models differ.

Read from the ``cka`` stage's ``cka_to_full`` table and from the depth average of cross-model CKA
(:func:`study.analysis.cka_depth.across_depth_mean`). The rules:

- a difference is claimed only when its Holm-adjusted interval (computed by the stage, over the family it
  names) excludes zero; otherwise the sentence says "no detectable difference" and gives the interval;
- with fewer than ``min_seeds`` seeds nothing is inferred: the sentences give the means and say why;
- every similarity stands beside its noise level (CKA between two seeds of the same model).
"""

from __future__ import annotations

import math

import pandas as pd

from study.analysis.inference import MIN_SEEDS
from study.report.format import interval, no_inference, percent, plural, reference_data, share


def cka_findings(to_full: pd.DataFrame | None, across: pd.DataFrame | None, reference: float = 1.0,
                 min_seeds: int = MIN_SEEDS) -> list[str]:
    """Sentences on CKA to a model of another seed trained on the largest fraction (``reference``: full data
    when 1.0), against the cross-seed ceiling (``to_full``: ``cka_to_full``), and on cross-model CKA at
    matched relative depth (``across``: its depth average per pair of models)."""
    ref = reference_data(reference)
    if to_full is None or to_full.empty:
        return [f"CKA to a model trained on {ref} is not measured: it compares against a model of another seed, "
                "and the study has one."]
    out = []
    for model, rows in to_full.groupby("model", sort=True):
        seeds = int(rows["seeds"].min())
        if seeds < min_seeds:
            out.append(_described(str(model), rows, seeds, min_seeds, ref))
        else:
            out += [_inferred(str(model), r, ref) for r in rows.sort_values("fraction").itertuples()]
    return out + _across(across, min_seeds, ref)


def _described(model: str, rows: pd.DataFrame, seeds: int, min_seeds: int, ref: str) -> str:
    values = ", ".join(f"{r.mean_cka:.2f} at {percent(r.fraction)}" for r in rows.sort_values("fraction").itertuples())
    return (f"{model}: CKA to a model of another seed trained on {ref}, averaged over relative depth, is {values} "
            f"of the data; two such models of different seeds reach {rows['ceiling_mean'].iloc[0]:.2f} "
            f"(the noise ceiling). Mean of {plural(seeds, 'seed')}; {no_inference(seeds, min_seeds)}.")


def _inferred(model: str, r, ref: str) -> str:
    cka = f"{r.mean_cka:.2f} ({percent(r.confidence)} {interval(r.ci_low, r.ci_high, 2)})"
    ceiling = f"the cross-seed ceiling {r.ceiling_mean:.2f} ({interval(r.ceiling_ci_low, r.ceiling_ci_high, 2)})"
    gap = (f"Holm-adjusted {share(r.gap_confidence)} "
           f"{interval(r.gap_ci_low, r.gap_ci_high, 2, signed=True)}, {int(r.seeds)} seeds")
    start = (f"At {percent(r.fraction)} of the data, {model}'s CKA to a model of another seed trained on {ref}, "
             f"averaged over relative depth, is {cka}")
    if r.gap_significant and r.gap_to_ceiling_mean > 0:
        return f"{start}, below {ceiling} by {r.gap_to_ceiling_mean:.2f} ({gap})."
    if r.gap_significant:
        return f"{start}, above {ceiling} by {-r.gap_to_ceiling_mean:.2f} ({gap})."
    return f"{start}: no detectable difference from {ceiling} (gap {r.gap_to_ceiling_mean:+.2f}, {gap})."


def _across(across: pd.DataFrame | None, min_seeds: int, ref: str) -> list[str]:
    """Cross-model CKA at matched depth, described beside both models' ceilings (no claim is tested)."""
    if across is None:
        return []
    out = []
    for r in across.itertuples():
        spread = (f" ({percent(r.confidence)} {interval(r.ci_low, r.ci_high, 2)} over {r.seeds} seeds)"
                  if r.seeds >= min_seeds else f" (mean of {plural(r.seeds, 'seed')})")
        ceilings = [f"{c:.2f} ({m})" for m, c in ((r.model_a, r.ceiling_a), (r.model_b, r.ceiling_b))
                    if math.isfinite(c)]
        noise = (f"; two seeds of the same model reach {' and '.join(ceilings)} on the same depth average"
                 if ceilings else "")
        out.append(f"At matched relative depth, {r.model_a} and {r.model_b} trained on {ref} have CKA {r.cka_mean:.2f} "
                   f"averaged over depth{spread}, from {r.depth_min:.2f} to {r.depth_max:.2f} along it{noise}.")
    return out
