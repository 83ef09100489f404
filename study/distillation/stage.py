"""Stage ``distillation``: what the teacher knew (train vs test top-1), whether each student agrees with it
(DeiT, Touvron et al. 2021, Table 4), and how often the teacher's label of a student's training view differed
from the true one (study.distillation.teacher_views): where it never did, hard distillation only repeats the labels."""

from __future__ import annotations

import argparse
from pathlib import Path

from study import distillation
from study.distillation import agreement
from study.curves.efficiency import paired_gaps
from study.runs.table import collect_runs
from study.distillation.teacher_views import teacher_view_runs, teacher_view_table
from study.core.config import Params
from study.stats.confidence import confidence
from study.core.io import atomic_dir
from study.outputs.tables import write_table
from study.core.entry import configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=Path, required=True, help="folder holding the runs (runs)")
    parser.add_argument("--tables", type=Path, required=True, help="output folder for tables")


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.runs, args.tables)


def run(params: Params, runs_dir: Path, tables: Path) -> str:
    d, conf = params.distill, confidence(params)
    if d is None or d.kind == "none":
        # No teacher to compare with (distill: [], or kind none): no tables, which the report reads as "no
        # distillation"; the stage stays in the pipeline so that every preset shares one dvc.yaml, and writes a
        # note rather than an empty folder, which git (the folder is committed with the report) would not keep.
        with atomic_dir(tables) as tmp:
            (tmp / distillation.NONE_NOTE).write_text("No student learns from a teacher in this study (params.yaml: "
                                                      "`distill` is empty or its kind is none).\n")
        return f"distillation: no student learns from a teacher in this study -> {tables / distillation.NONE_NOTE}"
    runs = collect_runs(runs_dir)
    students = [d.student, *(m for m in params.baselines if m != d.teacher)]
    per_run = agreement.agreement_runs(runs, d.teacher, students)
    summary = agreement.agreement_summary(per_run, conf)
    whole = per_run[per_run["head"] == "model"]
    pairs = [(d.student, other) for other in students if other != d.student]
    gaps = paired_gaps(whole, pairs, conf, value="agreement")
    views = teacher_view_table(teacher_view_runs(runs), conf)
    with atomic_dir(tables) as tmp:
        write_table(agreement.teacher_table(runs, d.teacher, conf), tmp / distillation.TEACHER,
                    f"The teacher ({d.teacher}) per fraction: top-1 on its own training images and on the test set.")
        write_table(per_run, tmp / distillation.AGREEMENT_RUNS,
                    "Test-set agreement of each run (and head) with its teacher.")
        write_table(summary, tmp / distillation.AGREEMENT,
                    f"Test-set agreement with the teacher: mean and {conf:.0%} t-interval over seeds.")
        write_table(gaps, tmp / distillation.AGREEMENT_GAPS,
                    "Paired difference in agreement with the teacher (same subset and "
                    "seed), Holm-adjusted across fractions; equivalence bound where the adjusted interval includes 0.")
        write_table(views, tmp / distillation.TEACHER_VIEWS,
                    f"Share of the distilled student's training views (as augmented) "
                    f"whose teacher label differs from the true label: mean and {conf:.0%} t-interval over seeds; "
                    "views: counted over all seeds.", 6)
    full = summary[(summary["fraction"] == summary["fraction"].max()) & (summary["head"] == "model")]
    parts = ", ".join(f"{r.model} {r.agreement_mean:.3f}" for r in full.itertuples())
    return f"distillation: agreement with {d.teacher} at full data: {parts} -> {tables}"
