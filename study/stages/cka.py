"""Stage ``cka``: CKA similarity within and across models, of every fraction to another seed's full-data
model, and the cross-seed ceiling."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from study import runtime
from study.analysis import similarity as S
from study.analysis.cka_figures import CKAPanel, cka_frame, cka_grid, cka_to_reference
from study.analysis.figure_style import save_figure
from study.analysis.runs import analysis_images, collect_runs, load_models
from study.config import Params
from study.io import atomic_dir
from study.report.tables import write_table
from study.stages import add_analysis_arguments, configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_analysis_arguments(parser)


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.runs, args.prepared, args.figures, args.tables)


def run(params: Params, runs_dir: Path, prepared: Path, figures: Path, tables: Path) -> str:
    tic = time.perf_counter()
    device = runtime.pick_device(params.train.device)
    a, conf = params.analysis, params.analysis.curves.confidence
    runs = collect_runs(runs_dir)
    models = {(name, fraction, seed): loaded for seed in params.seeds
              for (name, fraction), loaded in load_models(runs, seed, device).items()}
    images = analysis_images(prepared, a.cka.images)
    result = S.cka_study(models, images, a.cka.batch_size, a.cka.kernel, a.cka.rbf_threshold, device, params.seeds)
    blocks = result["matrices"][a.seed]  # the heatmaps: the analysis seed's full-data models
    within = [CKAPanel(m, la, lb, f"{x} (within)", x, y) for (x, y), (la, lb, m) in blocks.items() if x == y]
    across = [CKAPanel(m, la, lb, f"{x} vs {y}", x, y) for (x, y), (la, lb, m) in blocks.items() if x != y]
    to_full, ceiling = result["to_full"], result["ceiling"]
    summary = S.to_full_summary(to_full, ceiling, conf)
    per_seed_across = S.across_depth(result["matrices"])
    across_summary = S.across_depth_summary(per_seed_across, ceiling, conf)
    pct, grid = f"{conf:.0%}", len(S.DEPTH_GRID)
    skipped = "" if len(params.seeds) > 1 else " (empty: CKA to another seed's model needs at least 2 seeds)"
    with atomic_dir(figures) as tmp:
        save_figure(cka_grid(within), tmp / "cka_within", cka_frame(within))
        save_figure(cka_grid(across), tmp / "cka_across", cka_frame(across))
        if not to_full.empty:
            figure_data = pd.concat([to_full.assign(curve="fraction"), ceiling.assign(curve="ceiling")])
            save_figure(cka_to_reference(to_full, ceiling, reference=max(params.fractions)), tmp / "cka_to_full",
                        figure_data)
    with atomic_dir(tables) as tmp:
        write_table(summary, tmp / "cka_to_full",
                    f"CKA of each model at each fraction to the full-data model of another seed, mean over "
                    f"relative depth ({grid}-point grid), {pct} t-interval over seeds; the cross-seed ceiling "
                    f"(full data vs full data, interval over distinct seed pairs); the gap ceiling - CKA, "
                    f"paired by seed, Holm-adjusted over each model's fractions{skipped}.")
        write_table(to_full, tmp / "cka_to_full_layers",
                    f"Per-layer CKA to the full-data model of the reference seed (the next seed){skipped}.")
        write_table(ceiling, tmp / "cka_ceiling",
                    f"Noise ceiling: per-layer CKA between full-data models of two seeds{skipped}.")
        write_table(per_seed_across, tmp / "cka_across_depth_seeds",
                    "CKA between two models at matched relative depth, full data, per seed.")
        write_table(across_summary, tmp / "cka_across_depth",
                    f"CKA between two models at matched relative depth (full data), mean and {pct} t-interval "
                    "over seeds, beside each model's cross-seed ceiling at that depth.")
    note = f"{len(to_full)} layer comparisons to another seed" if not to_full.empty else "1 seed: no cross-seed CKA"
    return (f"cka: {len(models)} models, {len(images) - len(images) % a.cka.batch_size} test images, "
            f"{len(within)} within + {len(across)} across panels, {note} in {time.perf_counter() - tic:.0f}s "
            f"-> {figures}, {tables}")
