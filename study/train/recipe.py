"""A model's optimisation recipe as the training library's own type, derived from the params' model section.

:class:`Recipe` is generated from the fields of :class:`study.core.config.ModelParams`, all but ``NOT_RECIPE``, with
their order, types and defaults, so the two cannot drift apart: a field added to the model section is part of every
recipe (and so of every run's fingerprint) without a second list to keep; tests/train/test_recipe.py holds it to
the params. The library (:mod:`study.train.step`, :mod:`study.train.augment`) is still never handed a params object:
the stage, the benchmarks and the lever sweep convert one with :func:`recipe_from_params`.
"""

from __future__ import annotations

from dataclasses import field, make_dataclass
from typing import Any

from study.core.config import AugmentParams, ModelParams
from study.train.augment import Augmentation

# The fields of a model's section that are not how it is optimised: what it is (built by study.models), what it
# is trained on (its augmentation and data condition, each converted on its own) and what the report says of it.
NOT_RECIPE = ("arch", "arch_args", "selected_on_validation", "augment", "scramble")


def _recipe_fields() -> list[tuple[str, Any, Any]]:
    """``(name, type, field)`` of every recipe field: ModelParams's own, in its order, with its defaults."""
    return [(name, info.annotation, field(default=info.default))
            for name, info in ModelParams.__pydantic_fields__.items() if name not in NOT_RECIPE]


Recipe = make_dataclass("Recipe", _recipe_fields(), frozen=True)
Recipe.__module__ = __name__
Recipe.__doc__ = """The optimisation recipe of one model: ModelParams's fields but ``NOT_RECIPE`` (module docstring)."""


def recipe_from_params(model: ModelParams, default_augment: AugmentParams) -> tuple[Recipe, Augmentation]:
    """``model``'s optimisation recipe and augmentation; the augmentation is its own ``augment`` when it has one,
    else ``default_augment`` (``train.augment``, the study-wide one)."""
    recipe = Recipe(**{k: getattr(model, k) for k in Recipe.__dataclass_fields__})
    return recipe, augmentation_from_params(model.augment or default_augment)


def augmentation_from_params(augment: AugmentParams) -> Augmentation:
    """``augment`` (a params section) as the augmentation library's :class:`Augmentation`."""
    return Augmentation(**{k: getattr(augment, k) for k in Augmentation.__dataclass_fields__})
