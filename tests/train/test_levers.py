"""The lever sweep (study/levers.py): grid validation before any training, deltas, the one-row-per-lever table,
and a real (tiny) sweep on digits that resumes without retraining finished trials."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from study.data import stage_prepare as prepare_stage
from study.data import stage_subsets as subsets_stage
from study.core.config import parse_params
from study.core.errors import StudyError
from study.levers import lever_table, merge, read_grid, sweep
from study.presets import preset_params

ROOT = Path(__file__).resolve().parents[2]


def test_merge_is_recursive_and_none_removes_a_key():
    base = {"models": {"vit": {"lr": 1.0, "augment": {"hflip": True}}}, "seeds": [0]}
    out = merge(base, {"models": {"vit": {"lr": 2.0, "augment": None}}, "seeds": [1]})
    assert out == {"models": {"vit": {"lr": 2.0}}, "seeds": [1]}
    assert base["models"]["vit"]["lr"] == 1.0  # the base is not modified


def _grid(tmp_path: Path, levers: dict, model: str = "vit") -> Path:
    base = tmp_path / "smoke.yaml"  # a grid's base is a whole parameters file: the smoke preset merged over params.yaml
    base.write_text(yaml.safe_dump(preset_params(ROOT, "smoke")))
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({"base": str(base), "model": model, "fraction": 0.5, "seed": 0,
                                    "common": {"budget": {"min_steps": 30, "epochs": 1.0}}, "levers": levers}))
    return path


def test_a_bad_delta_stops_the_grid_before_any_training(tmp_path):
    grid = _grid(tmp_path, {"lr": {"zero": {"models": {"vit": {"lr": 0.0}}}}})
    with pytest.raises(StudyError, match=r"\(lr: zero\).*models.vit.lr = 0.0"):
        read_grid(grid)
    with pytest.raises(StudyError, match="not in the base's fractions"):
        read_grid(_grid(tmp_path, {"f": {"odd": {"fraction": 0.3}}}))


def test_table_has_one_row_per_lever_beside_the_base():
    rows = pd.DataFrame([
        {"lever": "base", "setting": "as in the base", "model": "vit", "fraction": 0.01, "val_top1": 0.70,
         "train_top1": 1.0, "still_improving": False},
        {"lever": "lr", "setting": "1e-3", "model": "vit", "fraction": 0.01, "val_top1": 0.65,
         "train_top1": 0.9, "still_improving": True},
        {"lever": "lr", "setting": "4e-3", "model": "vit", "fraction": 0.01, "val_top1": 0.74,
         "train_top1": 1.0, "still_improving": False},
    ]).assign(seed=0)
    [row] = lever_table(rows).to_dict("records")
    assert row["lever"] == "lr" and row["best on validation"] == "4e-3" and row["spread (points)"] == 9.0
    assert row["settings: val top-1 % (train top-1 %)"] == "as in the base: 70.0 (100); 1e-3: 65.0 (90*); 4e-3: 74.0 (100)"


def test_table_averages_seeds_and_shows_the_base_only_beside_its_own_model():
    rows = pd.DataFrame([
        {"lever": "base", "setting": "default", "model": "resnet", "seed": 0, "val_top1": 0.80},
        {"lever": "lr", "setting": "0.1", "model": "vit_sgd", "seed": 0, "val_top1": 0.60},
        {"lever": "lr", "setting": "0.1", "model": "vit_sgd", "seed": 1, "val_top1": 0.64},
        {"lever": "lr", "setting": "0.2", "model": "vit_sgd", "seed": 0, "val_top1": 0.58},
        {"lever": "lr", "setting": "0.2", "model": "vit_sgd", "seed": 1, "val_top1": 0.60},
    ]).assign(fraction=0.01, train_top1=1.0, still_improving=False)
    [row] = lever_table(rows).to_dict("records")
    assert row["seeds"] == 2 and row["best on validation"] == "0.1"
    assert row["settings: val top-1 % (train top-1 %)"] == "0.1: 62.0 (100); 0.2: 59.0 (100)"


@pytest.mark.slow
def test_sweep_trains_each_setting_once_and_resumes(tmp_path):
    params = parse_params(preset_params(ROOT, "smoke"))
    prepared, subsets = tmp_path / "prepared", tmp_path / "subsets"
    prepare_stage.run(params, prepared)
    subsets_stage.run(params, prepared, subsets)
    grid = _grid(tmp_path, {"base": {"as in the base": {}}, "peak lr": {"0.2": {"models": {"resnet": {"lr": 0.2}}}}},
                 model="resnet")
    out_csv, out_md = tmp_path / "levers.csv", tmp_path / "levers.md"
    sweep(grid, prepared, subsets, out_csv, out_md)
    first = pd.read_csv(out_csv)
    assert list(first["setting"]) == ["as in the base", "0.2"] and (first["steps"] == 30).all()
    assert first["val_top1"].between(0, 1).all() and first["val_top1"].iloc[0] != first["val_top1"].iloc[1]
    assert "| peak lr |" in out_md.read_text() and not any("test" in c for c in first.columns)  # validation only
    sweep(grid, prepared, subsets, out_csv, out_md)  # everything done: nothing retrained, same rows
    pd.testing.assert_frame_equal(pd.read_csv(out_csv), first)


def test_a_malformed_grid_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "grid.yaml"
    bad.write_text("levers: [unclosed\n")
    with pytest.raises(StudyError, match="not valid YAML"):
        read_grid(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(StudyError, match="expected a mapping with a `levers` mapping"):
        read_grid(bad)
