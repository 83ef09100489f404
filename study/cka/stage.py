"""Stage ``cka``: CKA similarity within and across models, of every fraction to another seed's full-data
model, with each similarity's noise level (the cross-seed ceiling) and chance level (the same comparison at
initialisation, from each run's ``init.pt``); see :mod:`study.cka.similarity` for the design.

Every table but ``cka_readings`` reads the residual stream (each block's output). ``cka_readings`` repeats the
to-full summary for the other readings of :mod:`study.cka.measures` (block updates, pooled features),
because for the ViTs the stream's chance level lies above its trained values and the report must say whether
another reading escapes that (it does not on the default study; see that module)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from study import cka
from study.core import runtime
from study.cka import measures, similarity
from study.cka.figures import CKAPanel, cka_across_depth, cka_frame, cka_grid, cka_to_reference
from study.outputs.figure_style import save_figure
from study.runs.table import collect_runs
from study.runs.load import analysis_images, load_models
from study.core.config import Params
from study.cka.params import cka_params
from study.runs.inspected import inspected_seed
from study.stats.confidence import confidence
from study.core.io import atomic_dir
from study.outputs.tables import write_table
from study.core.entry import add_analysis_arguments
from study.core.entry import configured

EMBEDDING_NOTE = ("the input embedding (each model's first layer: patch embedding or stem, table cka_layers) is left "
                  "out of every mean over depth, its per-layer values are kept")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_analysis_arguments(parser)


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.runs, args.prepared, args.figures, args.tables)


def run(params: Params, runs_dir: Path, prepared: Path, figures: Path, tables: Path) -> str:
    tic = time.perf_counter()
    device = runtime.pick_device(params.train.device)
    settings, conf = cka_params(params), confidence(params)
    runs = collect_runs(runs_dir)
    models = {(name, fraction, seed): loaded for seed in params.seeds
              for (name, fraction), loaded in load_models(runs, seed, device).items()}
    # The chance level's weights: each model and seed before its first step, read from the full-data run's
    # init.pt (the seed alone draws them, whatever the fraction).
    full_runs = runs[runs["fraction"] == max(f for _, f, _ in models)]
    initial = {(name, seed): loaded for seed in params.seeds
               for (name, _), loaded in load_models(full_runs, seed, device, weights="init.pt").items()}
    images = analysis_images(prepared, settings.images)
    result = similarity.cka_study(models, images, settings.batch_size, settings.kernel, settings.rbf_threshold, device,
                                  params.seeds, initial)
    blocks = result["matrices"][inspected_seed(params)]  # the heatmaps: the analysis seed's full-data models
    within = [CKAPanel(m, la, lb, f"{x} (within)", x, y) for (x, y), (la, lb, m) in blocks.items() if x == y]
    across = [CKAPanel(m, la, lb, f"{x} vs {y}", x, y) for (x, y), (la, lb, m) in blocks.items() if x != y]
    to_full, ceiling, chance = result["to_full"], result["ceiling"], result["chance"]
    summary = similarity.to_full_summary(to_full, ceiling, conf, chance)
    readings = readings_summary(summary, models, images, device, params, initial)
    per_seed_across = similarity.across_depth(result["matrices"], result["init_matrices"])
    across_summary = similarity.across_depth_summary(per_seed_across, ceiling, conf)
    pct = f"{conf:.0%}"
    skipped = "" if len(params.seeds) > 1 else " (empty: CKA to another seed's model needs at least 2 seeds)"
    with atomic_dir(figures) as tmp:  # all from the residual stream
        save_figure(cka_grid(within), tmp / cka.WITHIN_FIGURE, cka_frame(within))
        if across:
            save_figure(cka_grid(across), tmp / cka.ACROSS_FIGURE, cka_frame(across))
            save_figure(cka_across_depth(across_summary), tmp / cka.ACROSS_DEPTH_FIGURE,
                        across_summary)
        if not to_full.empty:
            figure_data = pd.concat([to_full.assign(curve="fraction"), ceiling.assign(curve="ceiling"),
                                     chance.assign(curve="chance")])
            save_figure(cka_to_reference(to_full, ceiling, max(params.fractions), chance),
                        tmp / cka.TO_FULL_FIGURE,
                        figure_data)
    with atomic_dir(tables) as tmp:
        write_table(similarity.layer_table(result["layers"]), tmp / cka.LAYERS,
                    "The layers each model's CKA is measured at, input to output: relative depth i/(L-1) of layer "
                    "i of L; input_embedding marks the first (patch embedding or stem), left out of means over "
                    "depth. Models with different layer counts are compared at equal relative depth.")
        write_table(summary, tmp / cka.TO_FULL,
                    f"CKA of each model at each fraction to the full-data model of another seed, mean over "
                    f"relative depth from the first layer after the input embedding to the output (averaged_layers; "
                    f"{EMBEDDING_NOTE}), {pct} t-interval over seeds; beside it the noise level, the cross-seed "
                    f"ceiling (full data vs full data), and the chance level, the same seed pairs' initial weights "
                    f"(two random initialisations of the architecture), each with its interval over distinct "
                    f"seed pairs; the gap ceiling - CKA, paired by seed, Holm-adjusted over each model's "
                    f"fractions{skipped}.")
        write_table(similarity.beside(similarity.beside(to_full, ceiling, "ceiling"), chance, "chance"),
                    tmp / cka.TO_FULL_LAYERS,
                    f"Per-layer CKA to the full-data model of the reference seed (the next seed), beside the noise "
                    f"level (ceiling: the same seed pair's full-data models) and the chance level (chance: the same "
                    f"seed pair's initial weights) at that layer; to_init: CKA of the layer to its own "
                    f"initialisation (how far training moved it){skipped}.")
        write_table(similarity.beside(ceiling, chance, "chance"), tmp / cka.CEILING,
                    f"Noise ceiling: per-layer CKA between full-data models of two seeds, beside the chance level "
                    f"(chance: the two seeds' initial weights) and each model's CKA to its own initialisation "
                    f"(to_init){skipped}.")
        write_table(readings, tmp / cka.READINGS,
                    f"The summary of cka_to_full for each reading of the layers: stream, each block's output (the "
                    f"residual stream, as every other CKA table); update, what each block adds to the stream (a "
                    f"ViT block's output minus its input, a ResNet block's residual branch); pooled, the vector the "
                    f"head reads. The input embedding comes first in each and is left out of the mean (for pooled "
                    f"the mean is the pooled CKA). A reading separates fractions only where its chance level "
                    f"(chance_mean, two random initialisations) lies below the CKA values{skipped}.")
        write_table(per_seed_across, tmp / cka.ACROSS_DEPTH_SEEDS,
                    "CKA between two models at matched relative depth, full data, per seed, beside the same two "
                    "models at initialisation (chance); in_depth_mean: the point lies past both models' input "
                    "embeddings and enters the mean over depth.")
        write_table(across_summary, tmp / cka.ACROSS_DEPTH,
                    f"CKA between two models at matched relative depth (full data), mean and {pct} t-interval "
                    "over seeds, beside each model's cross-seed ceiling (noise level) and the pair's CKA at "
                    "initialisation (chance level) at that depth; in_depth_mean: past both input embeddings.")
    note = (f"{len(to_full)} stream layer comparisons to another seed, {len(measures.MEASURES)} readings"
            if not to_full.empty else "1 seed: no cross-seed CKA")
    return (f"cka: {len(models)} models + {len(initial)} initialisations, "
            f"{len(images) - len(images) % settings.batch_size} test images, {len(within)} within + {len(across)} "
            f"across panels, {note} in {time.perf_counter() - tic:.0f}s -> {figures}, {tables}")


def readings_summary(stream: pd.DataFrame, models: dict, images, device, params: Params, initial: dict
                     ) -> pd.DataFrame:
    """``stream`` (the residual stream's ``cka_to_full``) and the same summary for every other reading of
    :data:`study.cka.measures.MEASURES`, one block of rows each, labelled by ``reading``."""
    settings, conf = cka_params(params), confidence(params)
    parts = [stream.assign(reading="stream")]
    for name, features in measures.MEASURES.items():
        if name == "stream":
            continue
        other = similarity.cka_study(models, images, settings.batch_size, settings.kernel, settings.rbf_threshold,
                                     device, params.seeds, initial, features)
        parts.append(similarity.to_full_summary(other["to_full"], other["ceiling"], conf, other["chance"])
                     .assign(reading=name))
    table = pd.concat(parts, ignore_index=True)
    return table[["reading", *similarity.SUMMARY_COLUMNS]]
