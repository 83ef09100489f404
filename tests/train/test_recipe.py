"""The recipe is the params' model section, not a copy of it: its fields are ModelParams's but those that are not
about optimisation, in the same order with the same defaults, so a field added to the params is in every recipe
and every run's fingerprint."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

import study.train.recipe as recipe_module
from study.core.config import AugmentParams, ModelParams
from study.train.recipe import NOT_RECIPE, Recipe, recipe_from_params


def test_the_recipe_is_every_model_field_but_those_not_about_optimisation():
    params = ModelParams.__pydantic_fields__
    assert set(NOT_RECIPE) <= set(params)  # a renamed params field cannot leave a stale exclusion behind
    assert [f.name for f in dataclasses.fields(Recipe)] == [name for name in params if name not in NOT_RECIPE]
    assert Recipe() == Recipe(**{name: params[name].default for name in params if name not in NOT_RECIPE})


def test_a_field_added_to_the_model_section_enters_the_recipe(monkeypatch):
    @pydantic_dataclass(frozen=True)
    class Extended(ModelParams):
        ema: float = Field(default=0.0, ge=0.0)

    monkeypatch.setattr(recipe_module, "ModelParams", Extended)
    assert [name for name, _, _ in recipe_module._recipe_fields()][-1] == "ema"


def test_recipe_from_params_carries_every_value_and_the_recipe_is_frozen():
    model = ModelParams(arch="vit", optimizer="sgd", lr=0.2, weight_decay=0.1, momentum=0.8, beta2=0.99,
                        label_smoothing=0.1, grad_clip=1.0, warmup=0.2)
    recipe, augmentation = recipe_from_params(model, AugmentParams(hflip=True))
    assert dataclasses.asdict(recipe) == {f.name: getattr(model, f.name) for f in dataclasses.fields(Recipe)}
    assert augmentation.hflip  # the study-wide augmentation, the model having none of its own
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.lr = 1.0


def test_the_recipe_reads_as_it_always_did_so_fingerprints_are_unchanged():
    assert repr(Recipe("adamw", 1e-3, 0.05, 0.9, 0.999, 0.1, 1.0, 0.0)) == (
        "Recipe(optimizer='adamw', lr=0.001, weight_decay=0.05, momentum=0.9, beta2=0.999, label_smoothing=0.1, "
        "grad_clip=1.0, warmup=0.0)")
