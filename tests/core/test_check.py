"""`study check` builds every model of a parameters file and checks a preset merged over params.yaml; `study models
--available` lists what `arch` and `arch_args` may be (study/tools/check.py, study/tools/models.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from study.core.cli import main
from study.models import MODEL_NAMES, architecture_args

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_misspelt_arch_args_key_fails_the_check_naming_the_model_the_key_and_the_allowed_keys(tmp_path, capsys):
    text = (ROOT / "params.yaml").read_text()
    good = "arch: vit\n    arch_args: {patch_size: 4,"
    assert good in text
    params = tmp_path / "params.yaml"
    params.write_text(text.replace(good, "arch: vit\n    arch_args: {patch_sise: 4,"))
    code, out, err = cli(capsys, "check", "--params", params)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {params}: models.vit.arch_args: unknown override 'patch_sise' for model 'vit'")
    assert "allowed: " in err and "patch_size" in err
    code, out, _ = cli(capsys, "check", "--params", ROOT / "params.yaml")
    assert code == 0 and "3 models built for 28x28x1 inputs" in out


def test_a_preset_is_checked_merged_over_params_yaml_and_said_to_be_an_overlay(tmp_path, capsys):
    code, out, err = cli(capsys, "check", "--params", ROOT / "configs" / "quick.yaml")
    assert code == 0, err
    assert "quick.yaml merged over " in out and "(a preset: an overlay of params.yaml) is valid" in out
    # the same overlay outside a project's configs/: the schema's error, and how to check it
    shutil.copy(ROOT / "configs" / "quick.yaml", tmp_path / "quick.yaml")
    code, _, err = cli(capsys, "check", "--params", tmp_path / "quick.yaml")
    assert code == 2 and err.count("\n") == 1 and "missing key" in err and "an overlay of params.yaml" in err
    # a preset's error names the merge, and the file that is not a preset says what it is instead
    code, _, err = cli(capsys, "check", "--params", ROOT / "configs" / "pretrained.yaml")
    assert code == 2 and "is not a preset of params.yaml" in err and "cd pretrained && dvc repro" in err


def test_models_available_lists_every_architecture_with_its_arch_args(capsys):
    code, out, _ = cli(capsys, "models", "--available")
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()[:-1]}
    assert list(lines) == [*MODEL_NAMES, "timm:<name>"]
    for name in MODEL_NAMES:
        for key, default in architecture_args(name).items():
            assert f"{key}={default!r}" in lines[name]
    assert out.splitlines()[-1].startswith(f"models: {len(MODEL_NAMES)} architectures and timm:<name>")
