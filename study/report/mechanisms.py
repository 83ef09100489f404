"""What the CKA and attention tables support saying about *why* the models differ, as report sentences.

Each function reads the tables that the ``cka`` and ``attention`` stages wrote under ``reports/tables`` and
returns sentences. The rules:

- a difference is claimed only when its Holm-adjusted interval (computed by the stage, over the family it
  names) excludes zero; otherwise the sentence says "no detectable difference" and gives the interval;
- with fewer than ``min_seeds`` seeds nothing is inferred: the sentences give the means and say why;
- every similarity stands beside its noise level (CKA between two seeds of the same model), every attention
  distance beside uniform attention and the same model at initialisation.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from study.analysis.inference import MIN_SEEDS, t_interval
from study.report.findings import reference_data


def _read(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.is_file() else None


def _pct(fraction: float) -> str:
    return f"{100 * fraction:g}%"


def _interval(low: float, high: float, digits: int, unit: str = "", signed: bool = False) -> str:
    """"CI 0.61 to 0.74" (or "no interval" when it is undefined)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "no interval"
    sign = "+" if signed else ""
    return f"CI {low:{sign}.{digits}f} to {high:{sign}.{digits}f}{unit}"


def _no_inference(seeds: int, min_seeds: int) -> str:
    return (f"with {seeds} seed{'s' if seeds != 1 else ''} no difference is inferred "
            f"(at least {min_seeds} are needed)")


# --------------------------------------------------------------------------------------------------
# CKA
# --------------------------------------------------------------------------------------------------


def cka_findings(tables: Path, reference: float = 1.0, min_seeds: int = MIN_SEEDS) -> list[str]:
    """Sentences on CKA to a model of another seed trained on the largest fraction (``reference``: full data
    when 1.0), against the cross-seed ceiling, and on cross-model CKA at matched relative depth; ``tables``
    is the reports/tables folder."""
    summary = _read(tables / "cka" / "cka_to_full.csv")
    if summary is None or summary.empty:
        return [f"CKA to a model trained on {reference_data(reference)} is not measured: it compares against a model of another seed, "
                "and the study has one."]
    out = []
    for model, rows in summary.groupby("model", sort=True):
        seeds = int(rows["seeds"].min())
        if seeds < min_seeds:
            out.append(_cka_described(str(model), rows, seeds, min_seeds, reference_data(reference)))
        else:
            out += [_cka_inferred(str(model), r, reference_data(reference)) for r in rows.sort_values("fraction").itertuples()]
    out += _across_findings(tables, min_seeds, reference_data(reference))
    return out


def _cka_described(model: str, rows: pd.DataFrame, seeds: int, min_seeds: int, ref: str) -> str:
    values = ", ".join(f"{r.mean_cka:.2f} at {_pct(r.fraction)}" for r in rows.sort_values("fraction").itertuples())
    return (f"{model}: CKA to a model of another seed trained on {ref}, averaged over relative depth, is {values} "
            f"of the data; two such models of different seeds reach {rows['ceiling_mean'].iloc[0]:.2f} "
            f"(the noise ceiling). Mean of {seeds} seed{'s' if seeds != 1 else ''}; "
            f"{_no_inference(seeds, min_seeds)}.")


def _cka_inferred(model: str, r, ref: str) -> str:
    cka = f"{r.mean_cka:.2f} ({r.confidence:.0%} {_interval(r.ci_low, r.ci_high, 2)})"
    ceiling = f"the cross-seed ceiling {r.ceiling_mean:.2f} ({_interval(r.ceiling_ci_low, r.ceiling_ci_high, 2)})"
    gap = (f"Holm-adjusted {r.gap_confidence:.1%} "
           f"{_interval(r.gap_ci_low, r.gap_ci_high, 2, signed=True)}, {int(r.seeds)} seeds")
    start = (f"At {_pct(r.fraction)} of the data, {model}'s CKA to a model of another seed trained on {ref}, "
             f"averaged over relative depth, is {cka}")
    if r.gap_significant and r.gap_to_ceiling_mean > 0:
        return f"{start}, below {ceiling} by {r.gap_to_ceiling_mean:.2f} ({gap})."
    if r.gap_significant:
        return f"{start}, above {ceiling} by {-r.gap_to_ceiling_mean:.2f} ({gap})."
    return f"{start}: no detectable difference from {ceiling} (gap {r.gap_to_ceiling_mean:+.2f}, {gap})."


def _across_findings(tables: Path, min_seeds: int, ref: str) -> list[str]:
    """Cross-model CKA at matched depth, described beside both models' ceilings (no claim is tested)."""
    summary = _read(tables / "cka" / "cka_across_depth.csv")
    per_seed = _read(tables / "cka" / "cka_across_depth_seeds.csv")
    if summary is None or per_seed is None or summary.empty:
        return []
    out = []
    for (a, b), rows in summary.groupby(["model_a", "model_b"], sort=True):
        mine = per_seed[(per_seed["model_a"] == a) & (per_seed["model_b"] == b)]
        # The depth grid is evenly spaced, so the plain mean over its points is the mean over depth.
        means = mine.groupby("seed")["cka"].mean().to_numpy()
        mean, _, half = t_interval(means, float(rows["confidence"].iloc[0]))
        level = rows["confidence"].iloc[0]
        spread = (f" ({level:.0%} {_interval(mean - half, mean + half, 2)} over {means.size} seeds)"
                  if means.size >= min_seeds else f" (mean of {means.size} seed{'s' if means.size != 1 else ''})")
        ceilings = [f"{c:.2f} ({m})" for m, c in ((a, rows["ceiling_a"].mean()), (b, rows["ceiling_b"].mean()))
                    if math.isfinite(c)]
        noise = (f"; two seeds of the same model reach {' and '.join(ceilings)} on the same depth average"
                 if ceilings else "")
        out.append(f"At matched relative depth, {a} and {b} trained on {ref} have CKA {mean:.2f} averaged over depth"
                   f"{spread}, from {rows['cka_mean'].min():.2f} to {rows['cka_mean'].max():.2f} along it{noise}.")
    return out


