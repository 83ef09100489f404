"""Stage ``curves``: data-efficiency curves, paired gaps, crossings, trends and power-law fits from every run."""

from __future__ import annotations

import argparse
from pathlib import Path

from study import curves
from study.curves import efficiency
from study.curves.figures import data_efficiency_figure, gaps_figure
from study.outputs.figure_style import save_figure
from study.runs.table import collect_runs
from study.core.config import Params
from study.stats.confidence import confidence
from study.core.io import atomic_dir
from study.outputs.tables import write_table
from study.core.entry import add_analysis_arguments
from study.core.entry import configured
from study.core.entry import model_pairs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_analysis_arguments(parser, prepared=False)


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.runs, args.figures, args.tables)


def run(params: Params, runs_dir: Path, figures: Path, tables: Path) -> str:
    conf = confidence(params)
    runs = collect_runs(runs_dir).drop(columns="folder")
    summary = efficiency.summarise(runs, conf)
    pairs = model_pairs(params.trained_models)
    gaps = efficiency.paired_gaps(runs, pairs, conf)
    pct = f"{conf:.0%}"
    with atomic_dir(tables) as tmp:
        write_table(runs, tmp / curves.RUNS,
                    "Every training run: final model on the test set, with its convergence flags.")
        write_table(summary, tmp / curves.SUMMARY,
                    f"Test top-1 per model and fraction: mean, std and {pct} t-interval over seeds.")
        write_table(gaps, tmp / curves.GAPS,
                    f"Paired test top-1 gaps (same subset and seed): mean, {pct} t-interval, the "
                    "interval adjusted across the comparison's fractions (Holm), and the equivalence bound where it "
                    "includes 0.")
        write_table(efficiency.crossings(gaps), tmp / curves.CROSSINGS,
                    "Sign changes of the mean gap, and crossings supported by "
                    "adjusted-significant gaps of opposite sign.", 0)
        write_table(efficiency.gap_trends(runs, pairs, conf), tmp / curves.TRENDS,
                    "Slope of the per-seed gap per decade of "
                    f"training images, {pct} t-interval over seeds and the interval adjusted across the comparisons "
                    "of a scale (Holm), equivalence bound where it includes 0 (step-bound fractions left out).")
        write_table(efficiency.power_law_table(runs, conf), tmp / curves.POWER_LAW,
                    "Power-law fit of test error against training "
                    f"images, error = a n^-b + c, on runs that are not step-bound; {pct} bootstrap intervals over "
                    "seeds; identified: no parameter on its bound or with too wide an interval.", 6)
    with atomic_dir(figures) as tmp:
        save_figure(data_efficiency_figure(runs, conf), tmp / curves.CURVES_FIGURE, runs)
        if not gaps.empty:
            save_figure(gaps_figure(gaps), tmp / curves.GAPS_FIGURE, gaps)
    best = summary[summary["fraction"] == summary["fraction"].max()].sort_values("top1_mean").iloc[-1]
    flagged = int(runs["under_trained"].sum())
    return (f"curves: {len(runs)} runs ({flagged} still improving at the end), {summary['model'].nunique()} models; "
            f"best at full data: {best['model']} {best['top1_mean']:.4f} -> {figures}, {tables}")
