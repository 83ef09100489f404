"""The run table: every key the trainer writes for every run is read as required, so a metrics.json that lacks
one (not written by this trainer) stops the analyses with one line naming the file and the fix."""

from __future__ import annotations

import json

import pytest
import yaml

from study.core.cli import main
from study.core.errors import StudyError
from study.runs.table import collect_runs
from tests.budget_check.test_budget_check import _write_run


def test_a_run_reads_back_with_its_convergence_flags(tmp_path):
    _write_run(tmp_path / "vit" / "f1.0_s0", "vit", 1.0, 0, 0.8, 101, improving=True)
    row = collect_runs(tmp_path).iloc[0]
    assert bool(row["under_trained"]) and not row["step_bound"] and row["budget_source"] == "epochs"
    assert row["folder"] == tmp_path / "vit" / "f1.0_s0"


@pytest.mark.parametrize("path", [("convergence",), ("train_top1",), ("budget", "source")])
def test_a_metrics_file_without_a_key_the_trainer_always_writes_is_one_line(tmp_path, path):
    run = tmp_path / "vit" / "f1.0_s0"
    _write_run(run, "vit", 1.0, 0, 0.8, 101)
    metrics = json.loads((run / "metrics.json").read_text())
    *parents, key = path
    inner = metrics
    for parent in parents:
        inner = inner[parent]
    del inner[key]
    (run / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(StudyError) as error:
        collect_runs(tmp_path)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{run / 'metrics.json'}: no '{key}' in it")
    assert message.endswith("train the run again (`dvc repro`)")


def test_the_curves_stage_refuses_a_run_without_its_convergence_record(tmp_path, capsys):
    from tests.budget_check.test_budget_check import SMOKE

    run = tmp_path / "runs" / "vit" / "f1.0_s0"
    _write_run(run, "vit", 1.0, 0, 0.8, 101)
    metrics = json.loads((run / "metrics.json").read_text())
    del metrics["convergence"]
    (run / "metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(SMOKE))
    assert main(["curves", "--params", str(tmp_path / "params.yaml"), "--runs", str(tmp_path / "runs"),
                 "--figures", str(tmp_path / "figures"), "--tables", str(tmp_path / "tables")]) == 2
    error = capsys.readouterr().err
    assert error == f"error: {run / 'metrics.json'}: no 'convergence' in it, which the trainer writes for every run; " \
                    "train the run again (`dvc repro`)\n"