# --------------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------------


def attention_findings(tables: Path, min_seeds: int = MIN_SEEDS) -> list[str]:
    """Sentences on the first block's most local head (trained on the largest fraction vs initialisation and
    vs the smallest fraction), the number of local heads and the entropy; ``tables`` is the reports/tables folder."""
    layers = _read(tables / "attention" / "attention_layers.csv")
    contrasts = _read(tables / "attention" / "attention_contrasts.csv")
    if layers is None or layers.empty:
        return []
    out = []
    for model, rows in layers.groupby("model", sort=True):
        first = rows[rows["layer"] == rows["layer"].min()]
        init = first[first["state"] == "init"]
        trained = first[first["state"] == "trained"].sort_values("fraction")
        if init.empty or trained.empty:
            continue
        seeds = int(first["seeds"].min())
        inferred = seeds >= min_seeds
        ends = [trained.iloc[0], trained.iloc[-1]] if len(trained) > 1 else [trained.iloc[-1]]
        where = [("initialisation", init.iloc[0])] + [(f"{_pct(r['fraction'])} of the data", r) for r in ends]
        values = ", ".join(f"{_distance(r, inferred)} at {label}" for label, r in where)
        uniform = first["uniform_distance"].iloc[0]
        sentence = (f"{model}, first block: the most local head's mean attention distance is {values} "
                    f"(uniform attention: {uniform:.2f} px)")
        if not inferred:
            plural = "s" if seeds != 1 else ""
            out.append(f"{sentence}; mean of {seeds} seed{plural}, {_no_inference(seeds, min_seeds)}.")
        else:
            mine = contrasts[(contrasts["model"] == model) & (contrasts["layer"] == first["layer"].iloc[0])]
            ref_cap = reference_data(trained.iloc[-1]["fraction"])
            out.append(f"{sentence}. " + " ".join(_contrast(r, ref_cap) for r in mine.itertuples()))
        full, start = trained.iloc[-1], init.iloc[0]
        ref = reference_data(full["fraction"])
        out.append(
            f"{model}, first block: {full['local_heads']:.1f} of {int(full['heads'])} heads attend below "
            f"{full['local_threshold'] / uniform:.2g}× uniform ({full['local_threshold']:.2f} px) at {ref} and "
            f"{start['local_heads']:.1f} at initialisation (mean over {seeds} seed{'s' if seeds != 1 else ''}); "
            f"mean attention entropy {full['mean_entropy']:.2f} nats at {ref}, "
            f"{start['mean_entropy']:.2f} at initialisation, {full['uniform_entropy']:.2f} for uniform attention."
        )
    return out


def _distance(r: pd.Series, with_interval: bool) -> str:
    if not with_interval:
        return f"{r['most_local_distance']:.2f} px"
    return f"{r['most_local_distance']:.2f} px ({_interval(r['most_local_ci_low'], r['most_local_ci_high'], 2)})"


def _contrast(r, ref: str) -> str:
    label = "initialisation" if r.versus == "init" else f"{_pct(r.versus_fraction)} of the data"
    ci = f"Holm-adjusted {r.confidence:.1%} {_interval(r.ci_low, r.ci_high, 2, ' px', signed=True)}"
    if r.significant:
        direction = "closer (more local)" if r.difference < 0 else "farther (less local)"
        return f"At {ref} it is {abs(r.difference):.2f} px {direction} than at {label} ({ci})."
    return f"At {ref}: no detectable difference from {label} ({r.difference:+.2f} px, {ci})."


# --------------------------------------------------------------------------------------------------
# Limitations
# --------------------------------------------------------------------------------------------------


def limitations(tables: Path) -> list[str]:
    """Caveats that the CKA and attention tables themselves warrant."""
    out = []
    summary = _read(tables / "cka" / "cka_to_full.csv")
    if summary is not None and summary.empty:
        out.append("With one training seed, CKA to the largest fraction has no model of another seed to compare with, "
                   "and so no noise ceiling; it is not reported.")
    elif summary is not None and (summary["ceiling_pairs"] < 2).any():
        out.append("The CKA noise ceiling comes from a single pair of seeds (compared both ways), so its own "
                   "spread across seed pairs is unknown.")
    if _read(tables / "cka" / "cka_across_depth.csv") is not None:
        out.append("Layers of different models are matched by relative depth, each model's recorded layers "
                   "taken as evenly spaced from input (0) to output (1): a convention, not a measured "
                   "correspondence.")
    heads = _read(tables / "attention" / "attention_heads.csv")
    if heads is not None and not heads.empty and int(np.nanmax(heads["seeds"])) > 1:
        out.append("Attention heads have no identity across seeds, so per-head intervals are over each seed's "
                   "k-th most local head, not over a fixed head.")
    return out
