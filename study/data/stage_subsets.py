"""Stage ``subsets``: the validation split and the nested, stratified, seeded training fractions."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from study.data.prepared import read_prepared
from study.data.subsets import write_subsets
from study.core.config import Params
from study.core.entry import configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prepared", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="output folder (data/subsets)")


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.prepared, args.out)


def run(params: Params, prepared: Path, out: Path) -> str:
    labels = np.asarray(read_prepared(prepared).train_labels)
    d = params.data
    summary = write_subsets(labels, d.val_fraction, d.split_seed, params.fractions, params.subset_seeds, out)
    sizes = summary.groupby("fraction")["images"].first()
    n_val = int(np.load(Path(out) / "validation.npy").size)
    listed = ", ".join(f"{f:g}:{n}" for f, n in sizes.items())
    return (f"subsets: validation {n_val} images; fractions (images) {listed}; seeds {list(params.subset_seeds)} "
            f"-> {out}")
