"""``study bench``: the study's training step against the usual DataLoader recipe, for the models of ``--params``.

A tool, not a DVC stage, and a thin one: the benchmark is :mod:`benchmarks.study_vs_usual` (also
``python -m benchmarks.study_vs_usual``), outside the package. It prints the table, writes it as CSV and returns one
line with each model's speed-up and MFU.
"""

from __future__ import annotations

import argparse

from benchmarks import study_vs_usual


def add_arguments(parser: argparse.ArgumentParser) -> None:
    study_vs_usual.add_arguments(parser)


def main(args: argparse.Namespace) -> str:
    return study_vs_usual.run(args)
