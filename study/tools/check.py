"""``study check``: validate a parameters file and exit: the schema every stage reads, the architectures the training
stages build and the probes the robustness stage runs, without the work (run it after editing params.yaml)."""

from __future__ import annotations

import argparse

from study.core.config import load_params
from study.models import check_archs
from study.robustness.grids import check_robustness


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Only ``--params``, which the CLI adds to every command."""


def main(args: argparse.Namespace) -> str:
    params = load_params(args.params)
    check_archs({name: m.arch for name, m in params.models.items()}, str(args.params))
    check_robustness(params, str(args.params))
    return (f"check: {args.params} is valid ({len(params.trained_models)} models, {len(params.fractions)} fractions, "
            f"{len(params.seeds)} seeds)")
