"""``study models``: the parameters and forward FLOPs of the models ``--params`` trains, as a table; with
``--available``, every architecture the registry builds and the ``arch_args`` each takes, with their defaults.

A tool, not a DVC stage: it answers "how large is each model, and how much does one image cost it" for the
dataset's input shape (or another, with ``--image-size``/``--in-chans``), counted as the benchmarks count them
(:mod:`study.models.cost`), and "what can I put in ``models.<name>``" (docs/models.md).
"""

from __future__ import annotations

import argparse

import pandas as pd

from study.core.config import INPUT_SHAPES, NUM_CLASSES
from study.models import MODEL_NAMES, TIMM_PREFIX, architecture_args, build_model
from study.models.cost import count_parameters, forward_flops
from study.core.entry import configured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--image-size", type=int, help="override the dataset's image size")
    parser.add_argument("--in-chans", type=int, help="override the dataset's channels")
    parser.add_argument("--available", action="store_true", help="list every architecture (a model's `arch`) with "
                        "the `arch_args` it takes and their defaults, instead of the models of --params")


def main(args: argparse.Namespace) -> str:
    if args.available:
        return available()
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


def available() -> str:
    """Print one line per architecture: its name, then each ``arch_args`` key with its default."""
    width = max(len(name) for name in (*MODEL_NAMES, f"{TIMM_PREFIX}<name>"))
    for name in MODEL_NAMES:
        listed = ", ".join(f"{key}={value!r}" for key, value in architecture_args(name).items())
        print(f"{name:<{width}}  {listed}")
    print(f"{TIMM_PREFIX + '<name>':<{width}}  any keyword of timm.create_model('<name>') except num_classes, "
          "img_size, in_chans and pretrained (set from the data; never downloaded)")
    return (f"models: {len(MODEL_NAMES)} architectures and {TIMM_PREFIX}<name> for any timm model; "
            "set one as models.<name>.arch, its keys as models.<name>.arch_args (docs/models.md)")
