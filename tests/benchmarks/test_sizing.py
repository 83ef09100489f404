"""benchmarks.acceptance.sizing: a preset's training runs as its pipeline trains them, and their seconds at
measured rates."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from benchmarks.acceptance.sizing import main, measured_rates, sizing, training_runs
from study.core.config import load_params, parse_params
from study.presets import preset_params

ROOT = Path(__file__).resolve().parents[2]


def _study(name: str):
    return parse_params(preset_params(ROOT, name), source=f"configs/{name}.yaml")


def test_the_default_studys_runs_are_those_its_pipeline_trains():
    """params.yaml: 3 models x 2 fractions x 6 seeds, 300 steps at 290 images (the floor), 535 at 2,280 (30 epochs),
    as every run's summary line in the committed report says."""
    runs = training_runs(load_params(ROOT / "params.yaml"))
    assert len(runs) == 36 and set(runs["model"]) == {"resnet", "vit", "deit"}
    assert runs.groupby("fraction")["steps"].unique().map(list).to_dict() == {0.005: [300], 0.04: [535]}
    assert (runs["images"] == runs["steps"] * 128).all() and (runs["budget_factor"] == 1.0).all()


def test_the_budget_check_adds_twice_the_steps_at_its_fractions():
    runs = training_runs(_study("confirmatory_gpu"))
    assert len(runs) == 3 * 10 * 5 + 3 * 10 * 2  # the study, then every model and seed at 20% and 100% twice over
    longer = runs[runs["budget_factor"] == 2.0]
    assert sorted(longer["fraction"].unique()) == [0.2, 1.0]
    once = runs[runs["budget_factor"] == 1.0].groupby("fraction")["steps"].first()
    assert (longer.groupby("fraction")["steps"].first() >= 2 * once[[0.2, 1.0]] - 1).all()


def test_seconds_are_images_over_the_models_rate_of_its_long_runs():
    device_runs = pd.DataFrame({"model": ["resnet", "resnet", "vit", "vit", "deit"], "steps": [300, 1000, 900, 4000, 891],
                                "images_per_s": [1.0, 100.0, 40.0, 60.0, 30.0]})
    rates = measured_rates(device_runs)
    assert rates.to_dict() == {"deit": 30.0, "resnet": 100.0, "vit": 50.0}  # the 300-step run left out
    table = sizing(load_params(ROOT / "params.yaml"), rates)
    assert table["runs"].sum() == 36
    row = table[(table["model"] == "vit") & (table["fraction"] == 0.04)].iloc[0]
    assert row["images"] == 6 * 535 * 128 and row["seconds"] == pytest.approx(6 * 535 * 128 / 50.0, abs=0.1)


def test_a_missing_rates_table_or_model_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as exit_:
        main(["--preset", "confirmatory_gpu", "--rates", str(tmp_path / "none.csv")])
    assert str(exit_.value).startswith("error: --rates") and "\n" not in str(exit_.value)
    pd.DataFrame({"model": ["resnet"], "steps": [1000], "images_per_s": [1.0]}).to_csv(tmp_path / "r.csv", index=False)
    with pytest.raises(SystemExit) as exit_:
        main(["--preset", "confirmatory_gpu", "--rates", str(tmp_path / "r.csv")])
    assert str(exit_.value).startswith("error: no measured rate for") and "deit" in str(exit_.value)
