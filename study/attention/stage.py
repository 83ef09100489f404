"""Stage ``attention``: per-head attention distance and entropy of the ViT-family runs against their
initial weights and against each other, class-token maps and rollout of the full-data models."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from study import attention, priors
from study.core import runtime
from study.attention import locality
from study.priors import gates as convit_gates
from study.attention.figures import attention_distance_plot, gates_figure, run_maps_figure
from study.outputs.figure_style import save_figure
from study.runs.table import collect_runs
from study.runs.load import analysis_images, load_models
from study.core.config import Params
from study.attention.params import attention_params
from study.runs.inspected import inspected_seed
from study.stats.confidence import confidence
from study.data.scramble import scramble_images, setting_scramble
from study.core.errors import StudyError
from study.core.io import atomic_dir
from study.archs import traits
from study.outputs.tables import write_table
from study.core.entry import add_analysis_arguments
from study.core.entry import configured
from study.core.entry import model_pairs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_analysis_arguments(parser)


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.runs, args.prepared, args.figures, args.tables)


def run(params: Params, runs_dir: Path, prepared: Path, figures: Path, tables: Path) -> str:
    tic = time.perf_counter()
    device = runtime.pick_device(params.train.device)
    settings, conf, inspected = attention_params(params), confidence(params), inspected_seed(params)
    runs = collect_runs(runs_dir)
    trained = {(name, locality.TRAINED, fraction, seed): loaded for seed in params.seeds
               for (name, fraction), loaded in load_models(runs, seed, device).items()
               if traits(loaded[1].arch, loaded[1].arch_args).attention}
    if not trained:
        raise StudyError("attention: no ViT-family model among the runs; add a 'vit', 'deit', 'convit' or "
                         "'vit_convstem' model")
    fractions = sorted({f for _, _, f, _ in trained})
    measured = {name for name, _, _, _ in trained}
    pairs = [(x, y) for x, y in model_pairs(params.trained_models) if x in measured and y in measured]
    smallest, full = fractions[0], fractions[-1]
    # The baseline: each model and seed at initialisation (the same weights at every fraction: the seed alone
    # draws them), read from the full-data run's init.pt.
    initial = {(name, locality.INIT, float("nan"), seed): loaded for seed in params.seeds
               for (name, fraction), loaded in load_models(runs, seed, device, weights="init.pt").items()
               if fraction == full and (name, locality.TRAINED, fraction, seed) in trained}
    images = analysis_images(prepared, settings.images)
    heads = locality.head_statistics({**trained, **initial}, images, 64, device)
    layers = locality.layer_statistics(heads)
    trained_layers = layers[layers["state"] == locality.TRAINED]
    per_layer = locality.distance_per_layer(trained_layers)
    shown_states = locality.shown_conditions(heads, smallest, full)
    shown = images[: settings.show]
    share, pct = locality.LOCAL_SHARE, f"{conf:.0%}"
    # ConViT's gates (none for the other models): per run, and how they move from the smallest fraction to the largest
    gates = convit_gates.gate_rows({(name, fraction, seed): model
                                    for (name, _, fraction, seed), (model, _) in trained.items()})
    sizes = runs.groupby("fraction")["train_images"].first()
    gate_summary = convit_gates.gate_summary(gates, conf).assign(train_images=lambda d: d["fraction"].map(sizes))
    with atomic_dir(figures) as tmp:
        save_figure(attention_distance_plot(shown_states, columns="condition", local_share=share),
                    tmp / attention.DISTANCE, shown_states)
        for (name, _, fraction, seed), (model, spec) in trained.items():
            if fraction != full or seed != inspected:
                continue
            maps = locality.attention_maps(model, spec, shown, device)
            # the maps lie on the token grid the model sees: a scrambled model's are drawn over its scrambled images
            seen = shown if spec.scramble is None else scramble_images(
                shown, setting_scramble(spec.scramble, spec.image_size, spec.image_size))
            pictures = seen.astype(np.float32) / 255.0
            for token, m in maps["tokens"].items():
                for block in ("first", "last"):
                    fig, frame = run_maps_figure(pictures, m[block], m["rollout"], name, fraction, seed, token, block,
                                                 scrambled=spec.scramble is not None)
                    save_figure(fig, tmp / f"{attention.MAPS_FIGURE}_{name}_{token}_{block}", frame)
        if not gates.empty:
            save_figure(gates_figure(gate_summary), tmp / priors.GATES, gate_summary)
    with atomic_dir(tables) as tmp:
        write_table(heads, tmp / attention.HEADS_SEEDS,
                    "Mean attention distance (px) and entropy (nats) of every head, per run; state init = the "
                    "run's seed before training (fraction --).", 3)
        write_table(locality.head_table(heads, conf), tmp / attention.HEADS,
                    f"Per layer, the k-th most local head (rank 0 = most local within each seed): distance "
                    f"mean and {pct} t-interval over seeds, mean entropy; uniform-attention references.", 3)
        write_table(locality.layer_table(layers, conf), tmp / attention.LAYERS,
                    f"Per layer over seeds: most local head per seed, its distance (mean, {pct} t-interval), "
                    f"mean distance over heads (mean, {pct} t-interval), heads below {share:g} x uniform distance "
                    f"(mean), mean entropy ({pct} t-interval).", 3)
        write_table(locality.contrasts(layers, conf), tmp / attention.CONTRASTS,
                    "Most-local-head distance at full data minus initialisation / minus the smallest fraction, "
                    "paired by seed; intervals Holm-adjusted over each model's contrasts; equivalence bound where "
                    "an interval includes 0.", 3)
        write_table(locality.model_contrasts(layers, pairs, conf), tmp / attention.MODEL_CONTRASTS,
                    f"One model's attention distance minus another's (most local head; mean over heads) per state, "
                    f"fraction and layer, paired by seed: mean, {pct} t-interval, and the interval Holm-adjusted over "
                    "each pair and measure; equivalence bound where it includes 0.", 3)
        if not gates.empty:
            write_table(gates, tmp / priors.GATES_RUNS,
                        "ConViT: the gate σ(λ) of every GPSA block and head per run (the "
                        "weight on positional attention; σ(1) = 0.731 at initialisation).", 4)
            write_table(gate_summary, tmp / priors.GATES,
                        f"ConViT: head-mean gate per block and fraction, mean and {pct} "
                        "t-interval over seeds.", 4)
            write_table(convit_gates.gate_contrasts(gates, conf), tmp / priors.GATE_CONTRASTS,
                        "ConViT: head-mean gate at the largest "
                        "fraction minus the smallest, per block, paired by seed; intervals Holm-adjusted across a "
                        "model's blocks; negative = the gates open (less positional); equivalence bound where an "
                        "interval includes 0.", 4)
        write_table(per_layer, tmp / attention.DISTANCE,
                    "Mean attention distance (pixels) per layer, averaged over heads and seeds (trained models).", 2)
    return (f"attention: {len(trained)} ViT-family runs + {len(initial)} initialisations, distances over "
            f"{len(images)} test images in {time.perf_counter() - tic:.0f}s -> {figures}, {tables}")
