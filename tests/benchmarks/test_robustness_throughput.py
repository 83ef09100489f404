"""The robustness stage's throughput benchmark (benchmarks/robustness_throughput.py): every scoring path is timed,
and the stage's time is added up exactly from known rates."""

from __future__ import annotations

import pytest
import torch

from benchmarks import robustness_throughput as T
from study.archs import traits
from study.models import build_model
from study.robustness.params import robustness_params
from tests.conftest import load_study

PILOT = load_study("pilot.yaml")  # the pilot (the study's first default), as parsed: the rates below are its counts
TINY_VIT = {"patch_size": 2, "embed_dim": 16, "depth": 1, "num_heads": 2}


def test_every_path_of_every_model_is_timed():
    torch.manual_seed(0)
    models = {"resnet": (build_model("resnet8", 10, 8, 1, width=8), traits("resnet8")),
              "vit": (build_model("vit", 10, 8, 1, **TINY_VIT), traits("vit")),
              "deit": (build_model("deit", 10, 8, 1, **TINY_VIT), traits("deit"))}
    images = torch.zeros((10, 8, 8, 1), dtype=torch.uint8)
    rates = T.measure(models, images, batch_size=10, batches=1, repeats=2)
    assert set(rates["resnet"]) == {T.CNN}
    assert set(rates["vit"]) == set(rates["deit"]) == {T.EXPLICIT, T.FUSED, T.PROBABILITIES, T.MEAN}
    assert rates["vit"][T.EXPLICIT]["ratio"] == 1.0 and rates["vit"][T.FUSED]["images_per_second"] > 0


def test_the_stage_time_adds_up_from_known_rates():
    # The pilot at known rates: 37 conditions x 300 images per run and variant, and the plan's 13 x 10,000
    # for vit and resnet; 15 runs each; 2 s to make each worker's images; 2 workers.
    assert robustness_params(PILOT).images == 300
    known = {"resnet": {T.CNN: 10000.0}, "vit": {T.FUSED: 3000.0, T.MEAN: 5000.0},
             "deit": {T.FUSED: 3000.0, T.MEAN: 5000.0}}
    known = {name: {path: {"images_per_second": rate} for path, rate in paths.items()} for name, paths in known.items()}
    cpu = (15 * 11100 / 10000 + 15 * 130000 / 10000 + 2 * (15 * 11100 / 3000 + 15 * 11100 / 5000)
           + 15 * 130000 / 3000 + 2 * 2.0)
    wall, lines = T.estimate(PILOT, known, (1.5, 0.5), 2)
    assert wall == pytest.approx(cpu / 2) and lines[-1].startswith(f"scoring: {cpu:,.0f} CPU-seconds")
