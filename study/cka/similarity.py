"""The CKA study: which layers of which models compute similar representations, against what noise and what chance.

On the same test images, in the same order (minibatch CKA with the unbiased HSIC; Nguyen, Raghu &
Kornblith 2021):
- within each model and across models at full data, layer × layer, for every training seed (Raghu et
  al. 2021, Figs. 1–2); the analysis seed's matrices are the heatmaps;
- each model at every fraction against the full-data model of *another* seed, layer by layer (their
  Fig. 12). Two models of the same seed share their initialisation, so same-seed CKA partly measures how
  little a layer moved from it; against another seed it measures what the data determine;
- the noise level (ceiling): the full-data model of one seed against that of another, layer by layer. A
  fraction whose CKA reaches the ceiling is as close to full-data training as retraining with another seed is;
- the chance level: every comparison above made again before any training, each trained model replaced by
  its initial weights (``init.pt``, the weights a seed draws before the first step). For CKA to another seed's
  full-data model (and for the ceiling) that is two random initialisations of the same architecture, seed s
  against seed s'; across models, the two architectures' initialisations of the same seed. This answers "how
  similar would these layers be if nothing had been learned": random networks fed the same images keep much of
  the images' geometry, so CKA at initialisation need not be near 0, least of all near the input. The other
  baseline, CKA of a trained layer to its own initialisation (``to_init``), measures how far
  training moved the layer, not chance; it is tabulated beside, per layer. A seed's initial weights do not
  depend on the fraction (the seed alone draws them), so they are read from its full-data run.
Seed s is compared with the next seed of the study's list (cyclically), so every seed is used once on each
side; one seed gives no cross-seed comparison at all.

Models have different numbers of layers (a 6-layer ViT, a 4-layer ResNet), so curves are compared on
relative depth: layer i of L sits at i / (L − 1), input embedding at 0, output at 1. A "mean over depth" is
over the layers *after* the input embedding (the shallowest recorded layer: a ViT's patch + position
embedding, a ResNet's stem): the embedding is a near-linear map of the pixels, so any two models, trained or
not, give CKA ≈ 1 there, and averaging it in would lift every mean toward 1. The per-layer curve from the first
layer after the embedding to the output is interpolated linearly onto ``DEPTH_GRID`` stretched over that span,
and averaged, so every stretch of depth weighs the same whatever the layer count; per-layer tables keep the
embedding. ViT-vs-ResNet CKA at matched depth reads the layer × layer matrix, interpolated bilinearly, along
the diagonal of relative depth; its depth mean takes the grid points past both models' embeddings.

One module although over 300 lines: the depth rules, the one pass over the images and the summaries over seeds
each apply the definitions above (relative depth, the embedding left out, the seed pairing, the noise and chance
levels), which a split would separate from the code that implements them.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from scipy.interpolate import RegularGridInterpolator
from tqdm import tqdm

from study.cka.estimators import MinibatchCKA
from study.stats.intervals import holm_intervals, t_interval
from study.runs.load import normalised_images
from study.core.errors import StudyError
from study.cka.measures import Features, residual_stream

# (model name, fraction, seed): one trained run; with fraction INIT, the seed's initial weights of that model.
RunKey = tuple[str, float, int]
INIT = 0.0  # initial weights are keyed as the model trained on none of the data
DEPTH_GRID = np.linspace(0.0, 1.0, 11)
LAYER_COLUMNS = ["model", "fraction", "seed", "reference_seed", "layer", "relative_depth", "cka", "to_init"]
CEILING_COLUMNS = ["model", "seed", "reference_seed", "layer", "relative_depth", "cka", "to_init"]
CHANCE_COLUMNS = ["model", "seed", "reference_seed", "layer", "relative_depth", "cka"]
LAYER_TABLE_COLUMNS = ["model", "layer_index", "layer", "relative_depth", "input_embedding"]
ACROSS_COLUMNS = ["model_a", "model_b", "seed", "relative_depth", "in_depth_mean", "cka", "chance"]
# A per-layer value and its noise or chance level come from the same seed pair and the same layer.
LEVEL_KEYS = ["model", "seed", "reference_seed", "layer"]


def reference_seeds(seeds: Sequence[int]) -> dict[int, int]:
    """Each seed's reference seed: the next one in ``seeds``, cyclically ({0: 1, 1: 2, 2: 0}); {} for one seed."""
    seeds = list(seeds)
    if len(seeds) < 2:
        return {}
    return {seed: seeds[(i + 1) % len(seeds)] for i, seed in enumerate(seeds)}


