"""A study without a distilled student: ``distill: []`` in params.yaml renders no distill stages in dvc.yaml (their
matrix iterates that list), and the distillation stage, which every study keeps, writes a note and no tables."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import copy_study, dvc
from study.core.config import parse_params
from study.core.errors import StudyError
from study.outputs.tables import read_table
from study.distillation.stage import run as distillation
from study.presets import header, params_text, preset_params

ROOT = Path(__file__).resolve().parents[2]
DVC = Path(sys.executable).with_name("dvc")


def _stages(tmp_path: Path, preset: str | None) -> list[str]:
    """The stage names DVC renders from the project's dvc.yaml with ``preset`` merged over params.yaml (none:
    params.yaml itself)."""
    project = tmp_path / (preset or "params")
    project.mkdir()
    shutil.copy(ROOT / "dvc.yaml", project / "dvc.yaml")
    (project / "params.yaml").write_text(params_text(preset_params(ROOT, preset)) if preset else
                                         (ROOT / "params.yaml").read_text())
    subprocess.run([DVC, "init", "--no-scm", "-q"], cwd=project, check=True)
    listed = subprocess.run([DVC, "stage", "list", "--name-only"], cwd=project, check=True, capture_output=True,
                            text=True)
    return listed.stdout.split()


def test_distill_stages_follow_the_params_list(tmp_path):
    with_student = _stages(tmp_path, None)
    params = parse_params(yaml.safe_load((ROOT / "params.yaml").read_text()))
    n_runs = len(params.fractions) * len(params.seeds)
    assert len([s for s in with_student if s.startswith("distill@d0-")]) == n_runs
    without = _stages(tmp_path, "priors")
    assert not [s for s in without if s.startswith(("distill@", "distill_2x@"))]
    assert "distillation" in without and "report" in without


def test_the_distillation_stage_of_a_study_without_a_student_writes_only_a_note(tmp_path):
    params = parse_params(preset_params(ROOT, "priors"))
    assert params.distill is None and "deit" not in params.trained_models
    tables = tmp_path / "tables"
    line = distillation(params, tmp_path / "runs", tables)
    assert "no student" in line
    assert [p.name for p in tables.iterdir()] == ["NONE.md"]
    assert read_table(tables / "teacher.csv") is None  # the report's "no distillation"


@pytest.mark.parametrize("listed, message", [
    ({"student": "deit", "teacher": "resnet"}, "must be a list of distillations"),
    (None, "must be a list of distillations"),
    ([{"student": "deit"}, {"student": "deit"}], "at most one"),
])
def test_distill_must_be_a_list_of_at_most_one(listed, message):
    raw = preset_params(ROOT, "smoke")
    raw["distill"] = listed
    with pytest.raises(StudyError, match=message):
        parse_params(raw, source="params.yaml")


def test_the_smoke_study_without_its_student_repro_cleanly(smoke_study, tmp_path):
    """The smoke study with ``distill: []`` and its student's runs removed: `dvc repro` retrains nothing, the
    analyses and the report run without a student, and `dvc status` is then clean."""
    project = tmp_path / "study"
    copy_study(smoke_study, project)
    text = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(params_text({**yaml.safe_load(text), "distill": []}, header(text)))
    for runs in ("runs", "runs_2x"):
        shutil.rmtree(project / runs / "deit")
    repro = dvc("repro", cwd=project)
    assert "Running stage 'train@" not in repro.stdout and "Running stage 'distill@" not in repro.stdout
    report = (project / "reports" / "report.md").read_text()
    assert "DeiT-style" not in report.split("## Findings")[0] and "\n## Distillation\n" not in report
    assert [p.name for p in (project / "reports" / "tables" / "distillation").iterdir()] == ["NONE.md"]
    assert "deit" not in (project / "reports" / "tables" / "curves" / "runs.csv").read_text()
    assert "up to date" in dvc("status", cwd=project).stdout
