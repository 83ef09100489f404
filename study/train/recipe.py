"""From validated params to the training library's own types: the one place that converts them.

The library (:mod:`study.train.step`, :mod:`study.train.augment`) never sees the params classes, so it can be
driven by a stage, a benchmark or the lever sweep alike; each of those calls :func:`recipe_from_params`.
"""

from __future__ import annotations

from study.core.config import AugmentParams, ModelParams
from study.train.augment import Augmentation
from study.train.step import Recipe


def recipe_from_params(model: ModelParams, default_augment: AugmentParams) -> tuple[Recipe, Augmentation]:
    """``model``'s optimisation recipe and augmentation; the augmentation is its own ``augment`` when it has one,
    else ``default_augment`` (``train.augment``, the study-wide one)."""
    recipe = Recipe(**{k: getattr(model, k) for k in Recipe.__dataclass_fields__})
    return recipe, augmentation_from_params(model.augment or default_augment)


def augmentation_from_params(augment: AugmentParams) -> Augmentation:
    """``augment`` (a params section) as the augmentation library's :class:`Augmentation`."""
    return Augmentation(**{k: getattr(augment, k) for k in Augmentation.__dataclass_fields__})
