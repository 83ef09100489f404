"""``study levers``: train one model per recipe setting of a lever grid and tabulate validation top-1
(the sweep itself: :mod:`study.levers`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from study.core import runtime
from study.core.config import parse_params
from study.levers import read_grid, sweep


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--grid", type=Path, required=True, help="the lever grid (docs/levers.yaml)")
    parser.add_argument("--prepared", type=Path, required=True, help="the grid's base's prepared data (data/prepared)")
    parser.add_argument("--subsets", type=Path, required=True, help="the grid's base's subsets (data/subsets)")
    parser.add_argument("--out", type=Path, required=True, help="CSV, one row per trial; trials already in it are kept")
    parser.add_argument("--table", type=Path, required=True, help="Markdown table, one row per lever")
    parser.add_argument("--lever", action="append", help="run only this lever (repeatable)")


def main(args: argparse.Namespace) -> str:
    base, _ = read_grid(args.grid)
    runtime.configure(threads=parse_params(base, str(args.grid)).train.threads)  # CPU results depend on it
    return sweep(args.grid, args.prepared, args.subsets, args.out, args.table, args.lever)
