"""Identical budgets: every model at a fraction takes the same optimiser steps on the same batch size.

Across fractions there is no standard (the two published conventions below), so the convention is a parameter
and every run records it:

- ``epochs``: a fraction trains ``epochs`` passes over its own data, but at least ``min_steps`` steps,
  so tiny subsets still get enough updates to converge (the ViT paper keeps hyperparameters fixed).
- ``images``: every fraction sees as many images as the full-data run, i.e. ``epochs / f`` passes over
  its data (ConViT, d'Ascoli et al. 2021, Table 2).

Every budget records its ``source``: ``floor`` when ``min_steps`` set the step count (the data alone would
have asked for fewer), otherwise the convention's name. A run on the floor whose validation loss was still
falling at the end is *step-bound*: more steps, not more data, would have raised it (see
``study.runs.table``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Budget:
    convention: str
    batch_size: int
    steps: int
    train_images: int  # size of the training subset
    source: str = "epochs"  # what set `steps`: "epochs", "images" or "floor" (min_steps)

    @property
    def images_seen(self) -> int:
        return self.steps * self.batch_size

    @property
    def epochs(self) -> float:
        return self.images_seen / self.train_images

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.train_images / self.batch_size)

    def as_dict(self) -> dict:
        return {**asdict(self), "images_seen": self.images_seen, "epochs": round(self.epochs, 4)}


def plan_budget(
    train_images: int, full_images: int, batch_size: int, epochs: float, convention: str, min_steps: int
) -> Budget:
    """Steps for a subset of ``train_images`` when the full training set has ``full_images``."""
    if convention == "images":
        steps, source = math.ceil(epochs * full_images / batch_size), "images"
    elif convention == "epochs":
        by_data = math.ceil(epochs * train_images / batch_size)
        steps, source = (min_steps, "floor") if min_steps > by_data else (by_data, "epochs")
    else:
        raise ValueError(f"unknown budget convention {convention!r}")
    return Budget(convention=convention, batch_size=batch_size, steps=steps, train_images=train_images, source=source)
