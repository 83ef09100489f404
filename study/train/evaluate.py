"""Scoring a model on a split: loss and top-1, each head's top-1 for a two-head model, and its predictions."""

from __future__ import annotations

import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F

from study.train.batches import DeviceSplit, normalise
from study.train.step import to_input


@torch.no_grad()
def evaluate(
    model: nn.Module, split: DeviceSplit, mean: torch.Tensor, std: torch.Tensor, batch_size: int,
    channels_last: bool, autocast: contextlib.AbstractContextManager, predictions: list | None = None,
) -> dict[str, float]:
    """Loss and top-1 on a split; for a two-head model also each head's top-1 alone.

    ``predictions``, if given, receives per batch the argmax rows ``(1 + heads, B)``: the model's prediction,
    then each head's for a two-head model.
    """
    was_training = model.training
    model.eval()
    totals: dict[str, torch.Tensor] = {}

    def add(key: str, value: torch.Tensor) -> None:
        totals[key] = totals.get(key, 0) + value

    for start in range(0, len(split), batch_size):
        x = to_input(normalise(split.images[start : start + batch_size], mean, std), channels_last)
        y = split.labels[start : start + batch_size]
        with autocast:
            heads = model.forward_heads(x) if hasattr(model, "forward_heads") else (model(x),)
        heads = [h.float() for h in heads]
        logits = sum(heads) / len(heads)  # DeiT's inference: the mean of the two heads' logits
        add("loss", F.cross_entropy(logits, y, reduction="sum"))
        add("top1", (logits.argmax(1) == y).sum())
        if len(heads) == 2:
            add("top1_cls", (heads[0].argmax(1) == y).sum())
            add("top1_dist", (heads[1].argmax(1) == y).sum())
        if predictions is not None:
            rows = [logits] + (heads if len(heads) == 2 else [])
            predictions.append(torch.stack([r.argmax(1) for r in rows]))  # (1 + heads, B)
    model.train(was_training)
    return {k: float(v) / len(split) for k, v in totals.items()}
