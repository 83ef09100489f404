"""Stage ``robustness``: every run under occlusion, patch shuffle, shifts and corruptions on a fixed seeded set of
test images; where each model keeps its accuracy, ViT and DeiT against the ResNet, with Holm-adjusted intervals.

With ``analysis.robustness.uniform_attention``, each ViT/DeiT run is scored a second time with uniform attention
(``<model>@uniform``, :mod:`study.models.ablations`) and contrasted with itself, ``vit@uniform − vit``: what its
attention is worth, clean and under every probe."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch

from study import robustness
from study.core import runtime
from study.robustness import contrasts as R
from study.outputs.figure_style import save_figure
from study.robustness.figures import contrasts_figure, corruption_figure, probe_figure
from study.robustness.scoring import conditions, probe_set, score_run_files
from study.runs.table import collect_runs
from study.core.config import INPUT_SHAPES, Params
from study.robustness.grids import check_robustness, occlusion_grid, rearrangement_grids
from study.data.prepared import read_prepared
from study.core.io import atomic_dir
from study.outputs.tables import write_table
from study.core.entry import add_analysis_arguments
from study.core.entry import configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_analysis_arguments(parser)


def main(args: argparse.Namespace) -> str:
    params = configured(args.params)
    check_robustness(params, str(args.params))
    return run(params, args.runs, args.prepared, args.figures, args.tables)


def reference_model(params: Params) -> str:
    """The CNN every other model is compared with: the distillation teacher, else the first baseline."""
    return params.distill.teacher if params.distill else params.baselines[0]


def run(params: Params, runs_dir: Path, prepared: Path, figures: Path, tables: Path) -> str:
    tic = time.perf_counter()
    device = runtime.pick_device(params.train.device)
    r, conf = params.analysis.robustness, params.analysis.curves.confidence
    runs = collect_runs(runs_dir)
    data = read_prepared(prepared)
    chosen = probe_set(len(data.test_labels), r.images, r.seed)
    images, labels = data.test_images[chosen], data.test_labels[chosen]
    side, grid = INPUT_SHAPES[params.data.dataset][0], occlusion_grid(params)
    settings = dict(image_size=side, seed=r.seed, occlusion_grid=grid, shares=r.occlusion.shares,
                    offset=r.occlusion.offset, grids=rearrangement_grids(params), shifts=r.translation.shifts,
                    corruptions=r.corruptions.names, severities=r.corruptions.severities)
    probes = conditions(**settings)
    models = {(row.model, row.fraction, row.seed): Path(row.folder) / "model.pt" for row in runs.itertuples()}
    # On a CPU, one single-threaded process per thread the study allows (train.threads, or STUDY_THREADS).
    scores, consistency, cost = score_run_files(models, images, labels, settings, r.batch_size, device,
                                                params.train.precision, processes=torch.get_num_threads(),
                                                uniform=r.uniform_attention)
    runs = R.with_variant_runs(runs.drop(columns="folder"), scores)
    recorded = {"images": len(chosen), "image_seed": r.seed}
    table = R.per_run(scores, runs).assign(**recorded)  # the clean images once, as probe "clean"
    shifts = R.consistency_rows(consistency, runs).assign(**recorded)
    reference = reference_model(params)
    pairs = [(name, reference) for name in params.trained_models if name != reference]
    ablated = R.variant_pairs(table)  # vit@uniform - vit, ...: each variant against its own run only
    summary = R.summarise(R.with_level_zero(table), conf)  # every probe's curve starts at the clean images
    accuracy = R.contrasts(table, pairs + ablated, "accuracy", conf)
    retained = R.contrasts(table, pairs + ablated, "retained", conf)
    stable = R.contrasts(shifts, pairs + ablated, R.CONSISTENCY, conf)
    # Trends in two calls: a trend's Holm family is the comparisons of one call at one condition, so the
    # variants' contrasts must not widen the model comparisons' intervals.
    trends = pd.concat([R.contrast_trends(data, compared, metric, conf) for compared in (pairs, ablated) if compared
                        for data, metric in ((table, "accuracy"), (table, "retained"), (shifts, R.CONSISTENCY))],
                       ignore_index=True)
    flips = R.winner_flips(accuracy)
    mce, ce = R.mce_tables(R.trained_only(table), reference, conf)
    values, headline = R.headline(summary, accuracy, trends, grid)
    pct = f"{conf:.0%}"
    where = (f"{len(chosen):,} test images drawn with seed {r.seed}"
             + (" (the whole test set)" if len(chosen) == len(data.test_labels) else ""))
    holm = "Holm-adjusted across the comparison's fractions (one family per comparison, metric, probe and level)"
    with atomic_dir(tables) as tmp:
        write_table(pd.DataFrame([{**recorded, "test_images": len(data.test_labels), "runs": len(models),
                                   "conditions": len(probes), "confidence": conf, "reference": reference,
                                   "uniform_attention": ", ".join(a for a, _ in ablated) or "none"}]),
                    tmp / robustness.PROBE_SET,
                    "The fixed set of test images every run is probed on (images, the seed that "
                    "drew them and every probe's random choices), the runs and the conditions scored, and the "
                    "models also scored with uniform attention (every attention row 1/T over all T tokens, prefix "
                    "tokens included; ConViTs and CNNs have no such variant).")
        write_table(pd.DataFrame({"test_index": chosen}), tmp / robustness.PROBE_IMAGES,
                    f"Indices in the test set of the {where}.", 0)
        write_table(table, tmp / robustness.RUNS, f"Every run under every condition on {where}: top-1 and "
                    "retained accuracy (top-1 / clean top-1 of the same run); <model>@uniform: the same run with "
                    "uniform attention at test time.")
        write_table(summary, tmp / robustness.SUMMARY,
                    f"Top-1 and retained accuracy per model, fraction, probe and level "
                    f"on {where}: mean and {pct} t-interval over seeds.")
        write_table(accuracy, tmp / robustness.CONTRASTS_ACCURACY,
                    f"Top-1 contrasts against {reference} (<model>@uniform: against its own run), paired by seed: "
                    f"mean, {pct} t-interval, interval {holm}; equivalence bound where no difference is detected.")
        write_table(retained, tmp / robustness.CONTRASTS_RETAINED,
                    f"Retained-accuracy (probe / clean) contrasts against {reference} (<model>@uniform: against "
                    f"its own run), paired by seed: mean, {pct} t-interval, interval {holm}; equivalence bound "
                    "where no difference is detected.")
        write_table(shifts, tmp / robustness.CONSISTENCY_RUNS,
                    "Share of predictions a 1-px shift changes from the clean "
                    "ones (changed) and its complement (consistency), per run and direction.")
        write_table(R.summarise(shifts, conf, values=("consistency",)), tmp / robustness.CONSISTENCY,
                    f"1-px shift consistency per model and fraction: mean and {pct} t-interval over seeds.")
        write_table(stable, tmp / robustness.CONTRASTS_CONSISTENCY,
                    f"1-px shift consistency contrasts against {reference} (<model>@uniform: against its run), "
                    f"paired by seed, interval {holm}.")
        write_table(trends, tmp / robustness.CONTRAST_TRENDS, f"Slope of each per-seed contrast (points) per decade of "
                    f"training images, {pct} t-interval over seeds; fractions with step-bound runs left out.")
        write_table(flips, tmp / robustness.WINNER_FLIPS,
                    "Along each probe's levels (clean = level 0): sign changes of the "
                    "mean top-1 contrast, and a flip of the winner claimed only where the adjusted intervals are "
                    "significant with opposite signs at a lower and a higher level.")
        write_table(mce, tmp / robustness.MCE,
                    f"Mean corruption error against {reference} of the same fraction and seed "
                    f"(plain and relative to the clean error; 1 = as robust), mean and {pct} t-interval over seeds, "
                    "and the interval of its difference from 1 Holm-adjusted across fractions.")
        write_table(ce, tmp / robustness.CORRUPTION_ERRORS,
                    f"Corruption error per corruption against {reference} (errors "
                    f"summed over severities), mean and {pct} t-interval over seeds.")
        write_table(values, tmp / robustness.HEADLINE,
                    f"Top-1 at the headline conditions, per model and fraction, mean and "
                    f"{pct} t-interval over seeds.")
        write_table(headline, tmp / robustness.HEADLINE_CONTRASTS,
                    f"Top-1 contrasts at the headline conditions ({holm}) "
                    f"and their slope per decade of training images ({pct} t-interval over seeds).")
        write_table(cost, tmp / robustness.COST,
                    "Where the stage's time went: making each probe's images (once, for every "
                    "run) and scoring them with each model.", 2)
    side_label = f"cells dropped (%) of the {grid}x{grid} grid"
    # The figures show the trained models against the reference CNN; a variant would share its model's colour.
    summary = R.trained_only(summary)
    headline = headline[headline["comparison"].isin([f"{a} - {b}" for a, b in pairs])]
    with atomic_dir(figures) as tmp:
        for probe, xlabel, options in ((robustness.OCCLUSION, side_label, {"share": True}),
                                       (robustness.REARRANGEMENT, "cells per side permuted", {"categorical": True}),
                                       (robustness.TRANSLATION, "shift (px)", {})):
            shown = summary[summary["probe"] == probe]
            if not shown.empty:
                save_figure(probe_figure(summary, probe, xlabel, conf, **options), tmp / probe, shown)
        if not ce.empty:
            save_figure(corruption_figure(ce, conf), tmp / robustness.CORRUPTION_ERRORS, ce)
        if not headline.empty and (headline["comparison"].nunique() > 0):
            save_figure(contrasts_figure(headline), tmp / robustness.CONTRASTS_FIGURE, headline)
    seconds = time.perf_counter() - tic
    scored = len(scores) * len(chosen)  # (runs + variants) x conditions rows, each of the chosen images
    variants = f" (+{len(scores) // len(probes) - len(models)} with uniform attention)" if ablated else ""
    return (f"robustness: {len(models)} runs{variants} x {len(probes)} conditions x {len(chosen):,} images "
            f"({scored / seconds:,.0f} scored/s) in {seconds:.0f}s -> {figures}, {tables}")
