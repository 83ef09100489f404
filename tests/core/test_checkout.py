"""`study` refuses, in one line, to run another checkout's code in a project (study/core/checkout.py): in a copy of
this project it runs only with the copy's own package, at the copy's root and in its pretrained/ project alike."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from study.core.checkout import check_own_code, own_code_env, project_code, project_root
from study.core.errors import StudyError

ROOT = Path(__file__).resolve().parents[2]
STUDY = Path(sys.executable).with_name("study")  # the console script of this environment's (editable) install


@pytest.fixture
def copy(tmp_path) -> Path:
    """A copy of the project's code and pipeline files (as `study preset` writes one, without git)."""
    dest = tmp_path / "copy"
    shutil.copytree(ROOT / "study", dest / "study", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "configs", dest / "configs")
    for name in ("params.yaml", "dvc.yaml", "pyproject.toml", "pretrained/dvc.yaml"):
        (dest / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, dest / name)
    return dest


def _study(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(STUDY), *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_a_project_is_found_at_or_above_the_current_folder_and_its_code_at_or_above_the_project(copy, tmp_path):
    assert project_root(copy / "study" / "models") == copy  # dvc.yaml
    assert project_root(copy / "pretrained") == copy / "pretrained"  # a DVC project of its own ...
    assert project_code(copy / "pretrained") == copy / "study"  # ... whose dvc.yaml runs ../study
    (copy / "dvc.yaml").unlink()
    assert project_root(copy / "study") == copy  # params.yaml beside configs/, where `study preset` runs
    assert project_root(tmp_path) is None


def test_another_checkouts_package_is_refused_in_one_line_naming_both_and_the_fix(copy):
    for where in (copy, copy / "configs", copy / "pretrained"):
        with pytest.raises(StudyError) as err:
            check_own_code(where, package=ROOT / "study")
        message = str(err.value)
        assert "\n" not in message and f"pip install -e {copy}" in message
        assert f"{copy / 'study'}" in message and f"{ROOT / 'study'}" in message and f"run from {ROOT}" in message
        check_own_code(where, package=copy / "study")  # the project's own: nothing to refuse


def test_outside_a_project_or_without_code_of_its_own_nothing_is_refused(tmp_path):
    check_own_code(tmp_path, package=ROOT / "study")  # no project around
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    check_own_code(tmp_path, package=ROOT / "study")  # a project, but no study/ package at or above it


@pytest.mark.slow  # runs the installed `study` in a copy of the project: 15 s of process starts
def test_the_installed_command_refuses_in_a_copy_and_runs_its_own_code_there(copy):
    """The editable install's `study`, run in a copy: every command that reads the project refuses with exit
    status 2 and the fix; --help and --version do not; with the copy's code first on PYTHONPATH (as an install of
    the copy would import it) and with `python -m study` (which imports from the current folder) it runs."""
    for cwd, args in ((copy, ["check"]), (copy / "pretrained", ["check", "--params", "../params.yaml"])):
        refused = _study(*args, cwd=cwd)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("error: this project's code is ")
        assert f"pip install -e {copy}" in refused.stderr
        ran = _study(*args, cwd=cwd, env=own_code_env(cwd))
        assert ran.returncode == 0 and ran.stdout.startswith("check: "), ran.stderr
    by_module = subprocess.run([sys.executable, "-m", "study", "check"], cwd=copy, capture_output=True, text=True)
    assert by_module.returncode == 0, by_module.stderr
    for args in (["--help"], ["--version"], ["check", "--help"]):
        assert _study(*args, cwd=copy).returncode == 0
    assert _study("check", cwd=ROOT).returncode == 0  # the checkout the package comes from


def test_own_code_env_puts_the_projects_checkout_first_and_keeps_the_rest(copy, tmp_path):
    env = own_code_env(copy / "pretrained", {"PYTHONPATH": "/elsewhere", "KEEP": "1"})
    assert env == {"PYTHONPATH": f"{copy}{os.pathsep}/elsewhere", "KEEP": "1"}
    assert own_code_env(tmp_path, {"KEEP": "1"}) == {"KEEP": "1"}  # no project: unchanged
