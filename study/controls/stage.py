"""Stage ``controls``: each control arm against the model it changes one thing of, and each ViT against itself
with uniform attention, on the clean images and under every robustness probe, averaged over the fractions by one
model paired by seed; each on-grid probe beside its off-grid control; what the seeds can detect.

Reads the robustness stage's per-run table (``--robustness``), so every arm is scored on the same images and
probes; writes the tables of :mod:`study.controls` and the figure of the contrasts on and off the ViT's grid.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from study import controls, robustness
from study.controls import contrasts as C
from study.controls.conditions import grid_pairs
from study.controls.figures import controls_figure
from study.core.config import INPUT_SHAPES, Params
from study.core.entry import configured
from study.core.errors import StudyError
from study.core.io import atomic_dir
from study.outputs.figure_style import save_figure
from study.outputs.tables import write_table
from study.robustness.grids import occlusion_grid

OCCLUSION_SHARE = 0.75  # the share of cells dropped whose aligned and offset grids the figure sets side by side


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robustness", type=Path, required=True,
                        help="the robustness stage's tables folder (reports/tables/robustness)")
    parser.add_argument("--figures", type=Path, required=True, help="output folder for figures")
    parser.add_argument("--tables", type=Path, required=True, help="output folder for tables")


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.robustness, args.figures, args.tables)


def run(params: Params, robustness_tables: Path, figures: Path, tables: Path) -> str:
    tic = time.perf_counter()
    source = robustness_tables / f"{robustness.RUNS}.csv"
    if not source.is_file():
        raise StudyError(f"{source}: no robustness per-run table; run the robustness stage first (dvc repro robustness)")
    table = pd.read_csv(source)
    conf, effects = params.analysis.curves.confidence, params.analysis.effects
    configured_pairs = C.comparison_pairs(table["model"].unique(), params.analysis.controls.pairs)
    diffs = C.paired_differences(table, configured_pairs)
    pooled = C.pooled_contrasts(diffs, conf, effects.control)
    grid = occlusion_grid(params)
    patch = INPUT_SHAPES[params.data.dataset][0] // grid
    pairs = grid_pairs(table, grid, patch, OCCLUSION_SHARE)
    on_off = C.grid_table(pooled, pairs) if not pooled.empty else pd.DataFrame()
    headline = [c for pair in pairs for c in (pair.on_grid, *pair.off_grid)]
    family = max(1, len(params.analysis.controls.pairs))
    power = C.power_table(diffs, headline, effects.control, effects.power, effects.alpha, family)
    per_fraction = C.fraction_contrasts(table, configured_pairs, conf)
    pct = f"{conf:.0%}"
    with atomic_dir(tables) as tmp:
        write_table(pooled, tmp / controls.POOLED,
                    "Each comparison under each condition, one model over the fractions paired by seed (diff ~ 1 + "
                    "centred log10 images, random intercept per seed, or OLS where noted): the mean contrast at the "
                    f"design's centre and its slope per decade, in points of top-1, {pct} intervals raw and "
                    "Holm-adjusted across the condition's comparisons (the configured pairs one family, the "
                    "uniform-attention pairs another); verdict against the smallest effect of interest "
                    f"({100 * effects.control:g} points) and the effects the interval excludes (bound).")
        write_table(per_fraction, tmp / controls.FRACTIONS,
                    f"The same contrasts per fraction, paired by seed, {pct} intervals Holm-adjusted across the "
                    "fractions of one comparison and condition.")
        write_table(on_off, tmp / controls.GRID,
                    "Each comparison on the ViT's patch grid beside the same probe off it (pooled contrasts, "
                    "points, Holm-adjusted intervals, verdicts).")
        write_table(power, tmp / controls.POWER,
                    f"What the seeds can detect: pooled within-fraction SD of the paired differences (points), the "
                    f"power of the pooled test to detect {100 * effects.control:g} points at alpha "
                    f"{effects.alpha:g} over a Holm family of {family} (its strictest level), and the seeds that "
                    f"{effects.power:.0%} power would need (observations taken as independent).")
    with atomic_dir(figures) as tmp:
        if not on_off.empty:
            save_figure(controls_figure(pooled, pairs), tmp / controls.FIGURE, on_off)
    seconds = time.perf_counter() - tic
    return (f"controls: {len(configured_pairs)} comparisons x {pooled[['probe', 'variant', 'level']].drop_duplicates().shape[0] if not pooled.empty else 0} "
            f"conditions in {seconds:.0f}s -> {figures}, {tables}")
