"""Stage ``report``: ``report.md``, the headline metrics, the provenance record and the setup tables.

First the tables no analysis stage writes, computed by :mod:`study.report.setup` from the run table (and by
:mod:`study.cka.depth` from the CKA tables): models, budgets, compute, the distilled model's heads, how
well each model fit its training images, and cross-model CKA averaged over depth. Then the provenance (digests of
the parameters, the pipeline's code, the prepared data, the runs and the budget check's longer runs, all written
before this stage), and last the report, rendered from files only (:mod:`study.report.render`). The run table
is the one the ``curves`` stage wrote (``<tables>/curves/runs.csv``); the runs themselves are only digested.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pandas as pd
import yaml

from study import cka, curves
from study.report import setup as setup_tables
from study.cka.depth import CAPTION as CKA_DEPTH_CAPTION, across_depth_mean
from study.core.config import Params
from study.plan.params import plan_params
from study.stats.confidence import confidence
from study.core.io import atomic_dir, write_json, write_text
from study.archs import VIT_FAMILY
from study.priors.report import arms_of
from study.report.provenance import provenance
from study.curves.report import headline_metrics
from study.report.glance import findings_table
from study.report.render import render_report
from study.writing.section import Sources
from study.outputs.tables import read_table, write_table
from study.core.entry import configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=Path, required=True, help="folder holding the runs, digested into the provenance")
    parser.add_argument("--runs-2x", type=Path, help="folder holding the budget check's longer runs (runs_2x), "
                        "digested beside the runs; absent or missing: the study has no budget check")
    parser.add_argument("--tables", type=Path, required=True, help="folder of the analysis tables (reports/tables)")
    parser.add_argument("--figures", type=Path, required=True, help="folder of the analysis figures (reports/figures)")
    parser.add_argument("--manifest", type=Path, required=True,
                        help="the prepared data's manifest.json, digested into the provenance")
    parser.add_argument("--pipeline", type=Path, required=True,
                        help="dvc.yaml: the code its stages depend on is digested into the provenance")
    parser.add_argument("--out", type=Path, required=True, help="report.md")
    parser.add_argument("--metrics", type=Path, required=True, help="headline metrics.json")
    parser.add_argument("--provenance", type=Path, required=True, help="provenance.json")
    parser.add_argument("--setup-tables", type=Path, required=True,
                        help="output folder of the tables this stage derives (setup, training fit, CKA over depth)")


def main(args: argparse.Namespace) -> str:
    params = configured(args.params)
    runs = pd.read_csv(args.tables / curves.FOLDER / f"{curves.RUNS}.csv")
    write_setup_tables(runs, args.tables / cka.FOLDER, args.setup_tables)
    runs_dirs = [args.runs, *([args.runs_2x] if args.runs_2x else [])]
    prov = provenance(params_path=args.params, pipeline=args.pipeline, manifest=args.manifest, runs_dirs=runs_dirs,
                      devices=runs["device"].tolist(), train_seconds=float(runs["train_seconds"].sum()))
    write_json(args.provenance, prov)
    setup = {**setup_facts(params), "design": header_comment(args.params.read_text())}
    sources = Sources(tables=args.tables, setup_tables=args.setup_tables, figures=args.figures,
                      report_dir=args.out.parent, setup=setup)
    findings = findings_table(sources)
    text = render_report(sources, prov, findings)
    write_findings(findings, args.out.parent)
    write_text(args.out, text)
    write_json(args.metrics, headline_metrics(args.tables))
    return (f"report: {args.out} ({len(text.splitlines())} lines), {args.metrics}, {args.provenance}; "
            f"commit {prov['git_commit']}")


FINDINGS = "findings"  # the findings table beside report.md, as CSV and LaTeX


def write_findings(table: pd.DataFrame, folder: Path) -> None:
    """The findings table that opens the report, as ``findings.csv`` and ``findings.tex`` (booktabs, wrapped text
    columns) in ``folder``, for a paper to ``\\input``."""
    write_table(table, folder / FINDINGS, "Findings: each claim with its evidence (points of test top-1, "
                "Holm-adjusted intervals over seeds), its control and its verdict (only the analysis plan's claims "
                "carry one; the other rows are exploratory).", column_format="p{3.6cm}p{4.2cm}p{4.2cm}p{3.6cm}")


def write_setup_tables(runs: pd.DataFrame, cka_tables: Path, out: Path) -> None:
    """The tables the report reads that no analysis stage writes, into ``out``; the depth average of cross-model
    CKA only where the ``cka`` stage's tables are in ``cka_tables`` (a study without them has no CKA section)."""
    with atomic_dir(out) as tmp:
        write_table(setup_tables.models_table(runs), tmp / setup_tables.MODELS,
                    "Models: parameters, training FLOPs at full data, median throughput.", 1)
        write_table(setup_tables.budgets_table(runs), tmp / setup_tables.BUDGETS,
                    "Identical budgets: steps and images seen per fraction, "
                    "all models; what set the steps; runs still improving at the end.", 2)
        write_table(setup_tables.compute_table(runs), tmp / setup_tables.COMPUTE,
                    "Compute used per model and fraction: optimiser steps, "
                    "images seen, training TFLOPs (3 x forward, plus the teacher's forward for a distilled student; "
                    "mean over seeds), median training seconds, runs still improving at the end.", 2)
        write_table(setup_tables.heads_table(runs), tmp / setup_tables.DEIT_HEADS,
                    "Distilled ViT: test top-1 of the class head, the distillation head and their average.")
        write_table(setup_tables.training_fit(runs), tmp / setup_tables.TRAINING_FIT,
                    "Train top-1 on each run's own training images "
                    "(unaugmented) per model and fraction: mean and lowest over seeds, runs below the fit threshold "
                    "and how many of those had settled, runs still improving.")
        summary = read_table(cka_tables / f"{cka.ACROSS_DEPTH}.csv")
        per_seed = read_table(cka_tables / f"{cka.ACROSS_DEPTH_SEEDS}.csv")
        if summary is not None and per_seed is not None:
            write_table(across_depth_mean(summary, per_seed), tmp / cka.ACROSS_DEPTH_MEAN,
                        CKA_DEPTH_CAPTION, 3)


