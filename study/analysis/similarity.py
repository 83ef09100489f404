"""The CKA study: which layers of which models compute similar representations, and against what noise.

On the same test images, in the same order (minibatch CKA with the unbiased HSIC; Nguyen, Raghu &
Kornblith 2021):
- within each model and across models at full data, layer × layer, for every training seed (Raghu et
  al. 2021, Figs. 1–2); the analysis seed's matrices are the heatmaps;
- each model at every fraction against the full-data model of *another* seed, layer by layer (their
  Fig. 12). Two models of the same seed share their initialisation, so same-seed CKA partly measures how
  little a layer moved from it; against another seed it measures what the data determine;
- the noise ceiling: the full-data model of one seed against that of another, layer by layer. A fraction
  whose CKA reaches the ceiling is as close to full-data training as retraining with another seed is.
Seed s is compared with the next seed of the study's list (cyclically), so every seed is used once on each
side; one seed gives no cross-seed comparison at all.

Models have different numbers of layers (a 6-layer ViT, a 4-layer ResNet), so curves are compared on
relative depth: layer i of L sits at i / (L − 1), the per-layer curve is interpolated linearly onto
``DEPTH_GRID``, and "mean over depth" is the mean over that grid, so every stretch of depth weighs the same
whatever the layer count. ViT-vs-ResNet CKA at matched depth reads the layer × layer matrix, interpolated
bilinearly, along the diagonal of relative depth.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from scipy.interpolate import RegularGridInterpolator
from tqdm import tqdm

from study.analysis.cka import MinibatchCKA
from study.analysis.inference import holm_intervals, t_interval
from study.analysis.runs import normalised_images
from study.errors import StudyError
from study.models import representations

# (model name, fraction, seed): one trained run.
RunKey = tuple[str, float, int]
DEPTH_GRID = np.linspace(0.0, 1.0, 11)
LAYER_COLUMNS = ["model", "fraction", "seed", "reference_seed", "layer", "relative_depth", "cka"]
CEILING_COLUMNS = ["model", "seed", "reference_seed", "layer", "relative_depth", "cka"]


def reference_seeds(seeds: Sequence[int]) -> dict[int, int]:
    """Each seed's reference seed: the next one in ``seeds``, cyclically ({0: 1, 1: 2, 2: 0}); {} for one seed."""
    seeds = list(seeds)
    if len(seeds) < 2:
        return {}
    return {seed: seeds[(i + 1) % len(seeds)] for i, seed in enumerate(seeds)}


def relative_depths(count: int) -> np.ndarray:
    """Relative depth of each of ``count`` layers, input side 0, output side 1."""
    if count < 2:
        raise StudyError(f"a model with {count} recorded layer(s) has no depth axis; record at least 2 layers")
    return np.linspace(0.0, 1.0, count)


def depth_mean(values: Sequence[float], depths: Sequence[float] | None = None,
               grid: np.ndarray = DEPTH_GRID) -> float:
    """Mean of a per-layer curve over relative depth: interpolated onto ``grid``, then averaged.

    ``depths`` (increasing) default to evenly spaced layers, :func:`relative_depths`.
    """
    values = np.asarray(values, dtype=float)
    depths = relative_depths(len(values)) if depths is None else np.asarray(depths, dtype=float)
    return float(np.interp(grid, depths, values).mean())


def matched_depth(matrix: np.ndarray, grid: np.ndarray = DEPTH_GRID) -> np.ndarray:
    """A (layers_a, layers_b) CKA matrix read at equal relative depth of both models, on ``grid``."""
    rows, cols = matrix.shape
    interpolate = RegularGridInterpolator((relative_depths(rows), relative_depths(cols)), matrix)
    return interpolate(np.column_stack([grid, grid]))  # (len(grid),)


