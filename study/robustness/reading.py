"""The command line of the stages that read the robustness stage's tables (controls, plan, ladder): where those
tables are, and where the stage writes its figures and tables. One definition, so the three stay alike."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_reader_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robustness", type=Path, required=True,
                        help="the robustness stage's tables folder (reports/tables/robustness)")
    parser.add_argument("--figures", type=Path, required=True, help="output folder for figures")
    parser.add_argument("--tables", type=Path, required=True, help="output folder for tables")
