"""Cross-model CKA averaged over relative depth: one number per pair of models, with its interval over seeds.

The ``cka`` stage writes CKA between two models at each point of the depth grid (per seed, and summarised
over seeds, beside each model's cross-seed ceiling). The report words one average per pair; this module
computes it, so that the report only reads. The depth grid is evenly spaced, so the plain mean over its
points is the mean over depth (:mod:`study.analysis.similarity`); seeds are the unit of replication, so the
interval is over each seed's depth average. Kept apart from :mod:`study.analysis.similarity` because that
module loads models (torch), and this needs only the two tables.
"""

from __future__ import annotations

import pandas as pd

from study.analysis.inference import t_interval

COLUMNS = ["model_a", "model_b", "seeds", "cka_mean", "ci_low", "ci_high", "confidence", "depth_min", "depth_max",
           "ceiling_a", "ceiling_b"]


def across_depth_mean(summary: pd.DataFrame, per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per pair of models: the mean over seeds of each seed's depth-averaged CKA and its t-interval (at the
    confidence ``summary`` was computed at), the lowest and highest seed-mean CKA along depth, and each
    model's cross-seed ceiling averaged over depth (NaN where the model has none).

    ``summary``: ``cka_across_depth`` (per pair and depth, over seeds); ``per_seed``: ``cka_across_depth_seeds``."""
    rows = []
    for (a, b), g in summary.groupby(["model_a", "model_b"], sort=True):
        mine = per_seed[(per_seed["model_a"] == a) & (per_seed["model_b"] == b)]
        means = mine.groupby("seed")["cka"].mean().to_numpy()
        confidence = float(g["confidence"].iloc[0])
        mean, _, half = t_interval(means, confidence)
        rows.append({"model_a": a, "model_b": b, "seeds": means.size, "cka_mean": mean, "ci_low": mean - half,
                     "ci_high": mean + half, "confidence": confidence, "depth_min": g["cka_mean"].min(),
                     "depth_max": g["cka_mean"].max(), "ceiling_a": g["ceiling_a"].mean(),
                     "ceiling_b": g["ceiling_b"].mean()})
    return pd.DataFrame(rows, columns=COLUMNS)
