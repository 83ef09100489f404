"""Cross-model CKA averaged over relative depth: one number per pair of models, with its interval over seeds,
beside its noise level (each model's cross-seed ceiling) and its chance level (the pair at initialisation).

The ``cka`` stage writes CKA between two models at each point of the depth grid (per seed, and summarised
over seeds, beside each model's cross-seed ceiling and the pair's CKA at initialisation). The report words one
average per pair; this module computes it, so that the report only reads. The average leaves out the input
embedding: it takes only the grid points the stage marks ``in_depth_mean``, those past both models' first
layer after the embedding (:func:`study.cka.similarity.in_depth_mean`), because the embedding is a
near-linear map of the pixels whose CKA is near 1 for any two models, trained or not. The grid is evenly
spaced, so the plain mean over those points is the mean over that stretch of depth; seeds are the unit of
replication, so the interval is over each seed's depth average. Kept apart from
:mod:`study.cka.similarity` because that module loads models (torch), and this needs only the two tables.
"""

from __future__ import annotations

import pandas as pd

from study.stats.intervals import t_interval

COLUMNS = ["model_a", "model_b", "seeds", "cka_mean", "ci_low", "ci_high", "confidence", "depth_from", "depth_min",
           "depth_max", "ceiling_a", "ceiling_b", "chance_mean"]
# For the table the report stage writes from across_depth_mean().
CAPTION = ("CKA between two models trained on full data, averaged over relative depth from depth_from (the deeper "
           "of the two models' first layers after the input embedding; the embedding, patch embedding or stem, is "
           "left out) to the output: mean and t-interval over seeds, lowest and highest seed mean along that "
           "depth (depth_min, depth_max), each model's cross-seed ceiling (noise level) and the two models' CKA "
           "at initialisation (chance level), averaged over the same depths.")


def across_depth_mean(summary: pd.DataFrame, per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per pair of models, over the grid points past both input embeddings: the mean over seeds of each seed's
    depth-averaged CKA and its t-interval (at the confidence ``summary`` was computed at), the depth the average
    starts at, the lowest and highest seed-mean CKA along it, each model's cross-seed ceiling averaged over it
    (NaN where the model has none) and the chance level: the mean over seeds of the pair's depth-averaged CKA
    at initialisation (NaN where not measured).

    ``summary``: ``cka_across_depth`` (per pair and depth, over seeds); ``per_seed``: ``cka_across_depth_seeds``."""
    summary = summary[summary["in_depth_mean"].astype(bool)]
    per_seed = per_seed[per_seed["in_depth_mean"].astype(bool)]
    rows = []
    for (a, b), g in summary.groupby(["model_a", "model_b"], sort=True):
        seeds = per_seed[(per_seed["model_a"] == a) & (per_seed["model_b"] == b)].groupby("seed")
        means = seeds["cka"].mean().to_numpy()
        confidence = float(g["confidence"].iloc[0])
        mean, _, half = t_interval(means, confidence)
        rows.append({"model_a": a, "model_b": b, "seeds": means.size, "cka_mean": mean, "ci_low": mean - half,
                     "ci_high": mean + half, "confidence": confidence, "depth_from": g["relative_depth"].min(),
                     "depth_min": g["cka_mean"].min(), "depth_max": g["cka_mean"].max(),
                     "ceiling_a": g["ceiling_a"].mean(), "ceiling_b": g["ceiling_b"].mean(),
                     "chance_mean": seeds["chance"].mean().mean()})
    return pd.DataFrame(rows, columns=COLUMNS)