@torch.no_grad()
def cka_study(
    models: Mapping[RunKey, tuple[torch.nn.Module, dict]],
    images: np.ndarray,
    batch_size: int,
    kernel: str,
    rbf_threshold: float,
    device: torch.device,
    seeds: Sequence[int],
) -> dict:
    """Run every comparison above in one pass over ``images`` (uint8, (N, H, W, C)).

    ``models`` holds every trained run; ``seeds`` orders the seeds for :func:`reference_seeds`. Returns
    ``{"matrices": {seed: {(a, b): (layers_a, layers_b, matrix)}}`` (full data, names a ≤ b, a == b
    within), ``"to_full"``: DataFrame (``LAYER_COLUMNS``), ``"ceiling"``: DataFrame (``CEILING_COLUMNS``)}.
    """
    full = max(f for _, f, _ in models)
    names = sorted({name for name, _, _ in models})
    seeds = list(seeds)
    missing = [(n, full, s) for s in seeds for n in names if (n, full, s) not in models]
    if missing:
        raise StudyError(f"no full-data run for {missing[0]}; CKA needs every model's full-data run of every seed")
    layers = {key: list(representations(model, normalised_images(images[:4], spec, device)))
              for key, (model, spec) in models.items()}
    # One accumulator: rows = every layer of every run, columns = every layer of every full-data run.
    # Every comparison is a block of its matrix, and one feature dict on both sides lets MinibatchCKA
    # compute each layer's Gram once per batch, however many comparisons use it.
    rows = [(key, layer) for key in sorted(models) for layer in layers[key]]
    cols = [(key, layer) for key in sorted(models) if key[1] == full for layer in layers[key]]
    acc = MinibatchCKA([_tag(*r) for r in rows], [_tag(*c) for c in cols], kernel, rbf_threshold)

    # Equal-sized batches only: the paper averages HSIC terms over batches, each weighing the same.
    usable = len(images) - len(images) % batch_size
    for start in tqdm(range(0, usable, batch_size), desc="cka", unit="batch", disable=None):
        chunk = images[start : start + batch_size]
        feats = {_tag(key, layer): value for key, (model, spec) in models.items()
                 for layer, value in representations(model, normalised_images(chunk, spec, device)).items()}
        acc.update(feats)

    matrix = acc.compute()  # (len(rows), len(cols))
    row_of = {r: i for i, r in enumerate(rows)}
    col_of = {c: j for j, c in enumerate(cols)}

    def block(a: RunKey, b: RunKey) -> np.ndarray:
        """(layers of run a, layers of run b) CKA; b must be a full-data run."""
        return matrix[np.ix_([row_of[a, l] for l in layers[a]], [col_of[b, l] for l in layers[b]])]

    matrices = {seed: {(a, b): (layers[a, full, seed], layers[b, full, seed], block((a, full, seed), (b, full, seed)))
                       for i, a in enumerate(names) for b in names[i:]} for seed in seeds}
    reference = reference_seeds(seeds)
    to_full, ceiling = [], []
    for key in sorted(models):
        name, fraction, seed = key
        if seed not in reference:
            continue
        # Layer i of this run against layer i of the reference seed's full-data run (same architecture).
        diagonal = np.diag(block(key, (name, full, reference[seed])))
        for layer, depth, value in zip(layers[key], relative_depths(len(diagonal)), diagonal):
            row = {"model": name, "fraction": fraction, "seed": seed, "reference_seed": reference[seed],
                   "layer": layer, "relative_depth": depth, "cka": float(value)}
            (ceiling if fraction == full else to_full).append(row)
    return {"matrices": matrices, "to_full": pd.DataFrame(to_full, columns=LAYER_COLUMNS),
            "ceiling": pd.DataFrame(ceiling, columns=LAYER_COLUMNS)[CEILING_COLUMNS]}


def _tag(key: RunKey, layer: str) -> str:
    """A layer's name in the accumulator that holds the layers of every run."""
    name, fraction, seed = key
    return f"{name}/f{fraction!r}/s{seed}/{layer}"


# --------------------------------------------------------------------------------------------------
# Summaries over seeds
# --------------------------------------------------------------------------------------------------

SUMMARY_COLUMNS = ["model", "fraction", "seeds", "mean_cka", "ci_low", "ci_high", "ceiling_mean",
                   "ceiling_ci_low", "ceiling_ci_high", "ceiling_pairs", "gap_to_ceiling_mean", "gap_ci_low",
                   "gap_ci_high", "gap_confidence", "gap_p_holm", "gap_significant", "confidence"]