def header_comment(params_text: str) -> str:
    """The comment block that opens a parameters file, without its ``#`` marks: each preset's header says what
    the study asks, how its design and recipes were chosen (and by which criterion), and which test numbers were
    seen before; the report prints it, so a reader of the report learns it without opening the file."""
    lines = []
    for line in params_text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[2:] if line.startswith("# ") else line[1:])
    return "\n".join(lines).strip()


def setup_facts(params: Params) -> dict:
    """The parameters the report's Setup section and limitations word; ``recipes``: the recipe sections as YAML."""
    d = params.distill
    return {
        "dataset": params.data.dataset, "val_fraction": params.data.val_fraction,
        "fractions": list(params.fractions), "seeds": list(params.seeds), "batch_size": params.budget.batch_size,
        "convention": params.budget.convention, "epochs": params.budget.epochs,
        "confidence": confidence(params), "min_steps": params.budget.min_steps,
        "plan_history": plan.history if (plan := plan_params(params)) else "",
        "selection": {name: dict(m.selected_on_validation) for name, m in params.models.items()},
        "distill": dataclasses.asdict(d) if d else None,
        "arms": arms_of({name: _plain(m) for name, m in params.models.items()}, list(params.trained_models),
                        VIT_FAMILY),
        "recipes": yaml.safe_dump({"models": {k: _recipe(v) for k, v in params.models.items()},
                                   "budget": _plain(params.budget), "augment": _plain(params.train.augment)},
                                  sort_keys=False),
    }


def _recipe(model) -> dict:
    """A model's entry as the report prints it: ``scramble`` only for a model trained on scrambled images."""
    plain = _plain(model)
    if plain.get("scramble") is None:
        plain.pop("scramble", None)
    return plain


def _plain(obj) -> dict:
    """A (pydantic) dataclass as plain dicts, for YAML."""
    return {k: (_plain(v) if dataclasses.is_dataclass(v) else v) for k, v in dataclasses.asdict(obj).items()}
