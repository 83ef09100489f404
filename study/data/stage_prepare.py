"""Stage ``prepare``: the dataset named in params, written once as compact arrays with a manifest."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from study.data.datasets import load_dataset
from study.data.prepared import write_prepared
from study.core.config import Params
from study.core.entry import configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="output folder (data/prepared)")


def main(args: argparse.Namespace) -> str:
    return run(configured(args.params), args.out)


def run(params: Params, out: Path) -> str:
    tic = time.perf_counter()
    d = params.data
    dataset = load_dataset(d.dataset, d.root, download=d.download)
    manifest = write_prepared(dataset, out)
    shape = manifest["arrays"]["train_images"]["shape"]
    n_test = manifest["arrays"]["test_images"]["shape"][0]
    return (
        f"prepare: {d.dataset} from {dataset.source}: {shape[0]} train + {n_test} test images of "
        f"{'x'.join(map(str, shape[1:]))}, {len(dataset.class_names)} classes -> {out} "
        f"({time.perf_counter() - tic:.1f}s)"
    )