def _per_seed_depth_means(layers: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Mean over relative depth of each curve in ``layers`` (rows ordered by depth within a curve)."""
    ordered = layers.sort_values([*keys, "relative_depth"])
    return ordered.groupby(keys, sort=True)[["relative_depth", "cka"]].apply(
        lambda curve: depth_mean(curve["cka"], curve["relative_depth"]))


def to_full_summary(to_full: pd.DataFrame, ceiling: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model and fraction, over seeds: CKA to another seed's full-data model (mean over relative depth;
    mean and t-interval), the cross-seed ceiling, and the gap ceiling − CKA paired by seed (both against
    the same reference run). The gaps of one model's fractions form one family: Holm-adjusted intervals
    (``gap_confidence`` is the level each uses). The ceiling's own interval is over distinct seed pairs
    (``ceiling_pairs``; two seeds give one pair, compared both ways, and no interval)."""
    if to_full.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    cka = _per_seed_depth_means(to_full, ["model", "fraction", "seed"]).rename("cka").reset_index()
    noise = _per_seed_depth_means(ceiling, ["model", "seed"]).rename("ceiling").reset_index()
    merged = cka.merge(noise, on=["model", "seed"], how="left")
    merged["gap"] = merged["ceiling"] - merged["cka"]
    rows = []
    for model, mine in merged.groupby("model", sort=True):
        by_fraction = list(mine.groupby("fraction", sort=True))
        gaps = holm_intervals([g["gap"].to_numpy() for _, g in by_fraction], confidence)
        pairs = _distinct_pairs(ceiling[ceiling["model"] == model])
        noise_mean, _, noise_half = t_interval(pairs, confidence) if len(pairs) else (np.nan, np.nan, np.nan)
        for (fraction, g), gap in zip(by_fraction, gaps):
            mean, _, half = t_interval(g["cka"], confidence)
            rows.append({
                "model": model, "fraction": fraction, "seeds": len(g), "mean_cka": mean, "ci_low": mean - half,
                "ci_high": mean + half, "ceiling_mean": noise_mean, "ceiling_ci_low": noise_mean - noise_half,
                "ceiling_ci_high": noise_mean + noise_half, "ceiling_pairs": len(pairs),
                "gap_to_ceiling_mean": gap.mean, "gap_ci_low": gap.low, "gap_ci_high": gap.high,
                "gap_confidence": gap.confidence, "gap_p_holm": gap.p_holm, "gap_significant": gap.significant,
                "confidence": confidence,
            })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _distinct_pairs(ceiling: pd.DataFrame) -> np.ndarray:
    """Depth-mean ceiling per unordered seed pair: CKA is symmetric, so (0, 1) and (1, 0) are one value."""
    if ceiling.empty:
        return np.array([])
    means = _per_seed_depth_means(ceiling, ["seed", "reference_seed"])
    unique = {tuple(sorted(pair)): value for pair, value in means.items()}
    return np.array([unique[pair] for pair in sorted(unique)])


def across_depth(matrices: Mapping[int, dict], grid: np.ndarray = DEPTH_GRID) -> pd.DataFrame:
    """CKA between two different models at matched relative depth, per seed (full data)."""
    rows = [
        {"model_a": a, "model_b": b, "seed": seed, "relative_depth": depth, "cka": float(value)}
        for seed, blocks in matrices.items() for (a, b), (_, _, matrix) in blocks.items() if a != b
        for depth, value in zip(grid, matched_depth(matrix, grid))
    ]
    return pd.DataFrame(rows, columns=["model_a", "model_b", "seed", "relative_depth", "cka"])


def across_depth_summary(per_seed: pd.DataFrame, ceiling: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per pair of models and relative depth: CKA mean and t-interval over seeds, beside each model's
    cross-seed ceiling at that depth (mean over seeds): the similarity next to its noise level."""
    curves = ceiling.sort_values("relative_depth").groupby(["model", "seed", "reference_seed"], sort=True)

    def noise_at(model: str, depth: float) -> float:
        values = [np.interp(depth, c["relative_depth"], c["cka"]) for (m, _, _), c in curves if m == model]
        return float(np.mean(values)) if values else np.nan

    rows = []
    for (a, b, depth), g in per_seed.groupby(["model_a", "model_b", "relative_depth"], sort=True):
        mean, _, half = t_interval(g["cka"], confidence)
        rows.append({"model_a": a, "model_b": b, "relative_depth": depth, "seeds": len(g), "cka_mean": mean,
                     "ci_low": mean - half, "ci_high": mean + half, "ceiling_a": noise_at(a, depth),
                     "ceiling_b": noise_at(b, depth), "confidence": confidence})
    return pd.DataFrame(rows, columns=["model_a", "model_b", "relative_depth", "seeds", "cka_mean", "ci_low",
                                       "ci_high", "ceiling_a", "ceiling_b", "confidence"])
