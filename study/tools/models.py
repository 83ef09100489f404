"""``study models``: the parameters and forward FLOPs of the models ``--params`` trains, as a table.

A tool, not a DVC stage: it answers "how large is each model, and how much does one image cost it" for the
dataset's input shape (or another, with ``--image-size``/``--in-chans``), counted as the benchmarks count them
(:mod:`study.models.cost`).
"""

from __future__ import annotations

import argparse

import pandas as pd

from study.core.config import INPUT_SHAPES, NUM_CLASSES
from study.models import build_model
from study.models.cost import count_parameters, forward_flops
from study.core.entry import configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--image-size", type=int, help="override the dataset's image size")
    parser.add_argument("--in-chans", type=int, help="override the dataset's channels")


def main(args: argparse.Namespace) -> str:
    params = configured(args.params)
    size, chans = INPUT_SHAPES[params.data.dataset]
    size, chans = args.image_size or size, args.in_chans or chans
    rows = []
    for name in params.trained_models:
        m = params.models[name]
        model = build_model(m.arch, NUM_CLASSES[params.data.dataset], size, chans, **m.arch_args)
        rows.append({"model": name, "arch": m.arch, "params": count_parameters(model),
                     "forward_MFLOPs": round(forward_flops(model, size, chans) / 1e6, 2)})
    print(pd.DataFrame(rows).to_string(index=False))
    return f"models: {len(rows)} models for {size}x{size}x{chans} inputs"