# --------------------------------------------------------------------------------------------------
# Relative depth, and which layers a mean over depth takes
# --------------------------------------------------------------------------------------------------


def relative_depths(count: int) -> np.ndarray:
    """Relative depth of each of ``count`` layers, input side 0, output side 1."""
    if count < 2:
        raise StudyError(f"a model with {count} recorded layer(s) has no depth axis; record at least 2 layers")
    return np.linspace(0.0, 1.0, count)


def depth_mean(values: Sequence[float], depths: Sequence[float] | None = None,
               grid: np.ndarray = DEPTH_GRID) -> float:
    """Mean of a per-layer curve over the stretch of relative depth its layers span: interpolated onto ``grid``
    stretched from the first to the last depth, then averaged, so every stretch of depth weighs the same.

    ``depths`` (increasing) default to evenly spaced layers over [0, 1], :func:`relative_depths`.
    """
    values = np.asarray(values, dtype=float)
    depths = relative_depths(len(values)) if depths is None else np.asarray(depths, dtype=float)
    span = depths[0] + np.asarray(grid) * (depths[-1] - depths[0])  # (len(grid),) points within the layers
    return float(np.interp(span, depths, values).mean())


def past_embedding_mean(values: Sequence[float], depths: Sequence[float]) -> float:
    """:func:`depth_mean` of a per-layer curve (ordered by depth) without its first layer, the input embedding,
    whose CKA is near 1 for any two models (module docstring)."""
    values, depths = np.asarray(values, dtype=float), np.asarray(depths, dtype=float)
    if values.size < 2:
        raise StudyError(f"a curve of {values.size} layer(s) has no layer after its input embedding to average")
    return depth_mean(values[1:], depths[1:])


def in_depth_mean(rows: int, cols: int, grid: np.ndarray = DEPTH_GRID) -> np.ndarray:
    """Which points of ``grid`` a mean over matched depth takes, for models of ``rows`` and ``cols`` layers:
    (len(grid),) bool, True from the deeper of the two models' first layers after the input embedding on; a
    shallower point is interpolated from an embedding."""
    start = max(relative_depths(rows)[1], relative_depths(cols)[1])
    return np.asarray(grid) >= start - 1e-9  # grid points are sums of floats: 0.30000000000000004 vs 0.3


def matched_depth(matrix: np.ndarray, grid: np.ndarray = DEPTH_GRID) -> np.ndarray:
    """A (layers_a, layers_b) CKA matrix read at equal relative depth of both models, on ``grid``."""
    rows, cols = matrix.shape
    interpolate = RegularGridInterpolator((relative_depths(rows), relative_depths(cols)), matrix)
    return interpolate(np.column_stack([grid, grid]))  # (len(grid), 2) points -> (len(grid),)


