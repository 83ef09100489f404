"""``study check``: validate a parameters file and exit (what every stage does first, without the work)."""

from __future__ import annotations

import argparse

from study.config import load_params


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Only ``--params``, which the CLI adds to every command."""


def main(args: argparse.Namespace) -> str:
    params = load_params(args.params)
    return (f"check: {args.params} is valid ({len(params.trained_models)} models, {len(params.fractions)} fractions, "
            f"{len(params.seeds)} seeds)")
