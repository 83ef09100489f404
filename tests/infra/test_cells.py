"""The engine's cells: which training stages' commands join, in what order and chunks, and when a cell waits."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from study.core.checkout import own_code_env
from study.infra.engine.cells import cells, joined, split_command
from tests.conftest import copy_project, dvc
from tests.faults.test_faults import _env


def _train(model: str, fraction: float, seed: int, teacher: bool = False, budget: str = "study") -> str:
    command = (f"study train --model {model} --fraction {fraction} --seed {seed} --budget {budget} --prepared "
               f"data/prepared --subset data/subsets/s{seed}/f{fraction}.npy --validation data/subsets/validation.npy")
    if teacher:
        command += f" --teacher runs/resnet/f{fraction}_s{seed}/model.pt"
    return command + f" --run runs/{model}/f{fraction}_s{seed}"


def test_a_cells_command_repeats_each_seeds_own_arguments_in_order():
    command = joined([_train("deit", 0.5, 0, teacher=True), _train("deit", 0.5, 1, teacher=True)])
    words = shlex.split(command)
    assert words[:2] == ["study", "train"]
    assert [words[i + 1] for i, w in enumerate(words) if w == "--seed"] == ["0", "1"]
    assert [words[i + 1] for i, w in enumerate(words) if w == "--run"] == ["runs/deit/f0.5_s0", "runs/deit/f0.5_s1"]
    assert [words[i + 1] for i, w in enumerate(words) if w == "--teacher"] == \
        ["runs/resnet/f0.5_s0/model.pt", "runs/resnet/f0.5_s1/model.pt"]
    assert words.count("--model") == words.count("--validation") == 1


def test_only_one_seed_commands_of_one_cell_join():
    assert split_command("study curves --runs runs") is None
    assert split_command(joined([_train("vit", 0.5, 0), _train("vit", 0.5, 1)])) is None  # a cell already
    with pytest.raises(ValueError):
        joined([_train("vit", 0.5, 0), _train("vit", 1.0, 1)])  # two fractions
    with pytest.raises(ValueError):
        joined([_train("vit", 0.5, 0), _train("vit", 0.5, 1, budget="check")])  # two budgets


def test_ready_stages_form_cells_in_seed_order_cut_to_the_cell_size():
    names = [f"train@vit-0.5-{s}" for s in (3, 0, 4, 1, 2)] + ["train@resnet-0.5-0", "curves"]
    commands = {f"train@vit-0.5-{s}": (_train("vit", 0.5, s),) for s in range(5)}
    commands |= {"train@resnet-0.5-0": (_train("resnet", 0.5, 0),), "curves": ("study curves",)}
    groups, held = cells(names, [], commands.__getitem__, 2)
    assert held == []
    assert groups == [["curves"], ["train@vit-0.5-0", "train@vit-0.5-1"], ["train@vit-0.5-2", "train@vit-0.5-3"],
                      ["train@vit-0.5-4"], ["train@resnet-0.5-0"]]
    assert cells(names, [], commands.__getitem__, 1) == ([[n] for n in names], [])  # alone: as they come


def test_a_cell_waits_until_every_one_of_its_stages_may_start():
    commands = {f"distill@d0-0.5-{s}": (_train("deit", 0.5, s, teacher=True),) for s in range(3)}
    commands["train@vit-0.5-0"] = (_train("vit", 0.5, 0),)
    ready, waiting = ["distill@d0-0.5-0", "distill@d0-0.5-1", "train@vit-0.5-0"], ["distill@d0-0.5-2"]
    groups, held = cells(ready, waiting, commands.__getitem__, 8)
    assert groups == [["train@vit-0.5-0"]] and held == ["distill@d0-0.5-0", "distill@d0-0.5-1"]
    groups, held = cells(ready + waiting, [], commands.__getitem__, 8)
    assert groups == [["distill@d0-0.5-0", "distill@d0-0.5-1", "distill@d0-0.5-2"], ["train@vit-0.5-0"]] and held == []


@pytest.mark.slow
def test_study_run_trains_a_cells_stages_as_one_job_and_records_each(tmp_path):
    """Three smoke-preset ViT seeds with ``train.cell.cpu: 3``: one `study train` trains them, each stage is
    recorded with its own command, `dvc status` is clean, and each run's metrics.json names the cell."""
    project = copy_project(tmp_path / "study", preset="smoke")
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["train"]["cell"] = {"cpu": 3, "cuda": 8}
    params["budget"].update(epochs=1.0, min_steps=20)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    targets = [f"train@vit-1.0-{seed}" for seed in (0, 1, 2)]
    study = str(Path(sys.executable).parent / "study")
    result = subprocess.run([study, "run", "--jobs", "1", *targets], cwd=project, env=own_code_env(project, _env()),
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if "(cell train@vit-1.0-0+2)" in line]
    assert len(lines) == 3 and "seeds 0, 1, 2 as one cell" in lines[0], result.stdout
    for seed in (0, 1, 2):
        metrics = json.loads((project / f"runs/vit/f1.0_s{seed}/metrics.json").read_text())
        assert metrics["cell"] == {"switch": 3, "seeds": [0, 1, 2]} and metrics["seed"] == seed
    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    assert [f"--seed {seed} " in lock[name]["cmd"] for seed, name in enumerate(targets)] == [True] * 3
    assert "up to date" in dvc("status", *targets, cwd=project).stdout
