"""Stage ``robustness``: every run under occlusion, patch shuffle, shifts and corruptions on a fixed seeded set of
test images; where each model keeps its accuracy, ViT and DeiT against the ResNet, with Holm-adjusted intervals.

With ``analysis.robustness.uniform_attention``, each ViT/DeiT run is scored a second time with uniform attention
(``<model>@uniform``, :mod:`study.models.ablations`) and contrasted with itself, ``vit@uniform − vit``: what its
attention is worth, clean and under every probe.

With an analysis plan (``analysis.plan``), the conditions its claims name (and the clean images) are scored again
for the runs of the models they name, on ``analysis.plan.images`` test images drawn with the same seed (the whole
test set by default), into ``plan_runs`` (the layout of ``robustness_runs``), which the plan stage judges; every
other table here stays exploratory, on ``analysis.robustness.images`` images."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from study import robustness
from study.core import runtime
from study.robustness import contrasts
from study.outputs.figure_style import save_figure
from study.robustness.figures import contrasts_figure, corruption_figure, probe_figure
from study.robustness.scoring import (COST_COLUMNS, SCORE_COLUMNS, conditions, probe_set, score_run_files,
                                      scoring_workers)
from study.runs.table import collect_runs
from study.core.config import Params
from study.plan.params import plan_params
from study.robustness.params import robustness_params
from study.stats.confidence import confidence
from study.robustness.grids import check_robustness, occlusion_grid, plan_scoring, probe_settings
from study.data.prepared import Prepared, read_prepared
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
    r, conf, planned = robustness_params(params), confidence(params), plan_params(params)
    runs = collect_runs(runs_dir)
    data = read_prepared(prepared)
    chosen = probe_set(len(data.test_labels), r.images, r.seed)
    images, labels = data.test_images[chosen], data.test_labels[chosen]
    grid, settings = occlusion_grid(params), probe_settings(params)
    probes = conditions(**settings)
    models = {(row.model, row.fraction, row.seed): Path(row.folder) / "model.pt" for row in runs.itertuples()}
    # On a CPU, a single-threaded share of the runs per thread the study allows (train.threads, or STUDY_THREADS):
    # this process scores one, worker processes the others.
    processes = torch.get_num_threads()
    trained_runs = runs.drop(columns="folder")
    with scoring_workers(processes, device) as workers:  # started once for both scorings
        scoring = dict(batch_size=r.batch_size, device=device, precision=params.train.precision,
                       processes=processes, workers=workers)
        scores, consistency, cost = score_run_files(models, images, labels, settings, uniform=r.uniform_attention,
                                                    **scoring)
        plan = _score_plan(params, data, trained_runs, models, settings, scoring) \
            if planned is not None else None
    runs = contrasts.with_variant_runs(trained_runs, scores)
    recorded = {"images": len(chosen), "image_seed": r.seed}
    table = contrasts.per_run(scores, runs).assign(**recorded)  # the clean images once, as probe "clean"
    shifts = contrasts.consistency_rows(consistency, runs).assign(**recorded)
    reference = reference_model(params)
    pairs = [(name, reference) for name in params.trained_models if name != reference]
    ablated = contrasts.variant_pairs(table)  # vit@uniform - vit, ...: each variant against its own run only
    # every probe's curve starts at the clean images
    summary = contrasts.summarise(contrasts.with_level_zero(table), conf)
    accuracy = contrasts.contrasts(table, pairs + ablated, "accuracy", conf)
    retained = contrasts.contrasts(table, pairs + ablated, "retained", conf)
    stable = contrasts.contrasts(shifts, pairs + ablated, contrasts.CONSISTENCY, conf)
    # Trends in two calls: a trend's Holm family is the comparisons of one call at one condition, so the
    # variants' contrasts must not widen the model comparisons' intervals.
    trends = pd.concat([contrasts.contrast_trends(data, compared, metric, conf)
                        for compared in (pairs, ablated) if compared
                        for data, metric in ((table, "accuracy"), (table, "retained"),
                                             (shifts, contrasts.CONSISTENCY))],
                       ignore_index=True)
    flips = contrasts.winner_flips(accuracy)
    mce, ce = contrasts.mce_tables(contrasts.trained_only(table), reference, conf)
    values, headline = contrasts.headline(summary, accuracy, trends, grid)
    pct = f"{conf:.0%}"
    where = (f"{len(chosen):,} test images drawn with seed {r.seed}"
             + (" (the whole test set)" if len(chosen) == len(data.test_labels) else ""))
    holm = "Holm-adjusted across the comparison's fractions (one family per comparison, metric, probe and level)"
    scored_sets = [{"scoring": "exploratory", **recorded, "test_images": len(data.test_labels), "runs": len(models),
                    "conditions": len(probes), "confidence": conf, "reference": reference,
                    "uniform_attention": ", ".join(a for a, _ in ablated) or "none"}]
    if plan is not None:
        scored_sets.append({**scored_sets[0], **plan.recorded})
        cost = pd.concat([cost, plan.cost.assign(part="plan: " + plan.cost["part"])], ignore_index=True)
    with atomic_dir(tables) as tmp:
        write_table(pd.DataFrame(scored_sets), tmp / robustness.PROBE_SET,
                    "The fixed sets of test images the runs are probed on (images, the seed that "
                    "drew them and every probe's random choices), the runs and the conditions scored, and the "
                    "models also scored with uniform attention (every attention row 1/T over all T tokens, prefix "
                    "tokens included; ConViTs and CNNs have no such variant): every condition for every run "
                    "(exploratory) and, with an analysis plan, its claims' conditions for their models (plan).")
        if plan is not None:
            write_table(plan.table, tmp / robustness.PLAN_RUNS,
                        f"The analysis plan's runs under its claims' conditions (and clean) on "
                        f"{plan.recorded['images']:,} test images drawn with seed {r.seed}: top-1 and retained "
                        "accuracy, as robustness_runs; <model>@uniform: the run with uniform attention.")
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
        write_table(contrasts.summarise(shifts, conf, values=("consistency",)), tmp / robustness.CONSISTENCY,
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
    summary = contrasts.trained_only(summary)
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
    planned = ""
    if plan is not None:
        scored += len(plan.scores) * plan.recorded["images"]
        planned = f"; plan: {plan.summary}"
    return (f"robustness: {len(models)} runs{variants} x {len(probes)} conditions x {len(chosen):,} images{planned} "
            f"({scored / seconds:,.0f} scored/s) in {seconds:.0f}s -> {figures}, {tables}")


@dataclass(frozen=True)
class _PlanScores:
    scores: pd.DataFrame  # as score_runs returns them
    table: pd.DataFrame  # per run (contrasts.per_run), as robustness_runs
    cost: pd.DataFrame
    recorded: dict  # the plan's row of the probe set table
    summary: str  # runs x conditions x images, for the stage's line


def _score_plan(params: Params, data: Prepared, runs: pd.DataFrame, models: dict, settings: dict, scoring: dict
                ) -> _PlanScores:
    """The analysis plan's conditions for the runs of its models (grids.plan_scoring) on ``analysis.plan.images``
    test images, drawn by the exploratory set's rule and seed (all of them when the plan asks for as many)."""
    r, plan = robustness_params(params), plan_params(params)
    names, uniform, keys = plan_scoring(params)
    chosen = probe_set(len(data.test_labels), plan.images, r.seed)
    runs_scored = {key: path for key, path in models.items() if key[0] in names}
    if runs_scored:
        scores, _, cost = score_run_files(runs_scored, data.test_images[chosen], data.test_labels[chosen], settings,
                                          uniform=frozenset(uniform), only=frozenset(keys), **scoring)
    else:  # no claim whose models the study trains: an empty table, in the layout the plan stage reads
        scores, cost = pd.DataFrame(columns=SCORE_COLUMNS), pd.DataFrame(columns=COST_COLUMNS)
    table = contrasts.per_run(scores, contrasts.with_variant_runs(runs, scores)).assign(images=len(chosen),
                                                                                       image_seed=r.seed)
    variants = len(scores) // len(keys) - len(runs_scored) if keys else 0
    recorded = {"scoring": "plan", "images": len(chosen), "image_seed": r.seed, "runs": len(runs_scored),
                "conditions": len(keys), "uniform_attention": ", ".join(f"{m}{robustness.UNIFORM}" for m in uniform)
                or "none"}
    summary = (f"{len(runs_scored)} runs" + (f" (+{variants} with uniform attention)" if variants else "")
               + f" x {len(keys)} conditions x {len(chosen):,} images")
    return _PlanScores(scores, table, cost, recorded, summary)

