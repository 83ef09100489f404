"""The GPU ladder (configs/ladder_gpu.yaml) on CPU at smoke size: its rungs, side pairs, plan and budget check as
written, on scikit-learn's digits at one fraction with 3 seeds and a few dozen steps (2 epochs of 648 images: 21
steps, 42 in the budget check; the preset's own 30 epochs made this test take over 20 minutes on a 2-core Zen 3),
through `study run --jobs 2 --warm` to the report. No GPU here: this checks that the preset runs end to end, not
its size or its results."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from study.core.checkout import own_code_env
from study.core.config import parse_params
from study.presets import merged, preset_params
from tests.conftest import ROOT, dvc
from tests.report.test_notebooks import run_ladder_notebooks
from tests.train.test_train import SMOKE
from study.plan.params import plan_params

# digits are 8x8: the rungs' 4-px patches make a 2x2 grid, so the plan's shuffle is of 2x2 cells, offset by half
SHUFFLE, OFFSET = ["rearrangement", "shuffle", 2], ["rearrangement", "offset", 2]


def _smoke_size() -> dict:
    raw = preset_params(ROOT, "ladder_gpu")
    ladder = copy.deepcopy(raw["analysis"]["plan"]["ladder"])
    ladder["conditions"][1].update({"name": "shuffle_2", "words": "under a 2x2 shuffle", "condition": SHUFFLE,
                                    "control": OFFSET, "control_means": "the 2x2 cells offset by half a cell"})
    robustness = merged(SMOKE["analysis"]["robustness"], {"occlusion": {"grid": 2},
                                                          "rearrangement": {"grids": [2], "offset_grids": [2]},
                                                          "translation": {"shifts": [1, 4]}, "uniform_attention": False})
    return merged(raw, {
        "data": SMOKE["data"], "fractions": [0.5], "seeds": [0, 1, 2],
        "budget": {"batch_size": 64, "epochs": 2.0, "min_steps": 12},
        "budget_check": {"fractions": [0.5]},
        "train": {"device": "cpu", "threads": 1, "deterministic": True, "eval_batch_size": 128},
        "analysis": {"cka": SMOKE["analysis"]["cka"], "attention": SMOKE["analysis"]["attention"],
                     "robustness": robustness,
                     "plan": {"seeds": 3, "images": 2000, "ladder": ladder}}})


def test_the_smoke_sized_gpu_ladder_is_valid_and_keeps_the_presets_design():
    raw = _smoke_size()
    params, gpu = parse_params(raw, "ladder_gpu (smoke size)"), parse_params(preset_params(ROOT, "ladder_gpu"),
                                                                              "configs/ladder_gpu.yaml")
    assert params.models == gpu.models and params.baselines == gpu.baselines  # the rungs and recipes as written
    assert plan_params(params).ladder.rungs == plan_params(gpu).ladder.rungs
    assert len(plan_params(params).claims) == len(plan_params(gpu).claims) == 24
    assert gpu.fractions == (0.0025, 0.01, 0.04, 0.2, 1.0) and len(gpu.seeds) == 8 and gpu.train.threads == 2


@pytest.mark.slow
def test_the_smoke_sized_gpu_ladder_runs_to_its_report(tmp_path, tmp_path_factory):
    from study.presets import working_copy

    project = working_copy(ROOT, tmp_path / "study", _smoke_size(), "# the GPU ladder at smoke size, on CPU\n")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = own_code_env(project, {**os.environ, "PATH": path})
    result = subprocess.run([sys.executable, "-m", "study", "run", "--jobs", "2", "--warm"], cwd=project, env=env,
                            capture_output=True, text=True, timeout=3600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    steps = pd.read_csv(project / "reports" / "tables" / "ladder" / "steps.csv")
    assert set(steps["seeds"]) == {3} and steps["step"].nunique() == 12  # 10 rung steps and 2 side pairs
    # the 13 models and the hierarchy's twin matched in FLOPs
    assert len(pd.read_csv(project / "reports" / "tables" / "budget_check" / "budget_check.csv")) == 14
    report = (project / "reports" / "report.md").read_text()
    # the twin beside the step (training GFLOPs -33.3% at these 2 epochs; -33.4% at the preset's 30: the step floor)
    assert "| resnet_adamw - lad_stem | 5.0 | -33.3 | resnet_adamw_w28 - lad_stem |" in report
    assert "## The ladder: from the ViT to the ResNet, one change at a time" in report
    assert "Which steps of the ladder move clean accuracy" in report
    assert "up to date" in dvc("status", cwd=project).stdout
    # the ladder's notebook on the tables this code wrote (the notebook tests read the committed ladder)
    printed = run_ladder_notebooks(project, tmp_path_factory)["07_ladder"]
    assert "reports: 11 rungs, 10 steps and 2 side pairs, each under 2 conditions; 3 seeds" in printed
