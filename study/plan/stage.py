"""Stage ``plan``: the analysis plan's claims (``analysis.plan``) judged together: each claim's contrast, its
control's and their interaction, one value per seed, one Holm family, a verdict per claim and the seeds each would
need.

Reads the robustness stage's per-run tables (``--robustness``): ``plan_runs`` (the plan's conditions on
``analysis.plan.images`` test images) and, for a condition it lacks, ``robustness_runs`` (a study whose runs
predate the plan's scoring: its presets' committed tables); writes the tables of :mod:`study.plan` and its figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import pandas as pd

from study.plan import CLAIMS, DECLARED, FIGURE, FRACTIONS, TESTS
from study import robustness
from study.core.entry import configured
from study.robustness.reading import add_reader_arguments
from study.core.errors import StudyError
from study.core.io import atomic_dir
from study.outputs.figure_style import save_figure
from study.outputs.tables import read_table, write_table
from study.plan.claims import claims_table, declared_table, fractions_table, judge_tests
from study.plan.compact import compact_claims, compact_tests
from study.plan.figures import plan_figure
from study.plan.params import PlanParams, plan_params
from study.plan.registration import CHANGED, Registration, registration
from study.presets import read_mapping


add_arguments = add_reader_arguments  # --robustness, --figures, --tables


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.robustness, args.figures, args.tables)


def per_run_tables(folder: Path) -> list[pd.DataFrame]:
    """The per-run tables a claim may read, the plan's own scoring first."""
    tables = [read_table(folder / f"{name}.csv") for name in (robustness.PLAN_RUNS, robustness.RUNS)]
    tables = [t for t in tables if t is not None]
    if not tables:
        raise StudyError(f"{folder}: no per-run robustness table; run the robustness stage first "
                         "(dvc repro robustness)")
    return tables


def registered(params, plan: PlanParams) -> tuple[PlanParams, Registration | None]:
    """The plan as it may be judged: a ``before_runs`` plan is checked against git history
    (:mod:`study.plan.registration`); one whose declared fields changed after its runs has every claim demoted to
    exploratory."""
    if plan.declared != "before_runs":
        return plan, None
    record = registration(Path(params.source), read_mapping(Path(params.source)))
    if record.status == CHANGED:
        plan = dataclasses.replace(plan, claims=tuple(dataclasses.replace(c, role="exploratory")
                                                      for c in plan.claims))
    return plan, record


def run(params, robustness_tables: Path, figures: Path, tables: Path) -> str:
    tic = time.perf_counter()
    plan = plan_params(params)
    if plan is None or not plan.claims:  # a study without a plan: every interval exploratory, no report part
        with atomic_dir(tables):
            pass
        with atomic_dir(figures):
            pass
        return f"plan: none declared (analysis.plan), so no verdicts; {tables} left empty"
    plan, record = registered(params, plan)
    sources = per_run_tables(robustness_tables)
    pilot = per_run_tables(Path(plan.pilot)) if plan.pilot else None
    tests = judge_tests(sources, plan, pilot)
    claims = claims_table(tests, plan)
    per_fraction = fractions_table(sources, plan, 1 - plan.alpha)
    family = int(tests["p"].notna().sum())
    written = "before" if plan.declared == "before_runs" else "after"
    with atomic_dir(tables) as tmp:
        write_table(declared_table(plan, record), tmp / DECLARED,
                    f"The analysis plan as declared (written {written} the runs it judges): each claim's "
                    "comparison, condition, matched control, direction and smallest effect of interest (points).", 2)
        write_table(tests, tmp / TESTS, paper=compact_tests(tests), caption=(
                    "Every test of the plan, in points of test top-1: the mean over seeds of each seed's contrast "
                    f"over the fractions, its {1 - plan.alpha:.0%} t-interval (df = seeds - 1) and the interval "
                    f"Holm-adjusted across the plan's {family} tests; the verdict against the smallest effect; "
                    "power of the family's first-ranked test at the seed-level SD, and the seeds "
                    f"{plan.power:.0%} power would need; images scored per run."), float_digits=2)
        write_table(claims, tmp / CLAIMS, paper=compact_claims(claims),
                    column_format="p{3.2cm}lp{2.2cm}lp{2.2cm}llp{3.5cm}", caption=(
                    "One row per claim: the verdict of its contrast and, with a matched control, the interaction "
                    "(condition - control, per seed) and the scope they support (points, Holm-adjusted)."),
                    float_digits=2)
        write_table(per_fraction, tmp / FRACTIONS,
                    f"Each test's contrast per fraction, mean over seeds and {1 - plan.alpha:.0%} t-interval "
                    "(exploratory: neither adjusted nor judged).", 2)
    with atomic_dir(figures) as tmp:
        if tests["mean"].notna().any():
            save_figure(plan_figure(tests), tmp / FIGURE, tests)
    supported = int((claims["verdict"] == "supported").sum())
    primary = int((tests["family"] == "primary").sum())
    note = f"; {record.status}: {record.message}" if record is not None else ""
    return (f"plan: {len(claims)} claims, {primary} primary and {family - primary} secondary tests, {supported} "
            f"supported{note}, in {time.perf_counter() - tic:.1f}s -> {figures}, {tables}")
