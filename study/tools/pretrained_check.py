"""``study pretrained-check``: load one pretrained checkpoint and say what it became, what it needs, and where
it came from (a tool, not a pipeline stage)."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from study.core import runtime
from study.models.cost import count_parameters
from study.pretrained import open_checkpoint
from study.pretrained.weights import sha256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="hf:<folder> (or a folder), timm:<model name> with --weights, or study:<model.pt>")
    parser.add_argument("--weights", type=Path, help="local weights file of a timm: source (safetensors or state dict)")


def main(args: argparse.Namespace) -> str:
    runtime.configure()
    return run(args.source, args.weights)


def run(source: str, weights: Path | None) -> str:
    """Load one pretrained checkpoint and say what it became, what it needs, and where it came from."""
    c = open_checkpoint(source, weights)
    p = c.preprocessing
    with torch.no_grad():
        logits = c.model(torch.zeros(1, p.channels, *p.crop))
    maps = "attention maps: yes" if c.attention_maps else "attention maps: no (CKA only)"
    return (f"pretrained-check: {source}: {c.kind} {c.architecture} -> {type(c.model).__name__}, "
            f"{count_parameters(c.model):,} parameters, {logits.shape[-1]} classes, {maps}; input {p.channels}x"
            f"{p.crop[0]}x{p.crop[1]}, {p.describe()}; weights {c.weights} sha256 {sha256(c.weights)[:16]}…")
