"""Stage ``ladder``: each step of the ladder (rung k+1 − rung k, and the side pairs) per fraction and condition with
Holm-adjusted intervals, each rung's accuracy, and the two figures. The steps' verdicts, pooled over the fractions,
are the plan stage's (the ladder's claims are the plan's); these per-fraction intervals are exploratory.

Reads the robustness stage's tables (``--robustness``): the plan's runs on the plan's images first, then the
exploratory ones. Without a ladder in the plan (``analysis.plan.ladder``) it writes empty tables and no figure.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from study import robustness
from study.ladder import RUNGS, STEPS
from study.core.config import Params
from study.plan.params import plan_params
from study.stats.confidence import confidence
from study.core.entry import configured
from study.robustness.reading import add_reader_arguments
from study.core.errors import StudyError
from study.core.io import atomic_dir
from study.ladder.figures import rungs_figure, steps_figure
from study.ladder.steps import STEP_COLUMNS, step_changes, rung_accuracy, step_table
from study.outputs.figure_style import save_figure
from study.outputs.tables import write_table
from study.plan.claims import condition_words



add_arguments = add_reader_arguments  # --robustness, --figures, --tables


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.robustness, args.figures, args.tables)


def run(params: Params, robustness_tables: Path, figures: Path, tables: Path) -> str:
    tic = time.perf_counter()
    plan = plan_params(params)
    ladder = plan.ladder if plan is not None else None
    if ladder is None:
        with atomic_dir(tables) as tmp:
            write_table(pd.DataFrame(columns=STEP_COLUMNS), tmp / STEPS, "No ladder in the plan (analysis.plan.ladder).")
        with atomic_dir(figures):
            pass
        return f"ladder: none declared (analysis.plan.ladder) -> {tables}"
    sources = [robustness_tables / f"{name}.csv" for name in (robustness.PLAN_RUNS, robustness.RUNS)]
    read = [pd.read_csv(path) for path in sources if path.is_file()]
    if not read:
        raise StudyError(f"{robustness_tables}: no robustness per-run table; run the robustness stage first "
                         "(dvc repro robustness)")
    conf = confidence(params)
    conditions = list(dict.fromkeys(key for c in ladder.conditions for key in (c.condition, c.control) if key))
    changes = step_changes(list(ladder.pairs()), {name: params.models[name] for pair in ladder.pairs() for name in pair})
    steps = step_table(read, list(ladder.pairs()), conditions, conf, changes,
                       frozenset(tuple(pair) for pair in ladder.side))
    models = list(dict.fromkeys([*ladder.rungs, *(m for pair in ladder.side for m in pair)]))
    accuracy = rung_accuracy(read, models, conditions)
    smallest = {condition_words(c): 100 * (plan.effects.clean if c[0] == "clean" else plan.effects.robustness)
                for c in conditions}
    pct = f"{conf:.0%}"
    with atomic_dir(tables) as tmp:
        write_table(steps, tmp / STEPS, f"Each step of the ladder (arm - against: rung k+1 - rung k, then the side "
                    f"pairs; change: what differs in their parameters) per condition and fraction, in points of top-1: the mean over seeds and its {pct} "
                    "interval Holm-adjusted across the steps of one condition at one fraction (exploratory; the "
                    "plan stage judges each step pooled over the fractions).")
        write_table(accuracy, tmp / RUNGS, "Each rung's mean test top-1 (points) and its SD over seeds, per "
                    "condition and fraction.")
    with atomic_dir(figures) as tmp:
        if not accuracy.empty:
            save_figure(rungs_figure(accuracy), tmp / RUNGS, accuracy)
        if not steps.empty:
            save_figure(steps_figure(steps, smallest), tmp / STEPS, steps)
    return (f"ladder: {len(ladder.rungs)} rungs, {len(ladder.pairs())} steps x {len(conditions)} conditions in "
            f"{time.perf_counter() - tic:.0f}s -> {figures}, {tables}")
