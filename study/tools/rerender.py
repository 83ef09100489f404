"""``study rerender``: recompute a committed preset study's statistics from its committed per-run tables and
render its report again with this checkout's code, where its runs are not at hand.

``study rerender NAME`` reads ``reports/NAME/`` (the folder a preset's run was committed to): with the preset's
parameters as this checkout merges them (``configs/NAME.yaml`` over ``params.yaml``, :mod:`study.presets`), it runs
the stages that read only tables — ``controls`` and ``plan`` from the robustness stage's per-run tables — into
``reports/NAME/tables`` and ``reports/NAME/figures``, then renders ``report.md`` and ``metrics.json`` from the
committed tables. The provenance of the runs is kept as it was; ``provenance.json`` gains a ``rerendered`` record
(the commit and parameters that recomputed the statistics, and which tables) and the report says so. Tables
computed from the runs themselves (curves, robustness, CKA, attention, the budget check) are the committed ones.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
from pathlib import Path

from study import controls, curves, plan, robustness
from study.core.config import parse_params
from study.controls.params import controls_params
from study.plan.params import plan_params
from study.core.errors import StudyError
from study.core.version import study_version
from study.core.io import write_json, write_text
from study.presets import params_text, preset_comment, preset_params


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the preset whose committed study is reports/NAME (e.g. controls, small_data)")


def main(args: argparse.Namespace) -> str:
    root = Path.cwd()
    study = root / "reports" / args.name
    if not (study / "provenance.json").is_file():
        raise StudyError(f"{study}: no committed study (provenance.json); give a preset whose study is committed "
                         f"under reports/ ({', '.join(sorted(p.parent.name for p in (root / 'reports').glob('*/provenance.json')))})")
    return rerender(root, args.name, study)


def rerender(root: Path, name: str, study: Path) -> str:
    from study.controls import stage as controls_stage
    from study.curves.report import headline_metrics
    from study.plan import stage as plan_stage
    from study.report.provenance import code_state
    from study.report.render import render_report
    from study.writing.section import Sources
    from study.report.glance import findings_table
    from study.report.stage import header_comment, setup_facts, write_findings

    raw = preset_params(root, name)
    text = params_text(raw, preset_comment(root, name))
    params = parse_params(raw, source=f"configs/{name}.yaml merged over params.yaml")
    tables, figures = study / "tables", study / "figures"
    if not (tables / curves.FOLDER / f"{curves.RUNS}.csv").is_file():
        raise StudyError(f"{study}: no committed run table (tables/curves/runs.csv); the report reads it")
    recomputed = []
    scored = tables / robustness.FOLDER
    if (scored / f"{robustness.RUNS}.csv").is_file():
        if controls_params(params).pairs:
            controls_stage.run(params, scored, figures / controls.FOLDER, tables / controls.FOLDER)
            recomputed.append(controls.FOLDER)
        if (planned := plan_params(params)) is not None and planned.claims:
            plan_stage.run(params, scored, figures / plan.FOLDER, tables / plan.FOLDER)
            recomputed.append(plan.FOLDER)
    prov = json.loads((study / "provenance.json").read_text())
    state = code_state()
    prov["rerendered"] = {
        "version": study_version(), "git_commit": state["git_commit"], "git_dirty": state["git_dirty"], "tables": recomputed,
        "params": text, "params_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "generated_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    setup = {**setup_facts(params), "design": header_comment(text)}
    sources = Sources(tables=tables, setup_tables=tables / "setup", figures=figures, report_dir=study, setup=setup)
    findings = findings_table(sources)
    report = render_report(sources, prov, findings)
    write_findings(findings, study)
    write_json(study / "provenance.json", prov)
    write_text(study / "report.md", report)
    write_json(study / "metrics.json", headline_metrics(tables))
    return (f"rerender {name}: {', '.join(recomputed) or 'no'} tables recomputed from the committed per-run tables, "
            f"{study / 'report.md'} ({len(report.splitlines())} lines), commit {state['git_commit'][:7]}"
            + (" (with uncommitted changes)" if state["git_dirty"] else ""))
