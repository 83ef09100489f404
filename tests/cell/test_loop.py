"""A cell's seeds leave the files each seed trained alone leaves: the same names, spec and initial weights, the same
bytes twice, and the same bytes after a kill and resume.

Weights are compared for the ViT and the DeiT: after 21 steps on the smoke preset's digits each seed's weights are
within test_step's tolerance of the seed trained alone. The ResNet-8's are not, and cannot be: its float32 rounding
puts an occasional pre-ReLU value on the other side of 0, which passes or stops that element's whole gradient, and at
SGD's lr 0.05 a difference of 2% in one step's conv1 gradient grew to 0.06 in conv1's weights (against 0.15 moved
in training) by step 21. On that batch the run alone's own channels-last conv1 gradient is 2% off the float64 one
(5e-7 with contiguous tensors): the gap is the arithmetic's, not the cell's. One cell step from one state is
compared in tests/cell/test_step.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from study.cell.step import CellStep
from study.core.config import parse_params
from study.core.errors import StudyError
from study.train.artifacts import read_checkpoint
from study.train.stage import run as train_alone
from study.train.stage import run_cell
from tests.cell.test_step import ATOL, RTOL
from tests.train.test_train import SMOKE, prepare_digits

SEEDS = [0, 1]
FILES = ("model.pt", "init.pt", "predictions.npy", "metrics.json", "history.csv", "resume.pt")


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return prepare_digits(tmp_path_factory.mktemp("digits"))


def _params(distill: str = "soft"):
    raw = yaml.safe_load(yaml.safe_dump(SMOKE))
    raw["budget"].update(epochs=1.0, min_steps=12)  # 12 steps: four validation points, a resume point at 5 and 10
    raw["train"]["checkpoint_every"] = 5
    raw["distill"][0]["kind"] = distill
    return parse_params(raw)


def _cell(params, digits, root, model="vit", teachers=None):
    return run_cell(params, model, 1.0, SEEDS, digits / "prepared",
                    [digits / f"subsets/s{s}/f1.0.npy" for s in SEEDS], digits / "subsets/validation.npy",
                    teachers or [None] * len(SEEDS), [root / model / f"s{s}" for s in SEEDS])


def _alone(params, digits, root, seed, model="vit", teacher=None):
    out = root / model / f"s{seed}"
    return train_alone(params, model, 1.0, seed, digits / "prepared", digits / f"subsets/s{seed}/f1.0.npy",
                       digits / "subsets/validation.npy", teacher, out / "model.pt", out / "metrics.json",
                       out / "history.csv", out / "resume.pt", out / "predictions.npy")


def _weights(path):
    return read_checkpoint(path)["state_dict"]


@pytest.mark.parametrize("model", ["resnet", "vit", "deit"])
def test_each_seed_of_a_cell_leaves_the_run_it_leaves_alone(digits, tmp_path, model, one_thread):
    params = _params()
    teachers = None
    if model == "deit":  # each seed's own teacher: the ResNet of its fraction and seed
        for seed in SEEDS:
            _alone(params, digits, tmp_path / "teachers", seed, "resnet")
        teachers = [tmp_path / "teachers/resnet" / f"s{s}/model.pt" for s in SEEDS]
    summary = _cell(params, digits, tmp_path / "cell", model, teachers)
    assert summary.startswith(f"train: {model} fraction 1.0 seeds 0, 1 as one cell: test top-1 ")
    assert len(summary.splitlines()) == 1
    for k, seed in enumerate(SEEDS):
        _alone(params, digits, tmp_path / "alone", seed, model, teachers and teachers[k])
        cell, alone = tmp_path / "cell" / model / f"s{seed}", tmp_path / "alone" / model / f"s{seed}"
        assert sorted(p.name for p in cell.iterdir()) == sorted(FILES) == sorted(p.name for p in alone.iterdir())
        assert (cell / "init.pt").read_bytes() == (alone / "init.pt").read_bytes()  # one draw of the initial weights
        c, a = read_checkpoint(cell / "model.pt"), read_checkpoint(alone / "model.pt")
        assert c["spec"] == a["spec"]
        assert c["state_dict"].keys() == a["state_dict"].keys()
        for name, tensor in a["state_dict"].items():
            assert c["state_dict"][name].stride() == tensor.stride(), name  # channels-last weights stay so
            if model != "resnet":  # the ResNet's ReLUs: see the module docstring
                torch.testing.assert_close(c["state_dict"][name], tensor, atol=ATOL, rtol=RTOL, msg=name)
        if model == "resnet":  # each seed's own running statistics, moved by its own batches
            means = [read_checkpoint(run / "model.pt")["state_dict"]["bn1.running_mean"] for run in (cell, alone)]
            assert not torch.equal(means[0], torch.zeros_like(means[0]))
        else:
            agree = (np.load(cell / "predictions.npy") == np.load(alone / "predictions.npy")).mean()
            assert agree >= 0.99, agree
        mc, ma = (json.loads((run / "metrics.json").read_text()) for run in (cell, alone))
        assert mc.keys() == ma.keys()
        assert mc["cell"] == {"switch": 1, "seeds": SEEDS} and ma["cell"] == {"switch": 1, "seeds": [seed]}
        assert mc["precision"] == "fp32" and mc["budget"] == ma["budget"] and mc["seed"] == seed
        if model != "resnet":
            assert abs(mc["test_top1"] - ma["test_top1"]) <= 0.01
        if model == "deit":  # the teacher's labels of each seed's own views, counted per seed
            assert mc["teacher_views_seen"] == ma["teacher_views_seen"] > 0
        hc, ha = ((run / "history.csv").read_text().splitlines() for run in (cell, alone))
        assert hc[0] == ha[0] and [r.split(",")[0] for r in hc] == [r.split(",")[0] for r in ha]  # the same steps


def test_a_cell_gives_the_same_bytes_twice(digits, tmp_path, one_thread):
    params = _params()
    for root in ("a", "b"):
        _cell(params, digits, tmp_path / root, "resnet")
    for seed in SEEDS:
        for name in ("model.pt", "init.pt", "predictions.npy"):
            assert (tmp_path / f"a/resnet/s{seed}/{name}").read_bytes() == \
                   (tmp_path / f"b/resnet/s{seed}/{name}").read_bytes(), name


def test_a_killed_cell_resumes_from_each_seeds_state_to_the_same_bytes(digits, tmp_path, monkeypatch, one_thread):
    params = _params()
    _cell(params, digits, tmp_path / "straight", "vit")
    original = CellStep.__call__

    def killed_at_8(self, step):
        if step == 8:  # after the resume point at step 5
            raise KeyboardInterrupt
        return original(self, step)

    monkeypatch.setattr(CellStep, "__call__", killed_at_8)
    with pytest.raises(KeyboardInterrupt):
        _cell(params, digits, tmp_path / "killed", "vit")
    shares = [read_checkpoint(tmp_path / f"killed/vit/s{s}/resume.pt") for s in SEEDS]
    assert [share["step"] for share in shares] == [5, 5] and [share["seed_of_cell"] for share in shares] == [0, 1]
    monkeypatch.setattr(CellStep, "__call__", original)
    steps = []
    monkeypatch.setattr(CellStep, "__call__", lambda self, step: steps.append(step) or original(self, step))
    _cell(params, digits, tmp_path / "killed", "vit")
    assert steps[0] == 5  # resumed, not restarted
    for seed in SEEDS:
        for name in ("model.pt", "predictions.npy"):
            assert (tmp_path / f"straight/vit/s{seed}/{name}").read_bytes() == \
                   (tmp_path / f"killed/vit/s{seed}/{name}").read_bytes(), name
        straight, resumed = (json.loads((tmp_path / f"{r}/vit/s{seed}/metrics.json").read_text())
                             for r in ("straight", "killed"))
        assert straight["test_top1"] == resumed["test_top1"] and straight["val_loss"] == resumed["val_loss"]


def test_a_cell_of_other_seeds_ignores_a_state_it_did_not_write(digits, tmp_path, monkeypatch, one_thread):
    params = _params()
    original = CellStep.__call__
    monkeypatch.setattr(CellStep, "__call__", lambda self, step: (_ for _ in ()).throw(KeyboardInterrupt)
                        if step == 8 else original(self, step))
    with pytest.raises(KeyboardInterrupt):
        _cell(params, digits, tmp_path, "resnet")
    monkeypatch.setattr(CellStep, "__call__", original)
    steps = []
    monkeypatch.setattr(CellStep, "__call__", lambda self, step: steps.append(step) or original(self, step))
    _alone(params, digits, tmp_path, 0, "resnet")  # seed 0 alone: the cell's share is not its state
    assert steps == []  # the alone run takes TrainStep's steps, from step 0 (no resume message)
    assert json.loads((tmp_path / "resnet/s0/metrics.json").read_text())["cell"]["seeds"] == [0]


def test_the_cli_refuses_unpaired_seed_arguments_in_one_line(tmp_path, capsys):
    from study.core.cli import main

    code = main(["train", "--params", "params.yaml", "--model", "vit", "--fraction", "1.0", "--seed", "0", "--seed",
                 "1", "--prepared", "p", "--subset", "a", "--validation", "v", "--run", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: 2 --seed, 1 --subset, 1 --run") and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


def test_a_cell_refuses_bf16_before_it_writes_anything(digits, tmp_path):
    raw = yaml.safe_load(yaml.safe_dump(SMOKE))
    raw["train"]["precision"] = "bf16"
    with pytest.raises(StudyError, match="train a cell in fp32"):
        _cell(parse_params(raw), digits, tmp_path, "vit")
    assert not [path for path in tmp_path.rglob("*") if path.is_file()]
