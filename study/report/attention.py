"""The report's sentences about attention: how local the first block's heads become, and against what.

Read from the ``attention`` stage's ``attention_layers`` and ``attention_contrasts`` tables. Every distance
stands beside uniform attention and the same model at initialisation; a change is claimed only when its
Holm-adjusted interval (computed by the stage over each model's contrasts) excludes zero, and with fewer
than ``min_seeds`` seeds nothing is inferred.
"""

from __future__ import annotations

import pandas as pd

from study.analysis.inference import MIN_SEEDS
from study.report.format import interval, no_inference, percent, plural, reference_data, share


def attention_findings(layers: pd.DataFrame | None, contrasts: pd.DataFrame | None,
                       min_seeds: int = MIN_SEEDS) -> list[str]:
    """Sentences on the first block's most local head (trained on the largest fraction vs initialisation and
    vs the smallest fraction), the number of local heads and the entropy."""
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
        where = [("initialisation", init.iloc[0])] + [(f"{percent(r['fraction'])} of the data", r) for r in ends]
        values = ", ".join(f"{_distance(r, inferred)} at {label}" for label, r in where)
        uniform = first["uniform_distance"].iloc[0]
        sentence = (f"{model}, first block: the most local head's mean attention distance is {values} "
                    f"(uniform attention: {uniform:.2f} px)")
        if not inferred:
            out.append(f"{sentence}; mean of {plural(seeds, 'seed')}, {no_inference(seeds, min_seeds)}.")
        else:
            mine = contrasts[(contrasts["model"] == model) & (contrasts["layer"] == first["layer"].iloc[0])]
            ref_cap = reference_data(trained.iloc[-1]["fraction"])
            out.append(f"{sentence}. " + " ".join(_contrast(r, ref_cap) for r in mine.itertuples()))
        full, start = trained.iloc[-1], init.iloc[0]
        ref = reference_data(full["fraction"])
        out.append(
            f"{model}, first block: {full['local_heads']:.1f} of {int(full['heads'])} heads attend below "
            f"{full['local_threshold'] / uniform:.2g}× uniform ({full['local_threshold']:.2f} px) at {ref} and "
            f"{start['local_heads']:.1f} at initialisation (mean over {plural(seeds, 'seed')}); "
            f"mean attention entropy {full['mean_entropy']:.2f} nats at {ref}, "
            f"{start['mean_entropy']:.2f} at initialisation, {full['uniform_entropy']:.2f} for uniform attention."
        )
    return out


def _distance(r: pd.Series, with_interval: bool) -> str:
    if not with_interval:
        return f"{r['most_local_distance']:.2f} px"
    return f"{r['most_local_distance']:.2f} px ({interval(r['most_local_ci_low'], r['most_local_ci_high'], 2)})"


def _contrast(r, ref: str) -> str:
    label = "initialisation" if r.versus == "init" else f"{percent(r.versus_fraction)} of the data"
    ci = f"Holm-adjusted {share(r.confidence)} {interval(r.ci_low, r.ci_high, 2, unit=' px', signed=True)}"
    if r.significant:
        direction = "closer (more local)" if r.difference < 0 else "farther (less local)"
        return f"At {ref} it is {abs(r.difference):.2f} px {direction} than at {label} ({ci})."
    return f"At {ref}: no detectable difference from {label} ({r.difference:+.2f} px, {ci})."
