"""How local attention is: where the ViT and the distilled ViT look, how far, and against what baseline.

Over a fixed set of test images, for every training seed and fraction, and for every model at
initialisation (the seed's own weights before the first step: what an untrained network of this shape
already does, so that "local" is judged against it and not only against uniform attention):

- per head and layer, mean attention distance (Dosovitskiy et al. 2021, Fig. 7; Raghu et al. 2021,
  Fig. 3, on how little data stops early heads from becoming local) and attention entropy;
- per layer and seed, the most local head, the number of local heads (mean distance below
  ``LOCAL_SHARE`` × the uniform-attention distance) and the mean entropy; intervals over seeds;
- per layer, paired by seed, most-local-head distance at full data minus initialisation and minus the
  smallest fraction, Holm-adjusted over all of one model's contrasts;
- per layer and fraction, paired by seed, one model's distance minus another's (e.g. the distilled ViT's minus
  the ViT's), of the most local head and of the mean over heads: "more local in one model" is tested directly,
  not read off one model's significant change beside the other's non-significant one;
- where an adjusted interval includes 0, the equivalence bound (the largest difference it leaves possible);

and for the full-data models, the per-head class-token attention of the first and last block plus
attention rollout (Abnar & Zuidema 2020) on a few images, for both prefix tokens of the distilled ViT.

Heads are exchangeable: head 2 of seed 0 has no counterpart in seed 1. Summaries over seeds therefore rank
each layer's heads by distance within every seed (rank 0 = the most local head) and average the k-th
most local head over seeds; head indices are only ever reported per seed.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
import torch

from study.attention.maps import (
    attention_rollout,
    cls_attention_maps,
    cls_rollout_map,
    mean_attention_distance,
    mean_attention_entropy,
    uniform_attention_distance,
    uniform_attention_entropy,
)
from study.stats.intervals import MIN_SEEDS, equivalence_bound, holm_differences, holm_intervals, t_interval
from study.runs.load import normalised_images
from study.models import attention_probs
from study.train.spec import RunSpec

TRAINED, INIT = "trained", "init"  # the `state` column; initial weights have no fraction (NaN)
# A head is "local" when its mean distance is below this share of the uniform-attention distance: a
# quarter closer than attention spread evenly over the image.
LOCAL_SHARE = 0.75
# (model name, state, fraction, seed): one set of weights whose attention is measured.
RunKey = tuple[str, str, float, int]
HEAD_COLUMNS = ["model", "state", "fraction", "seed", "layer", "head", "distance", "entropy",
                "uniform_distance", "uniform_entropy"]
_RUN = ["model", "state", "fraction", "seed"]


def _geometry(model) -> tuple[tuple[int, int], int, int]:
    grid = tuple(model.patch_embed.grid_size)
    patch = model.patch_embed.patch_size
    patch = patch[0] if isinstance(patch, (tuple, list)) else patch
    return grid, int(patch), int(model.num_prefix_tokens)


@torch.no_grad()
def head_statistics(
    models: Mapping[RunKey, tuple[torch.nn.Module, RunSpec]], images: np.ndarray, batch_size: int,
    device: torch.device,
) -> pd.DataFrame:
    """Mean attention distance (pixels) and entropy (nats) per run, layer and head, averaged over
    ``images`` (uint8, (N, H, W, C)), with the uniform-attention references; columns ``HEAD_COLUMNS``."""
    rows = []
    for (name, state, fraction, seed), (model, spec) in models.items():
        grid, patch, prefix = _geometry(model)
        distance = entropy = 0.0
        for start in range(0, len(images), batch_size):
            x = normalised_images(images[start : start + batch_size], spec, device)
            attn = attention_probs(model, x)  # per layer (B, heads, T, T)
            # Summed over the batch's images, so the mean over all images is exact: (layers, heads).
            distance = distance + torch.stack(
                [mean_attention_distance(a, grid, patch, prefix, per_image=True).sum(0) for a in attn])
            entropy = entropy + torch.stack(
                [mean_attention_entropy(a, grid, prefix, per_image=True).sum(0) for a in attn])
        distance = (distance / len(images)).cpu().numpy()
        entropy = (entropy / len(images)).cpu().numpy()
        uniform = uniform_attention_distance(grid, patch), uniform_attention_entropy(grid)
        rows += [
            {"model": name, "state": state, "fraction": fraction, "seed": seed, "layer": layer, "head": head,
             "distance": float(distance[layer, head]), "entropy": float(entropy[layer, head]),
             "uniform_distance": uniform[0], "uniform_entropy": uniform[1]}
            for layer in range(distance.shape[0]) for head in range(distance.shape[1])
        ]
    return pd.DataFrame(rows, columns=HEAD_COLUMNS)


def ranked_heads(heads: pd.DataFrame) -> pd.DataFrame:
    """``heads`` plus ``head_rank``: 0 for each run's and layer's most local head, 1 for the next, …"""
    rank = heads.groupby([*_RUN, "layer"], dropna=False)["distance"].rank(method="first")
    return heads.assign(head_rank=rank.astype(int) - 1)


def layer_statistics(heads: pd.DataFrame, local_share: float = LOCAL_SHARE) -> pd.DataFrame:
    """One row per run and layer: ``heads`` (count), ``most_local_head`` (its index in this run),
    ``most_local_distance``, ``local_heads`` (heads below ``local_share`` × the uniform distance),
    ``mean_distance`` and ``mean_entropy`` over heads, and the references."""
    keys = [*_RUN, "layer"]
    grouped = heads.groupby(keys, dropna=False, sort=True)
    out = grouped.agg(heads=("head", "size"), mean_distance=("distance", "mean"),
                      mean_entropy=("entropy", "mean"), uniform_distance=("uniform_distance", "first"),
                      uniform_entropy=("uniform_entropy", "first")).reset_index()
    most = heads.loc[grouped["distance"].idxmin()]  # same group order as `out`
    out["most_local_head"] = most["head"].to_numpy()
    out["most_local_distance"] = most["distance"].to_numpy()
    is_local = heads["distance"] < local_share * heads["uniform_distance"]
    out["local_heads"] = is_local.groupby([heads[k] for k in keys], dropna=False, sort=True).sum().to_numpy()
    out["local_threshold"] = local_share * out["uniform_distance"]
    return out


def distance_per_layer(trained_layers: pd.DataFrame) -> pd.DataFrame:
    """Mean attention distance per model, fraction and layer, averaged over heads and seeds, with the seeds counted
    and the uniform-attention reference beside it (``trained_layers``: :func:`layer_statistics` of trained runs)."""
    return (trained_layers.groupby(["model", "fraction", "layer"], as_index=False)
            .agg(seeds=("seed", "size"), distance=("mean_distance", "mean"), uniform=("uniform_distance", "first")))


def shown_conditions(heads: pd.DataFrame, smallest: float, full: float) -> pd.DataFrame:
    """The heads the distance figure shows, labelled by its columns, left to right: initialisation, the smallest
    fraction, full data (one column when they coincide)."""
    return pd.concat(
        [heads[heads["state"] == INIT].assign(condition="init")]
        + [heads[(heads["state"] == TRAINED) & (heads["fraction"] == f)].assign(condition=f"{100 * f:g}% data")
           for f in dict.fromkeys([smallest, full])], ignore_index=True)


def head_table(heads: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model, state, fraction, layer and head rank: the k-th most local head's distance over seeds
    (mean and t-interval) and its mean entropy, with the uniform references."""
    rows = []
    for (model, state, fraction, layer, rank), g in ranked_heads(heads).groupby(
            ["model", "state", "fraction", "layer", "head_rank"], dropna=False, sort=True):
        mean, _, half = t_interval(g["distance"], confidence)
        rows.append({"model": model, "state": state, "fraction": fraction, "layer": layer, "head_rank": rank,
                     "seeds": len(g), "distance_mean": mean, "distance_ci_low": mean - half,
                     "distance_ci_high": mean + half, "entropy_mean": g["entropy"].mean(),
                     "uniform_distance": g["uniform_distance"].iloc[0],
                     "uniform_entropy": g["uniform_entropy"].iloc[0]})
    return pd.DataFrame(rows)


