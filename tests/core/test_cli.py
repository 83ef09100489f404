"""The command line: stage commands listed, one-line summaries, clean errors."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def study(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "study", *args], cwd=cwd, capture_output=True, text=True)


def test_help_lists_every_stage_command():
    out = study("--help").stdout
    for command in ("prepare", "subsets", "train", "curves", "cka", "attention", "report", "models", "check"):
        assert command in out


def test_models_prints_params_and_flops_of_the_default_models():
    result = study("models")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].split() == ["model", "arch", "params", "forward_MFLOPs"]
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert set(rows) == {"resnet", "vit", "deit"}
    assert all(int(r[2]) > 0 and float(r[3]) > 0 for r in rows.values())
    assert lines[-1].startswith("models: 3 models for 28x28x1 inputs")


def test_a_model_that_cannot_fit_the_image_is_a_one_line_error(tmp_path):
    params = (ROOT / "params.yaml").read_text().replace("patch_size: 4,", "patch_size: 5,", 1)
    (tmp_path / "params.yaml").write_text(params)
    result = study("models", "--params", str(tmp_path / "params.yaml"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and "patch" in result.stderr


def test_missing_prepared_data_is_a_one_line_error(tmp_path):
    result = study("subsets", "--prepared", str(tmp_path / "nope"), "--out", str(tmp_path / "subsets"))
    assert result.returncode == 2 and "run `dvc repro prepare` first" in result.stderr
    assert not (tmp_path / "subsets").exists()
