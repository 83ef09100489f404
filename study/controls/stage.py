"""Stage ``controls``: each control arm against the model it changes one thing of, and each ViT against itself
with uniform attention, on the clean images and under every robustness probe, averaged over the fractions with
the seed as the unit; each on-grid probe beside its off-grid control and their interaction; retained accuracy
under the patch-grid shuffle; what the seeds can detect. Exploratory throughout: the plan's claims are stage
``plan``'s.

Reads the robustness stage's per-run table (``--robustness``), so every arm is scored on the same images and
probes; writes the tables of :mod:`study.controls` and the figure of the contrasts on and off the ViT's grid.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from study import controls, robustness
from study.controls import contrasts
from study.controls.conditions import grid_pairs
from study.controls.figures import controls_figure
from study.core.config import INPUT_SHAPES, Params
from study.controls.params import controls_params
from study.plan.params import plan_params
from study.stats.confidence import confidence
from study.core.entry import configured
from study.robustness.reading import add_reader_arguments
from study.core.errors import StudyError
from study.core.io import atomic_dir
from study.outputs.figure_style import save_figure
from study.outputs.tables import write_table
from study.robustness.grids import occlusion_grid

OCCLUSION_SHARE = 0.75  # the share of cells dropped whose aligned and offset grids the figure sets side by side


add_arguments = add_reader_arguments  # --robustness, --figures, --tables


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.robustness, args.figures, args.tables)


def run(params: Params, robustness_tables: Path, figures: Path, tables: Path) -> str:
    tic = time.perf_counter()
    source = robustness_tables / f"{robustness.RUNS}.csv"
    if not source.is_file():
        raise StudyError(f"{source}: no robustness per-run table; run the robustness stage first (dvc repro robustness)")
    table = pd.read_csv(source)
    conf, settings = confidence(params), controls_params(params)
    configured_pairs = contrasts.comparison_pairs(table["model"].unique(), settings.pairs)
    diffs = contrasts.paired_differences(table, configured_pairs)
    pooled = contrasts.pooled_contrasts(diffs, conf)
    grid = occlusion_grid(params)
    patch = INPUT_SHAPES[params.data.dataset][0] // grid
    pairs = grid_pairs(table, grid, patch, OCCLUSION_SHARE)
    on_off = contrasts.grid_table(pooled, diffs, pairs, conf) if not pooled.empty else pd.DataFrame()
    headline = [c for pair in pairs for c in (pair.on_grid, *pair.off_grid)]
    family = max(1, len(settings.pairs))
    plan = plan_params(params)
    effect, power_target, alpha = ((plan.effects.robustness, plan.power, plan.alpha) if plan is not None
                                   else (0.05, 0.8, 1 - conf))
    power = contrasts.power_table(diffs, headline, effect, power_target, alpha, family)
    per_fraction = contrasts.fraction_contrasts(table, configured_pairs, conf)
    shuffle = pairs[0] if pairs and pairs[0].on_grid[0] == "rearrangement" else None  # the patch-grid shuffle
    retention = (contrasts.retention_table(table, configured_pairs, shuffle.on_grid, shuffle.off_grid[0], conf)
                 if shuffle is not None else pd.DataFrame())
    twin = settings.position
    position = retention[retention["comparison"] == f"{twin[0]} - {twin[1]}"] if twin and len(retention) else None
    pct = f"{conf:.0%}"
    images = f"{int(table['images'].min()):,} test images per run"
    with atomic_dir(tables) as tmp:
        write_table(pooled, tmp / controls.POOLED, paper=contrasts.compact_pooled(pooled), caption=
                    ("Each comparison under each condition, pooled over the fractions with the seed as the unit "
                    "(each seed's mean contrast over the fractions, and each seed's slope per decade of training "
                    f"images; df = seeds - 1), in points of top-1 on {images}: {pct} intervals raw and "
                    "Holm-adjusted across the condition's comparisons (the configured pairs one family, the "
                    "uniform-attention pairs another). Exploratory: intervals, no verdicts."))
        write_table(per_fraction, tmp / controls.FRACTIONS,
                    f"The same contrasts per fraction, paired by seed, {pct} intervals Holm-adjusted across the "
                    "fractions of one comparison and condition.")
        write_table(on_off, tmp / controls.GRID,
                    "Each comparison on the ViT's patch grid beside the same probe off it (pooled contrasts, "
                    f"points, Holm-adjusted intervals) and their interaction (on - off per fraction and seed, pooled "
                    f"one value per seed, raw {pct} interval). Exploratory.")
        write_table(power, tmp / controls.POWER,
                    "What the seeds can detect: the SD of the seeds' mean contrasts over the fractions (points), the "
                    f"power of the t-test on the seeds' means to detect {100 * effect:g} points at alpha {alpha:g} "
                    f"over a Holm family of {family} (its strictest level), and the seeds that {power_target:.0%} "
                    "power would need.")
        write_table(retention, tmp / controls.RETENTION,
                    "Retained accuracy (top-1 under the probe / the run's clean top-1) of each pair under the "
                    f"patch-grid shuffle and its offset control, per fraction, paired by seed, {pct} intervals "
                    "Holm-adjusted across the fractions. Exploratory.")
        if position is not None:
            write_table(position, tmp / controls.POSITION,
                        f"The position hypothesis: retained accuracy of {twin[0]} (no position embedding) minus that "
                        f"of {twin[1]} under the patch-grid shuffle and its offset control, per fraction, paired by "
                        f"seed, {pct} intervals Holm-adjusted across the fractions. Exploratory.")
    with atomic_dir(figures) as tmp:
        if not on_off.empty:
            save_figure(controls_figure(pooled, pairs), tmp / controls.FIGURE, on_off)
    seconds = time.perf_counter() - tic
    return (f"controls: {len(configured_pairs)} comparisons x {pooled[['probe', 'variant', 'level']].drop_duplicates().shape[0] if not pooled.empty else 0} "
            f"conditions in {seconds:.0f}s -> {figures}, {tables}")