def layer_table(layers: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model, state, fraction and layer, over seeds: the most local head's distance (mean of each seed's
    minimum over heads, t-interval), the mean distance over heads (t-interval), the number of local heads (mean),
    mean entropy (t-interval); and each seed's most local head index, in seed order (heads do not correspond
    across seeds)."""
    rows = []
    for (model, state, fraction, layer), g in layers.groupby(
            ["model", "state", "fraction", "layer"], dropna=False, sort=True):
        g = g.sort_values("seed")
        near, _, near_half = t_interval(g["most_local_distance"], confidence)
        spread, _, spread_half = t_interval(g["mean_distance"], confidence)
        entropy, _, entropy_half = t_interval(g["mean_entropy"], confidence)
        rows.append({
            "model": model, "state": state, "fraction": fraction, "layer": layer, "seeds": len(g),
            "heads": int(g["heads"].iloc[0]),
            "most_local_head": ",".join(str(int(h)) for h in g["most_local_head"]),
            "most_local_distance": near, "most_local_ci_low": near - near_half,
            "most_local_ci_high": near + near_half, "local_heads": g["local_heads"].mean(),
            "mean_distance": spread, "mean_distance_ci_low": spread - spread_half,
            "mean_distance_ci_high": spread + spread_half, "mean_entropy": entropy,
            "entropy_ci_low": entropy - entropy_half, "entropy_ci_high": entropy + entropy_half,
            "uniform_distance": g["uniform_distance"].iloc[0], "local_threshold": g["local_threshold"].iloc[0],
            "uniform_entropy": g["uniform_entropy"].iloc[0], "confidence": confidence,
        })
    return pd.DataFrame(rows)


CONTRAST_COLUMNS = ["model", "layer", "versus", "versus_fraction", "full_fraction", "seeds", "difference",
                    "ci_low", "ci_high", "confidence", "p_holm", "significant", "equivalence_bound"]


def contrasts(layers: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Most-local-head distance at full data minus initialisation (``versus`` "init") and minus the smallest
    fraction ("smallest"), per model and layer, paired by seed (the same seed's initial weights and subset).

    All of one model's contrasts form one family: the intervals are Holm-adjusted (``confidence`` is the
    level each adjusted interval uses, ``significant`` whether it excludes 0, ``equivalence_bound`` the largest
    difference it leaves possible where it includes 0). Negative = more local.
    """
    rows, samples = [], []
    for model, mine in layers.groupby("model", sort=True):
        trained = mine[mine["state"] == TRAINED]
        full, smallest = trained["fraction"].max(), trained["fraction"].min()
        baselines = [("init", mine[mine["state"] == INIT], float("nan"))]
        if smallest < full:
            baselines.append(("smallest", trained[trained["fraction"] == smallest], smallest))
        at_full = trained[trained["fraction"] == full].set_index(["layer", "seed"])["most_local_distance"]
        family = []
        for versus, base, versus_fraction in baselines:
            base = base.set_index(["layer", "seed"])["most_local_distance"]
            paired = (at_full - base).dropna()  # seeds present on both sides
            for layer, diff in paired.groupby(level="layer", sort=True):
                family.append(diff.to_numpy())
                rows.append({"model": model, "layer": layer, "versus": versus, "versus_fraction": versus_fraction,
                             "full_fraction": full, "seeds": diff.size})
        samples.append(family)
    for row, statistics in zip(rows, holm_differences(samples, confidence)):
        row.update(statistics)
    return pd.DataFrame(rows, columns=CONTRAST_COLUMNS)


