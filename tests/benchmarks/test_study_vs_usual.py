"""The study-against-usual benchmark (`study bench`, benchmarks/study_vs_usual.py) in CI size: tiny models on 8×8
images, 2 timed steps, no DataLoader workers.

What must hold whatever the machine's speed: every model gets a study row and a usual row, throughputs
are positive, MFU is a fraction of a measured peak, FLOPs are the model's own, the speed-up is the ratio
of the two throughputs, and the CSV on disk is the table printed.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest
import timm.models.vision_transformer
import torch
import yaml

import benchmarks.measure
from benchmarks import study_vs_usual
from benchmarks.measure import measure_peak_flops
from benchmarks.study_path import study_step
from benchmarks.table import STUDY, STUDY_AUGMENTED, USUAL, with_speedups
from benchmarks.usual_path import usual_model
from benchmarks.workload import Shape, heavy_augmentation, synthetic_data
from study.core.cli import main
from study.models import build_model
from study.models.cost import count_parameters, forward_flops
from study.train.augment import Augmentation
from study.train.recipe import Recipe
from study.train.step import StepSpec
from study.train.losses import LabelLoss

TINY_VIT = {"patch_size": 4, "embed_dim": 16, "depth": 1, "num_heads": 2, "mlp_ratio": 2.0}
TINY_PARAMS = {
    "data": {"dataset": "digits"},  # 8×8×1, 10 classes: the smallest shape the study knows
    "fractions": [1.0],
    "seeds": [0],
    "baselines": ["resnet", "vit"],
    "distill": [{"student": "deit", "teacher": "resnet", "kind": "hard"}],
    "models": {
        "resnet": {"arch": "resnet8", "arch_args": {"width": 4}, "optimizer": "sgd", "lr": 0.1},
        "vit": {"arch": "vit", "arch_args": TINY_VIT, "grad_clip": 1.0},
        "deit": {"arch": "deit", "arch_args": TINY_VIT},
    },
    "budget": {"batch_size": 8},
    "train": {"augment": {"crop_padding": 1, "hflip": True}},
}


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory) -> tuple[int, str, pd.DataFrame, Path]:
    """`study bench` on the tiny study once: (exit status, stdout, CSV table, folder)."""
    folder = tmp_path_factory.mktemp("bench")
    (folder / "params.yaml").write_text(yaml.safe_dump(TINY_PARAMS))
    out = folder / "out" / "bench.csv"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = main(["bench", "--params", str(folder / "params.yaml"), "--steps", "2", "--warmup-steps", "1",
                       "--repeats", "1", "--workers", "0", "--images", "16", "--out", str(out)])
    return status, stdout.getvalue(), pd.read_csv(out), folder


def test_every_model_has_a_study_and_a_usual_row(bench_run):
    status, printed, table, _ = bench_run
    assert status == 0
    assert sorted(table["model"].unique()) == ["deit", "resnet", "vit"]
    for _, rows in table.groupby("model"):
        assert sorted(rows["path"]) == [STUDY, USUAL]
        assert rows.loc[rows["path"] == USUAL, "workers"].tolist() == [0]
    for name in ("resnet", "vit", "deit"):
        assert f"{name} " in printed
    assert printed.strip().splitlines()[-1].startswith("bench: ")


def test_throughput_memory_and_mfu_are_sane(bench_run):
    _, _, table, _ = bench_run
    assert (table["images_per_s"] > 0).all()
    assert table["ms_per_step"].to_numpy() == pytest.approx(1000 * 8 / table["images_per_s"].to_numpy())
    assert (table["peak_mem_mib"] > 0).all()
    assert ((table["mfu"] > 0) & (table["mfu"] <= 1)).all()
    achieved = table["train_gflop_per_image"] * table["images_per_s"]
    assert table["mfu"].to_numpy() == pytest.approx((achieved / table["peak_gflop_s"]).to_numpy())
    assert set(table["peak_dtype"]) == {"float32"}  # CPU: the peak is a float32 matmul


def test_speedup_is_study_over_usual(bench_run):
    _, _, table, _ = bench_run
    for _, rows in table.groupby("model"):
        study = rows.loc[rows["path"] == STUDY, "images_per_s"].item()
        usual = rows.loc[rows["path"] == USUAL, "images_per_s"].item()
        assert rows["speedup"].to_numpy() == pytest.approx([study / usual] * 2)


def test_train_flops_are_three_forwards_plus_the_teacher(bench_run):
    _, _, table, _ = bench_run
    vit = build_model("vit", 10, 8, 1, **TINY_VIT)
    deit = build_model("deit", 10, 8, 1, **TINY_VIT)
    teacher = build_model("resnet8", 10, 8, 1, width=4)
    per_image = table.groupby("model")["train_gflop_per_image"].unique()
    assert per_image["vit"] == pytest.approx([3 * forward_flops(vit, 8, 1) / 1e9])
    expected_deit = 3 * forward_flops(deit, 8, 1) + forward_flops(teacher, 8, 1)
    assert per_image["deit"] == pytest.approx([expected_deit / 1e9])


def test_speedup_of_several_worker_counts_uses_the_fastest_usual_row():
    rows = [{"model": "m", "path": STUDY, "images_per_s": 300.0},
            {"model": "m", "path": USUAL, "images_per_s": 100.0},
            {"model": "m", "path": USUAL, "images_per_s": 150.0}]
    assert with_speedups(rows)["speedup"].tolist() == pytest.approx([2.0, 3.0, 2.0])


def test_usual_models_are_the_same_architecture():
    shape = Shape(8, 1, 10)
    for arch, args, library_class in [("vit", TINY_VIT, timm.models.vision_transformer.VisionTransformer),
                                      ("resnet18", {}, torch.nn.Module)]:
        ours = build_model(arch, 10, 8, 1, **args)
        theirs, description = usual_model(arch, shape, args)
        assert isinstance(theirs, library_class) and type(theirs) is not type(ours), description
        assert count_parameters(theirs) == count_parameters(ours)
        assert forward_flops(theirs, 8, 1) == forward_flops(ours, 8, 1)


def test_study_step_trains_the_model():
    shape = Shape(8, 1, 10)
    images, labels = synthetic_data(16, shape)
    model = build_model("resnet8", 10, 8, 1, width=4)
    before = [p.detach().clone() for p in model.parameters()]
    recipe = Recipe("sgd", 0.1, 5e-4, 0.9, 0.999, 0.0, 0.0, 0.0)
    step = study_step(model, LabelLoss(), images, labels, augmentation=Augmentation(crop_padding=1, hflip=True),
                      num_classes=10, spec=StepSpec(recipe, total_steps=2, batch_size=8, seed=0,
                                                    device=torch.device("cpu"), channels_last=True, compile=False,
                                                    precision="auto"))
    step()
    step()
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()) if a.ndim > 1)


def test_peak_is_a_positive_float32_rate_on_cpu():
    flops, dtype = measure_peak_flops(torch.device("cpu"), size=256, repeats=2)
    assert dtype == "float32" and flops > 1e8  # any CPU of this century does 0.1 GFLOP/s


def test_unknown_model_key_is_a_one_line_error(bench_run, capsys):
    _, _, _, folder = bench_run
    assert main(["bench", "--params", str(folder / "params.yaml"), "--model", "nope"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: --model nope") and "\n" not in error
    # The same from `python -m benchmarks.study_vs_usual`, which takes the same options.
    assert study_vs_usual.main(["--params", str(folder / "params.yaml"), "--model", "nope"]) == 2
    assert capsys.readouterr().err.strip() == error


def test_precisions_side_by_side_each_against_its_own_peak(tmp_path, monkeypatch):
    """`--precision fp32 --precision bf16`: both paths at each precision, MFU against that precision's peak."""
    monkeypatch.setitem(benchmarks.measure.PEAK_SIZE, "cpu", 64)  # CPUs without native bf16 take ~17 s a 2048² try
    raw = {**TINY_PARAMS, "baselines": ["vit"], "distill": [], "models": {"vit": TINY_PARAMS["models"]["vit"]}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    out = tmp_path / "bench.csv"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = main(["bench", "--params", str(tmp_path / "params.yaml"), "--precision", "fp32", "--precision",
                       "bf16", "--steps", "1", "--warmup-steps", "1", "--repeats", "1", "--workers", "0",
                       "--images", "16", "--out", str(out)])
    assert status == 0 and ", fp32 and bf16: vit fp32 " in stdout.getvalue().strip().splitlines()[-1]
    table = pd.read_csv(out)
    assert sorted(zip(table["peak_dtype"], table["path"])) == [("bfloat16", STUDY), ("bfloat16", USUAL),
                                                               ("float32", STUDY), ("float32", USUAL)]
    assert set(table.loc[table["peak_dtype"] == "bfloat16", "precision"]) == {"bf16 autocast"}  # both paths autocast
    for _, rows in table.groupby("peak_dtype"):  # each precision's speed-up is within that precision
        study, usual = (rows.loc[rows["path"] == p].iloc[0] for p in (STUDY, USUAL))
        assert usual["speedup"] == pytest.approx(study["images_per_s"] / usual["images_per_s"])
        assert study["mfu"] == pytest.approx(study["achieved_gflop_s"] / study["peak_gflop_s"])
    assert "float32 matmul" in stdout.getvalue() and "bfloat16 matmul" in stdout.getvalue()


# --- what augmentation costs: `study bench --augment-cost` ------------------------------------------------


def test_speedups_and_augment_cost_of_an_augmented_study_row():
    rows = [{"model": "m", "path": STUDY, "images_per_s": 300.0},
            {"model": "m", "path": STUDY_AUGMENTED, "images_per_s": 200.0},
            {"model": "m", "path": USUAL, "images_per_s": 100.0}]
    table = with_speedups(rows)
    assert table["speedup"].tolist() == pytest.approx([3.0, 2.0, 3.0])  # study rows: over the fastest usual
    assert table["augment_cost_pct"].iloc[1] == pytest.approx(50.0)  # 1/200 s per image is 50% over 1/300
    assert table["augment_cost_pct"].drop(index=1).isna().all()


@pytest.mark.slow
def test_bench_times_each_model_with_heavy_augmentation_too(tmp_path, capsys):
    tiny_vit = {"patch_size": 4, "embed_dim": 16, "depth": 1, "num_heads": 2, "mlp_ratio": 2.0}
    raw = {"data": {"dataset": "digits"}, "fractions": [1.0], "seeds": [0], "baselines": ["resnet", "vit"], "distill": [],
           "models": {"resnet": {"arch": "resnet8", "arch_args": {"width": 4}, "optimizer": "sgd", "lr": 0.1},
                      "vit": {"arch": "vit", "arch_args": tiny_vit, "augment": {"hflip": True}}},
           "budget": {"batch_size": 8}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    out = tmp_path / "bench.csv"
    assert main(["bench", "--params", str(tmp_path / "params.yaml"), "--steps", "2", "--warmup-steps", "1",
                 "--repeats", "1", "--workers", "0", "--images", "16", "--augment-cost", "--out", str(out)]) == 0
    assert "heavy augmentation costs resnet +" in capsys.readouterr().out
    table = pd.read_csv(out)
    for model, own in (("resnet", Augmentation()), ("vit", Augmentation(hflip=True))):
        rows = table[table["model"] == model].set_index("path")
        assert json.loads(rows.loc["study", "augment"]) == own.as_dict()  # each model's own augmentation
        assert json.loads(rows.loc["usual", "augment"]) == own.as_dict()
        assert json.loads(rows.loc[STUDY_AUGMENTED, "augment"]) == heavy_augmentation(8).as_dict()
        assert rows.loc[STUDY_AUGMENTED, "images_per_s"] > 0 and pd.notna(rows.loc[STUDY_AUGMENTED, "augment_cost_pct"])
