"""`study gpu-acceptance --smoke`: the GPU acceptance at toy size on CPU, so that it cannot rot before a GPU comes.

One run of every step (the headline models and the smoke preset's benched, one training stage of the smoke
study through `dvc repro` in a scratch copy, and a second `dvc repro` stopped at its time limit), then checks on
the tables it wrote; and the verdict rules on made-up GPU rows.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pandas as pd
import pytest

from study.bench import acceptance as acc
from study.bench import scratch_repro
from study.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> tuple[int, Path, dict[str, str]]:
    out = tmp_path_factory.mktemp("acceptance") / "out"
    before = {name: _digest(ROOT / name) for name in ("params.yaml", "dvc.lock")}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        status = main(["gpu-acceptance", "--smoke", "--out", str(out)])
    after = {name: _digest(ROOT / name) for name in ("params.yaml", "dvc.lock")}
    assert before == after, "the acceptance touched the checkout's params.yaml or dvc.lock"
    return status, out, after


def test_every_step_writes_its_tables(smoke_run):
    status, out, _ = smoke_run
    assert status == 0
    assert {p.name for p in out.iterdir()} == {"acceptance.md", "bench.csv", "stages.csv", "studies.csv",
                                               "device.json", "dvc-default-study.log", "dvc-gpu-preset.log"}
    assert len(list(out.iterdir())) <= 8  # what the device tool brings back from $OUT


def test_the_headline_and_preset_models_are_benched_on_both_paths(smoke_run):
    bench = pd.read_csv(smoke_run[1] / "bench.csv")
    headline = bench[bench["step"] == "bench"]
    assert set(headline["model"]) == {"ResNet-18 (3x3 stem)", "ViT-Tiny/4"}
    assert set(headline["input"]) == {"3x32x32"}
    presets = bench[bench["step"] == "bench-presets"]
    assert set(presets["model"]) == {"resnet", "vit", "deit"} and set(presets["group"]) == {"smoke"}
    for model, rows in bench.groupby("model"):
        assert set(rows["path"]) == {"study", "usual"}, model
        assert (rows["images_per_s"] > 0).all() and ((rows["mfu"] > 0) & (rows["mfu"] < 1)).all()
        study, usual = (rows.loc[rows["path"] == p, "images_per_s"].iloc[0] for p in ("study", "usual"))
        assert math.isclose(rows.loc[rows["path"] == "usual", "speedup"].iloc[0], study / usual, rel_tol=1e-9)
    assert (bench["peak_dtype"] == "float32").all()  # auto precision on CPU


def test_dvc_repro_is_timed_per_stage_and_stopped_at_its_limit(smoke_run):
    out = smoke_run[1]
    stages, studies = pd.read_csv(out / "stages.csv"), pd.read_csv(out / "studies.csv")
    default = stages[stages["step"] == "default-study"]
    assert list(default["stage"]) == ["prepare", "subsets", "train@resnet-0.5-0"]
    assert (default["status"] == "done").all() and (default["seconds"] > 0).all()
    by_step = studies.set_index("step")
    assert by_step.loc["default-study", "returncode"] == 0 and not by_step.loc["default-study", "stopped"]
    assert by_step.loc["gpu-preset", "stopped"]  # the smoke preset's 18 runs do not fit its 12 s
    assert stages[stages["step"] == "gpu-preset"]["status"].iloc[-1] == "stopped at the time limit"
    assert by_step.loc["default-study", "seconds"] >= default["seconds"].sum() - 1e-6
    assert "Running stage 'train@resnet-0.5-0'" in (out / "dvc-default-study.log").read_text()


def test_the_report_gives_the_tables_and_no_verdict_on_a_cpu(smoke_run):
    text = (smoke_run[1] / "acceptance.md").read_text()
    assert "## Training step" in text and "## `dvc repro`, timed per stage" in text
    assert "no verdict" in text and "met" not in text.replace("Not a GPU", "")


def test_a_later_call_replaces_only_its_own_steps_rows(tmp_path):
    path = tmp_path / "stages.csv"
    acc.merge_csv(path, pd.DataFrame({"stage": ["a"], "seconds": [1.0]}), "default-study")
    acc.merge_csv(path, pd.DataFrame({"stage": ["b"], "seconds": [2.0]}), "gpu-preset")
    table = acc.merge_csv(path, pd.DataFrame({"stage": ["c"], "seconds": [3.0]}), "default-study")
    assert sorted(zip(table["step"], table["stage"])) == [("default-study", "c"), ("gpu-preset", "b")]
    assert pd.read_csv(path).equals(table)


def test_on_a_gpu_the_targets_are_judged_from_the_measured_rows():
    rows = pd.DataFrame({
        "model": ["ResNet-18 (3x3 stem)", "ResNet-18 (3x3 stem)", "ViT-Tiny/4", "ViT-Tiny/4"],
        "path": ["study", "usual", "study", "usual"], "mfu": [0.40, 0.10, 0.20, 0.05],
        "speedup": [3.5, 3.5, 4.0, 4.0],
    })
    assert acc._verdict(rows, "ResNet-18 (3x3 stem)", 0.35).endswith(": met")
    assert acc._verdict(rows, "ViT-Tiny/4", 0.25).endswith(": not met")  # 20% MFU, though 4x the usual recipe
    slow = rows.assign(speedup=[2.9, 2.9, 4.0, 4.0])
    assert acc._verdict(slow, "ResNet-18 (3x3 stem)", 0.35).endswith(": not met")  # 40% MFU, but under 3x


def test_bad_steps_and_a_folder_without_the_pipeline_are_one_line(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit):
        main(["gpu-acceptance", "--out", str(tmp_path), "--step", "nope"])
    (tmp_path / "params.yaml").write_text((ROOT / "configs" / "smoke.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["gpu-acceptance", "--smoke", "--out", str(tmp_path / "out"), "--step", "bench"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: no dvc.yaml") and not (tmp_path / "out").exists()


def test_without_git_the_scratch_copy_is_a_dvc_project_without_scm(tmp_path, monkeypatch):
    """The device image may lack git: the copy then runs DVC with core.no_scm, and leaves outputs behind."""
    which = scratch_repro.shutil.which
    monkeypatch.setattr(scratch_repro.shutil, "which",
                        lambda name, path=None: None if name == "git" else which(name, path=path))
    project = scratch_repro.scratch_copy(ROOT, tmp_path / "copy", ROOT / "configs" / "smoke.yaml", None, "data/raw")
    assert not (project / ".git").exists() and not (project / "dvc.lock").exists()
    assert not {"runs", "reports", ".venv", ".kit"} & {p.name for p in project.iterdir()}
    assert (project / "params.yaml").read_text() == (ROOT / "configs" / "smoke.yaml").read_text()
    assert "train@resnet-0.5-0" in scratch_repro._run_dvc(project, "stage", "list", "--name-only").split()


def test_folders_of_separate_calls_merge_into_one_report(smoke_run, tmp_path):
    """One device call per step, each with its own $OUT: --merge puts them back together."""
    out = smoke_run[1]
    calls = []
    for step in ("bench", "bench-presets", "default-study", "gpu-preset"):  # what each call would have written
        folder = tmp_path / step
        folder.mkdir()
        (folder / "device.json").write_text((out / "device.json").read_text())
        for name in ("bench.csv", "stages.csv", "studies.csv"):
            table = pd.read_csv(out / name)
            if step in set(table["step"]):
                table[table["step"] == step].to_csv(folder / name, index=False)
        calls.append(folder)
    merged = tmp_path / "merged"
    args = [a for folder in calls for a in ("--merge", str(folder))]
    assert main(["gpu-acceptance", "--out", str(merged), *args]) == 0
    for name in ("bench.csv", "stages.csv", "studies.csv"):
        ours, theirs = pd.read_csv(merged / name), pd.read_csv(out / name)
        assert sorted(map(tuple, ours.astype(str).values)) == sorted(map(tuple, theirs.astype(str).values)), name
    assert (merged / "acceptance.md").read_text() == (out / "acceptance.md").read_text()
    assert main(["gpu-acceptance", "--out", str(merged), "--merge", str(tmp_path / "nothing")]) == 2
