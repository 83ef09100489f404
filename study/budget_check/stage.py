"""Stage ``budget_check``: the study's runs against the same runs trained longer; converged, not budget-bound,
budget-bound or undetermined.

Reads the study's runs (``--runs``) and the longer runs of the checked fractions (``--runs-2x``, stages
``train_2x`` and ``distill_2x``; with ``budget_check.seeds``, also the extra seeds' runs at both budgets, stages
``check_*``), pairs them by model, fraction and seed, and writes per-run and per-cell tables
(study.budget_check.check) and the figure of Δ top-1 against the tolerance band.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from study import budget_check
from study.budget_check.check import VERDICTS, budget_check_table, extra_seed_runs, paired_runs, with_factors
from study.budget_check.figures import budget_check_figure
from study.outputs.figure_style import save_figure
from study.runs.table import collect_runs
from study.core.config import Params
from study.stats.confidence import confidence
from study.core.errors import StudyError
from study.core.io import atomic_dir
from study.outputs.tables import write_table
from study.core.entry import add_analysis_arguments
from study.core.entry import configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_analysis_arguments(parser, prepared=False)
    parser.add_argument("--runs-2x", type=Path, required=True, help="folder holding the longer runs (runs_2x)")


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.runs, args.runs_2x, args.figures, args.tables)


def run(params: Params, runs_dir: Path, longer_dir: Path, figures: Path, tables: Path) -> str:
    check = params.budget_check
    if check is None:
        raise StudyError("budget_check: params has no budget_check section; add one (e.g. {fractions: [1.0], "
                         "factor: 2.0, tolerance: 0.01}) or leave the stage out")
    if not check.fractions:  # nothing checked: no table, so the report has no budget-check part
        with atomic_dir(tables), atomic_dir(figures):
            pass
        return f"budget_check: no fraction checked (budget_check.fractions is empty) -> {tables}"
    conf = confidence(params)
    study_runs, longer = extra_seed_runs(with_factors(collect_runs(runs_dir)),
                                           with_factors(collect_runs(longer_dir)), check.seeds)
    pairs = paired_runs(study_runs, longer, check.factor, check.fractions, params.trained_models,
                          params.check_seeds)
    cells = budget_check_table(pairs, conf, check.tolerance)
    tol = f"{100 * check.tolerance:g} point{'' if 100 * check.tolerance == 1 else 's'}"
    pct, x = f"{conf:.0%}", f"x{check.factor:g}"
    with atomic_dir(tables) as tmp:
        write_table(pairs, tmp / budget_check.RUNS,
                    f"Budget check, every run pair: test top-1 at the study's budget and at "
                    f"{x} (same subset, seed and teacher), their difference, and each run's last-quarter flag.")
        write_table(cells, tmp / budget_check.CELLS, f"Budget check: change of test top-1 at {x} the budget, mean over "
                    f"seeds with its {pct} t-interval and the interval Holm-adjusted across cells; converged where the "
                    f"adjusted interval lies within +-{tol}, not budget-bound where only its upper end lies below "
                    f"+{tol}, budget-bound where it lies above +{tol}.")
    with atomic_dir(figures) as tmp:
        save_figure(budget_check_figure(cells), tmp / budget_check.FIGURE, cells)
    counts = cells["verdict"].value_counts()
    verdicts = ", ".join(f"{int(counts[v])} {v}" for v in VERDICTS if v in counts)
    return (f"budget_check: {len(pairs)} run pairs at {x} the budget, {len(cells)} model x fraction cells: "
            f"{verdicts} -> {figures}, {tables}")
