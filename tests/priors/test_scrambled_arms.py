"""The scrambled data condition as a study dimension (the test of which models rely on the pixel grid): a model
entry with ``scramble`` trains, validates and is tested on scrambled images, records the scramble in its run
spec, and every analysis feeds it its images through the same scramble."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from study.robustness.scoring import conditions, score_runs
from study.runs.load import normalised_images
from study.core.config import parse_params
from study.data.prepared import read_prepared, write_prepared
from study.data.scramble import draw_scramble, scramble_images
from study.core.errors import StudyError
from study.train.artifacts import load_trained
from study.train import stage as train_stage
from tests.train.test_train import SMOKE, prepare_digits

SCRAMBLE = {"cell": 2, "seed": 3}  # digits are 8x8: a 4x4 grid of 2x2 cells, the smoke ViT's patch grid


def _params(**models):
    raw = copy.deepcopy(SMOKE)
    raw["budget"].update(epochs=2.0, min_steps=0)
    raw["train"]["threads"] = 1
    raw["models"].update(models)
    raw["baselines"] = list(dict.fromkeys([*raw["baselines"], *models]))
    return raw


def _scrambled(name: str = "resnet", **scramble) -> dict:
    return {**copy.deepcopy(SMOKE["models"][name]), "scramble": {**SCRAMBLE, **scramble}}


# --- params -------------------------------------------------------------------------------------------------


def test_params_accept_a_scrambled_model_and_default_to_natural_images():
    params = parse_params(_params(resnet_scrambled=_scrambled()))
    assert params.models["resnet"].scramble is None
    assert (params.models["resnet_scrambled"].scramble.cell, params.models["resnet_scrambled"].scramble.seed) == (2, 3)


@pytest.mark.parametrize("models, message", [
    ({"resnet_scrambled": _scrambled(cell=3)}, "scramble.cell = 3 does not divide the 8-pixel images"),
    ({"resnet_scrambled": _scrambled(), "vit_scrambled": _scrambled("vit", seed=4)}, "give every scrambled model"),
])
def test_params_refuse_a_scramble_that_cannot_apply_or_does_not_compare(models, message):
    with pytest.raises(StudyError, match=message):
        parse_params(_params(**models))


def test_params_keep_distillation_on_natural_images():
    raw = _params()
    raw["models"]["resnet"]["scramble"] = dict(SCRAMBLE)
    with pytest.raises(StudyError, match="distill: the student and teacher train on natural images"):
        parse_params(raw)


# --- training and analysis ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return prepare_digits(tmp_path_factory.mktemp("digits"))


def _train(params, model: str, prepared: Path, data: Path, out: Path) -> dict:
    train_stage.run(params, model, 1.0, 0, prepared, data / "subsets/s0/f1.0.npy", data / "subsets/validation.npy",
                    None, out / "model.pt", out / "metrics.json", out / "history.csv", out / "resume.pt",
                    out / "predictions.npy")
    return json.loads((out / "metrics.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["resnet", "vit"])
def test_a_scrambled_run_is_the_natural_run_on_data_scrambled_when_prepared(digits, tmp_path, arch):
    """Scrambling when the data are prepared, or when the run reads them: the same weights to the byte, so the
    condition applies to training (augmentation included), validation and test images alike."""
    torch.set_num_threads(1)
    params = parse_params(_params(**{f"{arch}_scrambled": _scrambled(arch)}))
    natural = read_prepared(digits / "prepared")
    scramble = draw_scramble(8, 8, **SCRAMBLE)

    class Dataset:  # the prepared dataset with every image scrambled once
        name, source, class_names = natural.dataset, "scrambled", natural.class_names
        train_images, test_images = (scramble_images(np.asarray(x), scramble)
                                     for x in (natural.train_images, natural.test_images))
        train_labels, test_labels = np.asarray(natural.train_labels), np.asarray(natural.test_labels)

    write_prepared(Dataset, tmp_path / "prescrambled")
    by_run = _train(params, f"{arch}_scrambled", digits / "prepared", digits, tmp_path / "by_run")
    by_data = _train(params, arch, tmp_path / "prescrambled", digits, tmp_path / "by_data")
    a, b = torch.load(tmp_path / "by_run/model.pt"), torch.load(tmp_path / "by_data/model.pt")
    assert a["spec"]["scramble"] == SCRAMBLE and "scramble" not in b["spec"]
    assert a["state_dict"].keys() == b["state_dict"].keys()
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    assert {k: by_run[k] for k in ("val_top1", "test_top1")} == {k: by_data[k] for k in ("val_top1", "test_top1")}
    assert np.array_equal(np.load(tmp_path / "by_run/predictions.npy"), np.load(tmp_path / "by_data/predictions.npy"))


@pytest.mark.slow
def test_analyses_feed_a_scrambled_run_its_scrambled_images(digits, tmp_path):
    """The analyses' two entrances, normalised_images (CKA, attention) and the robustness scorer, give a scrambled
    run the images it was tested on: their predictions on the clean test set are the training stage's."""
    torch.set_num_threads(1)
    params = parse_params(_params(resnet_scrambled=_scrambled()))
    _train(params, "resnet_scrambled", digits / "prepared", digits, tmp_path)
    model, spec = load_trained(tmp_path / "model.pt", torch.device("cpu"))
    data = read_prepared(digits / "prepared")
    stage = np.load(tmp_path / "predictions.npy")[0]  # (1 + heads, N): row 0 the model's
    with torch.no_grad():
        via_normalised = model.eval()(normalised_images(data.test_images, spec, torch.device("cpu"))).argmax(1)
        natural = dataclasses.replace(spec, scramble=None)
        natural_view = model(normalised_images(data.test_images, natural, torch.device("cpu"))).argmax(1)
    assert np.array_equal(via_normalised.numpy(), stage)
    assert not np.array_equal(natural_view.numpy(), stage)  # so the scramble is what made them equal
    clean = [c for c in conditions(image_size=8, seed=0, occlusion_grid=4, shares=[], offset=False, grids=[],
                                   shifts=[], corruptions=[], severities=[]) if c.probe == "clean"]
    scores, _, _ = score_runs({("resnet_scrambled", 1.0, 0): (model, spec)}, data.test_images, data.test_labels,
                              clean, 64, torch.device("cpu"))
    assert scores["correct"].item() == int((stage == np.asarray(data.test_labels)).sum())