# What a model contrast compares per layer: the most local head (each seed's minimum over heads) and the mean over
# heads, so that a claim about one extreme head stands beside the layer as a whole.
DISTANCE_MEASURES = {"most local head": "most_local_distance", "head mean": "mean_distance"}
MODEL_CONTRAST_COLUMNS = ["comparison", "measure", "state", "fraction", "layer", "seeds", "difference", "ci_low",
                          "ci_high", "adj_ci_low", "adj_ci_high", "adj_confidence", "p_holm", "significant",
                          "inference", "equivalence_bound"]


def paired_layers(layers: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Rows of :func:`layer_statistics` of models ``a`` and ``b`` side by side (suffixes ``_a``, ``_b``), one per
    state, fraction, layer and seed that both have: the same seed draws the same subset, and at initialisation
    each architecture's own weights for that seed. pandas matches the init rows' NaN fractions to each other."""
    keys = ["state", "fraction", "layer", "seed"]
    columns = [*keys, *DISTANCE_MEASURES.values()]
    return layers.loc[layers["model"] == a, columns].merge(layers.loc[layers["model"] == b, columns], on=keys,
                                                            suffixes=("_a", "_b"))


def model_contrasts(layers: pd.DataFrame, pairs: list[tuple[str, str]], confidence: float) -> pd.DataFrame:
    """``a − b`` of each layer's attention distance between two models (e.g. deit − vit), paired by seed, per
    state (init, trained), fraction and layer, for each of :data:`DISTANCE_MEASURES`. Negative: ``a`` is more
    local.

    The family for Holm's correction is one pair × measure across all its layers, fractions and the
    initialisation (which shows whether a difference was there before training): ``ci_*`` is the raw
    t-interval, ``adj_*`` the adjusted one, ``significant`` whether that excludes 0; ``inference`` is False
    with fewer than ``MIN_SEEDS`` seeds, and ``equivalence_bound`` is the largest difference an adjusted
    interval including 0 leaves possible.
    """
    rows = []
    for a, b in pairs:
        paired = paired_layers(layers, a, b)
        for measure, column in DISTANCE_MEASURES.items():
            diff = paired.assign(diff=paired[f"{column}_a"] - paired[f"{column}_b"])
            groups = list(diff.groupby(["state", "fraction", "layer"], dropna=False, sort=True))
            adjusted = holm_intervals([g["diff"].to_numpy() for _, g in groups], confidence)
            for ((state, fraction, layer), g), adj in zip(groups, adjusted):
                mean, _, half = t_interval(g["diff"].to_numpy(), confidence)
                rows.append({"comparison": f"{a} - {b}", "measure": measure, "state": state, "fraction": fraction,
                             "layer": layer, "seeds": len(g), "difference": mean, "ci_low": mean - half,
                             "ci_high": mean + half, "adj_ci_low": adj.low, "adj_ci_high": adj.high,
                             "adj_confidence": adj.confidence, "p_holm": adj.p_holm, "significant": adj.significant,
                             "inference": len(g) >= MIN_SEEDS,
                             "equivalence_bound": equivalence_bound(adj.low, adj.high, adj.significant, len(g))})
    return pd.DataFrame(rows, columns=MODEL_CONTRAST_COLUMNS)


@torch.no_grad()
def attention_maps(model: torch.nn.Module, spec: RunSpec, images: np.ndarray, device: torch.device) -> dict:
    """Per-head maps (first and last block) and rollout maps for every prefix token, on ``images``.

    Returns ``{"tokens": {token_name: {"first": (B, heads, gh, gw), "last": ..., "rollout": (B, gh, gw)}}}``
    as numpy arrays; token names are "class" and, for the distilled ViT, "distillation".
    """
    grid, _, prefix = _geometry(model)
    attn = attention_probs(model, normalised_images(images, spec, device))
    rollout = attention_rollout(attn, head_fusion="mean")  # (B, T, T)
    tokens = {}
    for index, token in enumerate(("class", "distillation")[:prefix]):
        tokens[token] = {
            "first": cls_attention_maps(attn[0], prefix, grid, index).cpu().numpy(),
            "last": cls_attention_maps(attn[-1], prefix, grid, index).cpu().numpy(),
            "rollout": cls_rollout_map(rollout, prefix, grid, index).cpu().numpy(),
        }
    return {"tokens": tokens}