def layer_table(layers: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Each model's recorded layers in order, with their relative depth and which is the input embedding (the
    first; left out of every mean over depth): the layers every CKA table and figure compares."""
    rows = [{"model": model, "layer_index": i, "layer": layer, "relative_depth": depth, "input_embedding": i == 0}
            for model, names in sorted(layers.items())
            for i, (layer, depth) in enumerate(zip(names, relative_depths(len(names))))]
    return pd.DataFrame(rows, columns=LAYER_TABLE_COLUMNS)


# --------------------------------------------------------------------------------------------------
# The study: one pass over the images
# --------------------------------------------------------------------------------------------------


@torch.no_grad()
def cka_study(
    models: Mapping[RunKey, tuple[torch.nn.Module, dict]],
    images: np.ndarray,
    batch_size: int,
    kernel: str,
    rbf_threshold: float,
    device: torch.device,
    seeds: Sequence[int],
    initial: Mapping[tuple[str, int], tuple[torch.nn.Module, dict]] | None = None,
    features: Features = residual_stream,
) -> dict:
    """Run every comparison of the module docstring in one pass over ``images`` (uint8, (N, H, W, C)).

    ``models`` holds every trained run; ``seeds`` orders the seeds for :func:`reference_seeds`; ``initial``
    maps (model name, seed) to that seed's initial weights of the model (every model and seed, or ``None``:
    no chance level, ``to_init`` NaN); ``features`` reads each model's layers (a reading of
    :mod:`study.cka.measures`; the residual stream by default). Returns ``{"matrices": {seed: {(a, b): (layers_a, layers_b, matrix)}}``
    (full data, names a ≤ b, a == b within), ``"init_matrices"``: the same at initialisation ({} without
    ``initial``), ``"layers"``: {model: its layers}, ``"to_full"``: DataFrame (``LAYER_COLUMNS``),
    ``"ceiling"``: (``CEILING_COLUMNS``), ``"chance"``: initial weights of seed s vs s' (``CHANCE_COLUMNS``)}.
    """
    full = max(f for _, f, _ in models)
    names = sorted({name for name, _, _ in models})
    seeds = list(seeds)
    missing = [(n, full, s) for s in seeds for n in names if (n, full, s) not in models]
    if missing:
        raise StudyError(f"no full-data run for {missing[0]}; CKA needs every model's full-data run of every seed")
    if initial is not None and (absent := [(n, s) for s in seeds for n in names if (n, s) not in initial]):
        raise StudyError(f"no initial weights (init.pt) for {absent[0]}; the chance level needs every model and seed")
    runs = {**models, **{(name, INIT, seed): loaded for (name, seed), loaded in (initial or {}).items()}}
    layers = {key: list(features(model, normalised_images(images[:4], spec, device)))
              for key, (model, spec) in runs.items()}
    _check_same_layers(layers, full)
    # One accumulator: rows = every layer of every run, columns = every layer of every full-data run and of
    # every initialisation. Every comparison is a block of its matrix, and one feature dict on both sides lets
    # MinibatchCKA compute each layer's Gram once per batch, however many comparisons use it.
    rows = [(key, layer) for key in sorted(runs) for layer in layers[key]]
    cols = [(key, layer) for key in sorted(runs) if key[1] in (full, INIT) for layer in layers[key]]
    matrix = _accumulate(runs, images, batch_size, [_tag(*r) for r in rows], [_tag(*c) for c in cols],
                         kernel, rbf_threshold, device, features)  # (len(rows), len(cols))
    row_of = {r: i for i, r in enumerate(rows)}
    col_of = {c: j for j, c in enumerate(cols)}

    def block(a: RunKey, b: RunKey) -> np.ndarray:
        """(layers of run a, layers of run b) CKA; b must be a full-data run or an initialisation."""
        return matrix[np.ix_([row_of[a, l] for l in layers[a]], [col_of[b, l] for l in layers[b]])]

    def pairs(fraction: float) -> dict:
        return {seed: {(a, b): (layers[a, fraction, seed], layers[b, fraction, seed],
                                block((a, fraction, seed), (b, fraction, seed)))
                       for i, a in enumerate(names) for b in names[i:]} for seed in seeds}

    reference = reference_seeds(seeds)
    per_layer: dict[str, list[dict]] = {"to_full": [], "ceiling": [], "chance": []}
    for key in sorted(runs):
        name, fraction, seed = key
        if seed not in reference:
            continue
        # Layer i against layer i of the same architecture: the reference seed's full-data run (its
        # initialisation for an initialisation), and this seed's own initialisation.
        cka = np.diag(block(key, (name, INIT if fraction == INIT else full, reference[seed])))
        to_init = np.diag(block(key, (name, INIT, seed))) if initial is not None else np.full(cka.size, np.nan)
        part = "chance" if fraction == INIT else "ceiling" if fraction == full else "to_full"
        per_layer[part] += _diagonal_rows(key, reference[seed], layers[key], cka, to_init)
    return {"matrices": pairs(full), "init_matrices": pairs(INIT) if initial is not None else {},
            "layers": {name: layers[name, full, seeds[0]] for name in names},
            "to_full": pd.DataFrame(per_layer["to_full"], columns=LAYER_COLUMNS),
            "ceiling": pd.DataFrame(per_layer["ceiling"], columns=LAYER_COLUMNS)[CEILING_COLUMNS],
            "chance": pd.DataFrame(per_layer["chance"], columns=LAYER_COLUMNS)[CHANCE_COLUMNS]}


def _check_same_layers(layers: Mapping[RunKey, list[str]], full: float) -> None:
    """Every run of a model must record the layers of its full-data run: per-layer comparisons pair layer i with
    layer i."""
    expected = {name: names for (name, fraction, _), names in layers.items() if fraction == full}
    for (name, fraction, seed), names in layers.items():
        if names != expected[name]:
            raise StudyError(f"{name} (fraction {fraction}, seed {seed}) records layers {names}, but its full-data "
                             f"run records {expected[name]}; every run of a model must share its architecture")


def _accumulate(runs: Mapping[RunKey, tuple], images: np.ndarray, batch_size: int, rows: list[str],
                cols: list[str], kernel: str, rbf_threshold: float, device: torch.device,
                features: Features = residual_stream) -> np.ndarray:
    """Minibatch CKA (rows, cols) of tagged layers (:func:`_tag`) over equal-sized batches of ``images``: the
    paper averages HSIC terms over batches, each weighing the same, so a short last batch is dropped."""
    acc = MinibatchCKA(rows, cols, kernel, rbf_threshold)
    usable = len(images) - len(images) % batch_size
    for start in tqdm(range(0, usable, batch_size), desc="cka", unit="batch", disable=None):
        chunk = images[start : start + batch_size]
        feats = {_tag(key, layer): value for key, (model, spec) in runs.items()
                 for layer, value in features(model, normalised_images(chunk, spec, device)).items()}
        acc.update(feats)
    return acc.compute()


def _diagonal_rows(key: RunKey, reference_seed: int, layers: Sequence[str], cka: np.ndarray,
                   to_init: np.ndarray) -> list[dict]:
    """One table row per layer of run ``key``: its CKA to the reference run's same layer and to its own
    initialisation."""
    name, fraction, seed = key
    return [{"model": name, "fraction": fraction, "seed": seed, "reference_seed": reference_seed, "layer": layer,
             "relative_depth": depth, "cka": float(value), "to_init": float(moved)}
            for layer, depth, value, moved in zip(layers, relative_depths(len(layers)), cka, to_init)]


def _tag(key: RunKey, layer: str) -> str:
    """A layer's name in the accumulator that holds the layers of every run."""
    name, fraction, seed = key
    return f"{name}/f{fraction!r}/s{seed}/{layer}"


def beside(per_layer: pd.DataFrame, level: pd.DataFrame, column: str) -> pd.DataFrame:
    """``per_layer`` with ``level``'s CKA of the same model, seed pair and layer as ``column``: each value beside
    its noise level (``ceiling``) or chance level (``chance``); NaN where the level was not measured."""
    values = level[LEVEL_KEYS + ["cka"]].rename(columns={"cka": column})
    return per_layer.merge(values, on=LEVEL_KEYS, how="left")


# --------------------------------------------------------------------------------------------------
# Summaries over seeds
# --------------------------------------------------------------------------------------------------

SUMMARY_COLUMNS = ["model", "fraction", "seeds", "embedding_layer", "averaged_layers", "mean_cka", "ci_low",
                   "ci_high", "ceiling_mean", "ceiling_ci_low", "ceiling_ci_high", "ceiling_pairs", "chance_mean",
                   "chance_ci_low", "chance_ci_high", "chance_pairs", "gap_to_ceiling_mean", "gap_ci_low",
                   "gap_ci_high", "gap_confidence", "gap_p_holm", "gap_significant", "confidence"]


def _per_seed_depth_means(layers: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Mean over relative depth past the input embedding (:func:`past_embedding_mean`) of each curve."""
    ordered = layers.sort_values([*keys, "relative_depth"])
    return ordered.groupby(keys, sort=True)[["relative_depth", "cka"]].apply(
        lambda curve: past_embedding_mean(curve["cka"], curve["relative_depth"]))


def _layer_names(rows: pd.DataFrame) -> tuple[str, str]:
    """(the input embedding, the layers a mean over depth averages, comma-separated) of one model's rows."""
    ordered = rows.drop_duplicates("layer").sort_values("relative_depth")["layer"].astype(str).tolist()
    return ordered[0], ", ".join(ordered[1:])


def _level(layers: pd.DataFrame | None, confidence: float) -> dict[str, float]:
    """A noise or chance level of one model: mean and t-interval over distinct seed pairs of the depth mean."""
    pairs = _distinct_pairs(layers) if layers is not None else np.array([])
    mean, _, half = t_interval(pairs, confidence) if pairs.size else (np.nan, np.nan, np.nan)
    return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half, "pairs": pairs.size}


def to_full_summary(to_full: pd.DataFrame, ceiling: pd.DataFrame, confidence: float,
                    chance: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model and fraction, over seeds: CKA to another seed's full-data model (mean over relative depth past
    the input embedding; mean and t-interval), beside its noise level (the cross-seed ceiling) and its chance
    level (the same comparison at initialisation, ``chance``; NaN when not given), and the gap ceiling − CKA
    paired by seed (both against the same reference run). The gaps of one model's fractions form one family:
    Holm-adjusted intervals (``gap_confidence`` is the level each uses). The levels' own intervals are over
    disjoint seed pairs (``*_pairs``: no seed in two of them; two or three seeds give one pair, and no interval)."""
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
        noise_level = _level(ceiling[ceiling["model"] == model], confidence)
        chance_level = _level(None if chance is None else chance[chance["model"] == model], confidence)
        embedding, averaged = _layer_names(to_full[to_full["model"] == model])
        for (fraction, g), gap in zip(by_fraction, gaps):
            mean, _, half = t_interval(g["cka"], confidence)
            rows.append({
                "model": model, "fraction": fraction, "seeds": len(g), "embedding_layer": embedding,
                "averaged_layers": averaged, "mean_cka": mean, "ci_low": mean - half, "ci_high": mean + half,
                **{f"ceiling_{k}": v for k, v in noise_level.items()},
                **{f"chance_{k}": v for k, v in chance_level.items()},
                "gap_to_ceiling_mean": gap.mean, "gap_ci_low": gap.low, "gap_ci_high": gap.high,
                "gap_confidence": gap.confidence, "gap_p_holm": gap.p_holm, "gap_significant": gap.significant,
                "confidence": confidence,
            })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _distinct_pairs(layers: pd.DataFrame) -> np.ndarray:
    """Depth mean per seed pair, over disjoint pairs only: CKA is symmetric, so (0, 1) and (1, 0) are one value, and
    pairs sharing a seed are not independent (the cyclic pairs 0-1, 1-2, 2-0 use every seed twice), so the pairs
    are taken in order and one that reuses a seed already taken is left out: 6 seeds give 3 values, 3 seeds one."""
    if layers.empty:
        return np.array([])
    means = _per_seed_depth_means(layers, ["seed", "reference_seed"])
    unique = {tuple(sorted(pair)): value for pair, value in means.items()}
    taken, values = set(), []
    for pair in sorted(unique):
        if taken.isdisjoint(pair):
            taken.update(pair)
            values.append(unique[pair])
    return np.array(values)


def across_depth(matrices: Mapping[int, dict], initial: Mapping[int, dict] | None = None,
                 grid: np.ndarray = DEPTH_GRID) -> pd.DataFrame:
    """CKA between two different models at matched relative depth, per seed (full data), with the chance level
    beside: the same pair and seed at initialisation (``initial``, shaped like ``matrices``; NaN without it).
    ``in_depth_mean`` marks the points past both models' input embeddings (:func:`in_depth_mean`)."""
    rows = []
    for seed, blocks in matrices.items():
        for (a, b), (_, _, matrix) in blocks.items():
            if a == b:
                continue
            chance = matched_depth(initial[seed][a, b][2], grid) if initial else np.full(len(grid), np.nan)
            rows += [{"model_a": a, "model_b": b, "seed": seed, "relative_depth": depth, "in_depth_mean": bool(used),
                      "cka": float(value), "chance": float(base)}
                     for depth, used, value, base in zip(grid, in_depth_mean(*matrix.shape, grid),
                                                         matched_depth(matrix, grid), chance)]
    return pd.DataFrame(rows, columns=ACROSS_COLUMNS)


ACROSS_SUMMARY_COLUMNS = ["model_a", "model_b", "relative_depth", "in_depth_mean", "seeds", "cka_mean", "ci_low",
                          "ci_high", "ceiling_a", "ceiling_b", "chance_mean", "confidence"]


def across_depth_summary(per_seed: pd.DataFrame, ceiling: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per pair of models and relative depth: CKA mean and t-interval over seeds, beside each model's
    cross-seed ceiling at that depth (mean over seeds; the noise level) and the pair's CKA at initialisation
    (mean over seeds; the chance level)."""
    curves = ceiling.sort_values("relative_depth").groupby(["model", "seed", "reference_seed"], sort=True)

    def noise_at(model: str, depth: float) -> float:
        values = [np.interp(depth, c["relative_depth"], c["cka"]) for (m, _, _), c in curves if m == model]
        return float(np.mean(values)) if values else np.nan

    rows = []
    for (a, b, depth), g in per_seed.groupby(["model_a", "model_b", "relative_depth"], sort=True):
        mean, _, half = t_interval(g["cka"], confidence)
        rows.append({"model_a": a, "model_b": b, "relative_depth": depth,
                     "in_depth_mean": bool(g["in_depth_mean"].all()), "seeds": len(g), "cka_mean": mean,
                     "ci_low": mean - half, "ci_high": mean + half,
                     "ceiling_a": noise_at(a, depth), "ceiling_b": noise_at(b, depth),
                     "chance_mean": float(g["chance"].mean()), "confidence": confidence})
    return pd.DataFrame(rows, columns=ACROSS_SUMMARY_COLUMNS)
