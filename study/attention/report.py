"""The report's sentences about attention: how local the first block's heads become, and against what; the
attention section and the caveat its per-head table warrants among the limitations.

Read from the ``attention`` stage's ``attention_layers``, ``attention_contrasts`` and
``attention_model_contrasts`` tables. Every distance stands beside uniform attention and the same model at
initialisation, the most local head beside the mean over heads; a change is claimed only when its Holm-adjusted
interval (computed by the stage) excludes zero, a null result carries the differences its interval excludes, and
with fewer than ``min_seeds`` seeds nothing is inferred. Whether one model is more local than another is read
from their direct contrast (:func:`model_contrast_sentences`), never from one model's significant change beside
the other's non-significant one.

A study whose stages wrote no ``attention_layers`` has no attention part in the report (:data:`FINDINGS`,
:data:`SECTION`, :data:`LIMITATIONS`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from study import attention
from study.outputs.tables import markdown_table
from study.writing.format import interval, no_detectable, no_inference, percent, plural, reference_data, share
from study.writing.section import Part, Sources, figure
from study.stats.intervals import MIN_SEEDS


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
        values = ", ".join(f"{_distance(r, 'most_local_distance', inferred)} at {label}" for label, r in where)
        spread = ", ".join(f"{_distance(r, 'mean_distance', inferred)} at {label}" for label, r in where)
        uniform = first["uniform_distance"].iloc[0]
        sentence = (f"{model}, first block: the most local head's mean attention distance is {values}; the mean "
                    f"over its heads is {spread} (uniform attention: {uniform:.2f} px)")
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


# The distances of ``attention_layers`` the sentences quote, and the prefix of their interval columns.
_INTERVAL_OF = {"most_local_distance": "most_local", "mean_distance": "mean_distance"}


def _distance(r: pd.Series, column: str, with_interval: bool) -> str:
    """Distance ``column`` of a row of ``attention_layers`` (a key of ``_INTERVAL_OF``), with its t-interval over
    seeds when inference is possible."""
    if not with_interval:
        return f"{r[column]:.2f} px"
    prefix = _INTERVAL_OF[column]
    return f"{r[column]:.2f} px ({interval(r[f'{prefix}_ci_low'], r[f'{prefix}_ci_high'], 2)})"


def _contrast(r, ref: str) -> str:
    label = "initialisation" if r.versus == "init" else f"{percent(r.versus_fraction)} of the data"
    ci = f"Holm-adjusted {share(r.confidence)} {interval(r.ci_low, r.ci_high, 2, unit=' px', signed=True)}"
    if r.significant:
        direction = "closer (more local)" if r.difference < 0 else "farther (less local)"
        return f"At {ref} the most local head is {abs(r.difference):.2f} px {direction} than at {label} ({ci})."
    null = no_detectable("difference", f"{r.difference:+.2f} px", ci, r.equivalence_bound, 2, unit=" px",
                         versus=f" from {label}")
    return f"At {ref}, most local head: {null}."


def model_contrast_sentences(contrasts: pd.DataFrame | None, min_seeds: int = MIN_SEEDS) -> list[str]:
    """Per pair of models (e.g. deit − vit), the first block's direct contrast of attention distance, paired by
    seed, at initialisation and at the smallest and the largest fraction: the most local head and the mean over
    heads, each claimed only where its Holm-adjusted interval excludes 0."""
    if contrasts is None or contrasts.empty:
        return []
    out = []
    for comparison, rows in contrasts.groupby("comparison", sort=False):
        a, b = comparison.split(" - ")
        first = rows[rows["layer"] == rows["layer"].min()]
        trained = sorted(first.loc[first["state"] == "trained", "fraction"].unique())
        ends = {trained[0], trained[-1]} if trained else set()
        largest = trained[-1] if trained else float("nan")
        parts = []
        for measure, mine in first.groupby("measure", sort=False):
            shown = [r for r in mine.itertuples() if r.state == "init" or r.fraction in ends]
            clauses = ", ".join(_model_clause(r, a, largest, min_seeds) for r in shown)
            parts.append(f"{measure}: {clauses}")
        family = len(rows) // max(rows["measure"].nunique(), 1)
        out.append(f"{a} − {b}, first block, mean attention distance paired by seed (negative: {a} more local; "
                   f"intervals Holm-adjusted across the {plural(family, 'contrast')} of each measure: every layer "
                   "and fraction, and initialisation) — " + "; ".join(parts) + ".")
    return out


def _model_clause(r, a: str, largest: float, min_seeds: int) -> str:
    """One state of a model contrast: who is more local and by how much, no detectable difference with the
    differences it excludes, or (too few seeds) the mean difference only."""
    where = ("at initialisation" if r.state == "init"
             else f"at {reference_data(largest)}" if r.fraction == largest else f"at {percent(r.fraction)} of the data")
    value = f"{r.difference:+.2f} px"
    if r.seeds < min_seeds:
        return f"{where} {value} ({no_inference(int(r.seeds), min_seeds)})"
    ci = (f"Holm-adjusted {share(r.adj_confidence)} "
          + interval(r.adj_ci_low, r.adj_ci_high, 2, unit=" px", signed=True))
    if r.significant:
        direction = "closer (more local)" if r.difference < 0 else "farther (less local)"
        return f"{where} {a} is {abs(r.difference):.2f} px {direction} ({ci})"
    return f"{where} " + no_detectable("difference", value, ci, r.equivalence_bound, 2, unit=" px")


def head_limitations(heads: pd.DataFrame) -> list[str]:
    """The caveat of per-head intervals (``heads``: ``attention_heads``): heads have no identity across seeds."""
    if heads.empty or int(np.nanmax(heads["seeds"])) <= 1:
        return []
    return ["Attention heads have no identity across seeds, so per-head intervals are over each seed's k-th most "
            "local head, not over a fixed head."]


def _table(sources: Sources, name: str) -> pd.DataFrame:
    return sources.table(attention.FOLDER, name)


def _findings(sources: Sources) -> list[str]:
    return [*attention_findings(_table(sources, attention.LAYERS), _table(sources, attention.CONTRASTS)),
            *model_contrast_sentences(_table(sources, attention.MODEL_CONTRASTS))]


def _section(sources: Sources) -> list[str]:
    lines = ["## Attention", "",
             sources.figure(attention.FOLDER, attention.DISTANCE, "Mean attention distance per head against depth, "
                            "trained and at initialisation; dashed: uniform attention."), ""]
    layers = _table(sources, attention.LAYERS)
    if not layers.empty:
        lines += ["Per layer: the most local head (mean over seeds of each seed's smallest head distance, px), heads "
                  "below 0.75× the uniform distance, and mean attention entropy (nats), trained and at "
                  "initialisation:", "",
                  markdown_table(layers[["model", "state", "fraction", "layer", "seeds", "most_local_distance",
                                         "most_local_ci_low", "most_local_ci_high", "mean_distance", "local_heads",
                                         "mean_entropy", "uniform_distance", "uniform_entropy"]], 2), ""]
    for png in sources.figures_starting(attention.FOLDER, attention.MAPS_FIGURE):
        lines += [figure(png, sources.report_dir, png.stem.replace("_", " ")), ""]
    return lines


_NEEDS = tuple((attention.FOLDER, name) for name in (attention.LAYERS, attention.CONTRASTS,
                                                      attention.MODEL_CONTRASTS))
FINDINGS = Part(_findings, needs=_NEEDS)
SECTION = Part(_section, needs=_NEEDS)
LIMITATIONS = Part(lambda sources: head_limitations(_table(sources, attention.HEADS)),
                   needs=((attention.FOLDER, attention.HEADS),))
