"""Stage ``pretrained-report`` of the pretrained preset (pretrained/dvc.yaml): report.md and provenance.json from
the analysis's tables and figures."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from study.core.io import write_json, write_text
from study.pretrained.params import load_pretrained_params
from study.pretrained.report import provenance, write_markdown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tables", type=Path, required=True, help="the analysis's tables")
    parser.add_argument("--figures", type=Path, required=True, help="the analysis's figures")
    parser.add_argument("--out", type=Path, required=True, help="report.md")
    parser.add_argument("--provenance", type=Path, required=True, help="provenance.json")


def main(args: argparse.Namespace) -> str:
    load_pretrained_params(args.params)  # nothing is written from a bad parameters file
    return run(args.params, args.tables, args.figures, args.out, args.provenance)


def run(params_path: Path, tables: Path, figures: Path, out: Path, provenance_out: Path) -> str:
    prov = provenance(params_path, pd.read_csv(tables / "models.csv"), pd.read_csv(tables / "images.csv"))
    text = write_markdown(tables, figures, out.parent, prov)
    write_text(out, text)
    write_json(provenance_out, prov)
    return f"pretrained-report: {out} ({len(text.splitlines())} lines), {provenance_out}"

