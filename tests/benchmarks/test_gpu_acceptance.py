"""`study gpu-acceptance --smoke`: the GPU acceptance at toy size on CPU, so that it cannot rot before a GPU comes.

One run of every step (the headline models and the smoke preset's benched, one training stage of the smoke
study through `dvc repro` in a scratch copy, and a second `dvc repro` stopped at its time limit), then checks on
the tables it wrote; and the verdict rules on made-up GPU rows.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from types import SimpleNamespace

from torch.autograd import DeviceType

from benchmarks import profile as bench_profile
from benchmarks.acceptance import device_runs, scratch_repro
from benchmarks.acceptance import steps as acc
from benchmarks.acceptance.sizes import SMOKE
from study.core.cli import main
from study.presets import preset_text

ROOT = Path(__file__).resolve().parents[2]


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
    assert {p.name for p in out.iterdir()} == {"acceptance.md", "bench.csv", "variants.csv", "startup.csv",
                                               "profile.csv", "kernels.csv", "stages.csv", "studies.csv",
                                               "device-runs.csv", "device.json", "dvc-default-study.log",
                                               "dvc-gpu-preset.log", "default-study-outputs.tar.gz",
                                               "gpu-preset-outputs.tar.gz", "dvc-cells.log", "cells-outputs.tar.gz",
                                               "dvc-ladder-preset.log", "ladder-preset-outputs.tar.gz"}
    # The device tool brings back at most 8 files from $OUT, and each step is one device call (all of them would
    # not fit its 10 minutes): every step's own files fit.
    per_step = {"bench": {"bench.csv"}, "bench-presets": {"bench.csv"}, "steps": {"variants.csv"},
                "startup": {"startup.csv"}, "profile": {"profile.csv", "kernels.csv"},
                "default-study": {"stages.csv", "studies.csv", "device-runs.csv", "dvc-default-study.log",
                                  "default-study-outputs.tar.gz"},
                **{step: {"stages.csv", "studies.csv", "device-runs.csv", f"dvc-{step}.log", f"{step}-outputs.tar.gz"}
                   for step in ("cells", "gpu-preset", "ladder-preset")}}
    assert set(per_step) == set(acc.STEPS)
    assert all(len(files | {"acceptance.md", "device.json"}) <= 8 for files in per_step.values())


def test_every_step_variant_runs_for_every_model(smoke_run):
    """The study's step beside the plain, host-indexed, captured (eagerly on a CPU) and compiled ones: on CPU the
    smoke run compiles nothing, so four variants per model and group, each with a speed and no error."""
    variants = pd.read_csv(smoke_run[1] / "variants.csv")
    assert set(variants["step"]) == {"steps-headline", "steps-default"}
    assert variants["error"].isna().all()
    assert (variants["images_per_s"] > 0).all()
    for (group, model, augment), rows in variants.groupby(["group", "model", "augment"]):
        assert list(rows["variant"]) == ["plain eager", "study eager, host indices", "study eager", "study graph"]
    assert set(variants.loc[variants["group"] == "headline", "augment"]) == {"none", "crop 4+flip"}
    startup = pd.read_csv(smoke_run[1] / "startup.csv")
    assert list(startup["command"]) == ["python -c 'import torch'", "study train --help"]
    assert (startup["median_s"] > 0).all()
    runs = pd.read_csv(smoke_run[1] / "device-runs.csv")
    default = runs[runs["step"] == "default-study"]
    assert len(default) == 1 and (default["graph"] == "off").all() and (default["images_per_s"] > 0).all()


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
    # The scratch copy is deleted; what the study wrote comes back in one archive (no weights).
    with tarfile.open(out / "default-study-outputs.tar.gz") as tar:
        names = tar.getnames()
    assert {"params.yaml", "dvc.lock"} <= set(names)
    assert "runs/resnet/f0.5_s0/metrics.json" in names and not any(n.endswith(".pt") for n in names)


def test_the_profile_times_each_headline_model_and_sees_no_kernels_on_a_cpu(smoke_run):
    out = smoke_run[1]
    summary, kernels = pd.read_csv(out / "profile.csv"), pd.read_csv(out / "kernels.csv")
    assert list(summary["model"]) == [m.name for m in acc.HEADLINE]
    assert (summary["wall_ms_per_step"] > 0).all() and (summary["steps"] == SMOKE.profile_steps).all()
    assert summary["gpu_busy_pct"].isna().all() and kernels.empty  # a CPU has no device timeline
    assert "No device kernels were recorded" in (out / "acceptance.md").read_text()


# Kernel names as torch.profiler reported them on an H200 (PyTorch 2.11, cuDNN 9), docs/gpu/h200-2026-11-26/kernels.csv.
@pytest.mark.parametrize("name, kind", [
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x64x64", "attention"),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", "convolution"),
    ("sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwc", "convolution"),
    ("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT", "matmul"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", "optimizer"),
    ("triton_per_fused__to_copy_add_native_layer_norm_backward_view_7", "normalisation"),
    ("triton_poi_fused_gelu_gelu_backward_view_10", "fused elementwise (compiled)"),
    ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float>>", "other"),
])
def test_kernels_are_sorted_into_kinds_by_name(name, kind):
    assert bench_profile.kernel_kind(name) == kind


def test_only_device_kernels_count_as_busy_time():
    """Operators and user annotations (the optimiser's step is one, drawn on the device's timeline around its
    kernels) would count the kernels' time twice."""
    def event(key, device, us, annotation=False):
        return SimpleNamespace(key=key, count=2, device_type=device, self_device_time_total=us,
                               is_user_annotation=annotation)

    prof = SimpleNamespace(key_averages=lambda: [
        event("aten::mm", DeviceType.CPU, 0), event("nvjet_sm90_tst", DeviceType.CUDA, 300.0),
        event("Optimizer.step#AdamW.step", DeviceType.CUDA, 100.0, annotation=True),
        event("multi_tensor_apply_kernel", DeviceType.CUDA, 80.0), event("idle", DeviceType.CUDA, 0.0)])
    table = bench_profile._device_events(prof)
    assert list(table["kernel"]) == ["nvjet_sm90_tst", "multi_tensor_apply_kernel"]
    assert table["us"].sum() == 380.0


def test_the_profile_section_reads_busy_against_wall_on_a_gpu():
    summary = pd.DataFrame({"model": ["ViT-Tiny/4"], "batch_size": [512], "steps": [20], "wall_ms_per_step": [40.0],
                            "gpu_busy_ms_per_step": [10.0], "gpu_busy_pct": [25.0], "kernels_per_step": [800.0],
                            "ms matmul": [4.0], "ms attention": [1.0]})
    kernels = pd.DataFrame({"model": ["ViT-Tiny/4"], "kind": ["matmul"], "kernel": ["nvjet_sm90_tst"],
                            "calls_per_step": [36.0], "ms_per_step": [0.5], "pct_of_busy": [5.0]})
    text = "\n".join(acc.profile_section(summary, kernels))
    assert "| ViT-Tiny/4 | 512 | 40.00 | 10.00 | 25.00 | 800.00 |" in text
    assert "| model | matmul | attention |" in text and "nvjet_sm90_tst" in text


def test_the_report_gives_the_tables_and_no_verdict_on_a_cpu(smoke_run):
    text = (smoke_run[1] / "acceptance.md").read_text()
    assert "## Training step" in text and "## The studies end to end, timed per stage" in text
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
    (tmp_path / "params.yaml").write_text(preset_text(ROOT, "smoke"))
    monkeypatch.chdir(tmp_path)
    assert main(["gpu-acceptance", "--smoke", "--out", str(tmp_path / "out"), "--step", "bench"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: no dvc.yaml") and not (tmp_path / "out").exists()


def test_without_git_the_scratch_copy_is_a_dvc_project_without_scm(tmp_path, monkeypatch):
    """The device image may lack git: the copy then runs DVC with core.no_scm, and leaves outputs behind."""
    which = scratch_repro.shutil.which
    monkeypatch.setattr(scratch_repro.shutil, "which",
                        lambda name, path=None: None if name == "git" else which(name, path=path))
    smoke = preset_text(ROOT, "smoke")
    project = scratch_repro.scratch_copy(ROOT, tmp_path / "copy", smoke, None, "data/raw")
    assert not (project / ".git").exists() and not (project / "dvc.lock").exists()
    assert not {"runs", "reports", ".venv", ".kit"} & {p.name for p in project.iterdir()}
    assert (project / "params.yaml").read_text() == smoke
    assert "train@resnet-0.5-0" in scratch_repro._run_dvc(project, "stage", "list", "--name-only").split()


def test_folders_of_separate_calls_merge_into_one_report(smoke_run, tmp_path):
    """One device call per step, each with its own $OUT: --merge puts them back together."""
    out = smoke_run[1]
    names = ("bench.csv", "variants.csv", "startup.csv", "profile.csv", "kernels.csv", "stages.csv", "studies.csv",
             "device-runs.csv")
    labels = {label for name in names for label in pd.read_csv(out / name)["step"]}  # steps, groups of steps
    assert labels == set(acc.STEPS) - {"steps"} | {"steps-headline", "steps-default"}
    calls = []
    expanded = {"steps": ["steps-headline", "steps-default"]}  # the order the steps step writes its groups in
    for label in [label for step in acc.STEPS for label in expanded.get(step, [step])]:  # one call each
        folder = tmp_path / label
        folder.mkdir()
        (folder / "device.json").write_text((out / "device.json").read_text())
        for name in names:
            table = pd.read_csv(out / name)
            if label in set(table["step"]):
                table[table["step"] == label].to_csv(folder / name, index=False)
        calls.append(folder)
    merged = tmp_path / "merged"
    args = [a for folder in calls for a in ("--merge", str(folder))]
    assert main(["gpu-acceptance", "--out", str(merged), *args]) == 0
    for name in set(names) - {"kernels.csv"}:  # on a CPU the profiler records no device kernels: no rows to merge
        ours, theirs = pd.read_csv(merged / name), pd.read_csv(out / name)
        # steps add columns in call order; a step without a column leaves it empty
        ours, theirs = (t[sorted(t.columns)].astype(object).fillna("-").astype(str) for t in (ours, theirs))
        assert sorted(map(tuple, ours.values)) == sorted(map(tuple, theirs.values)), name
    assert (merged / "acceptance.md").read_text() == (out / "acceptance.md").read_text()
    assert main(["gpu-acceptance", "--out", str(merged), "--merge", str(tmp_path / "nothing")]) == 2


# Two lines of the train stage's summary as the H200 run wrote them, and a budget check's longer run (left out).
_LOG = "\n".join([
    "Running stage 'train@resnet-0.0025-0':",
    "train: resnet fraction 0.0025 seed 0: test top-1 0.6499 after 300 steps x 128 (274.3 epochs of 140 images) "
    "in 2s, 19171 img/s on NVIDIA H200",
    "Running stage 'train@vit-0.04-1':",
    "train: vit fraction 0.04 seed 1: test top-1 0.7866 after 535 steps x 128 (30.0 epochs of 2280 images) "
    "in 8s, 8641 img/s on NVIDIA H200",
    "train: vit fraction 0.04 seed 1 (budget x2): test top-1 0.7900 after 1070 steps x 128 (60.0 epochs of 2280 "
    "images) in 15s, 8641 img/s on NVIDIA H200", ""])

def test_the_gpu_runs_are_read_from_the_train_stages_summaries():
    runs = device_runs.runs_from_log(_LOG)
    assert runs.to_dict("records") == [
        {"model": "resnet", "fraction": 0.0025, "seed": 0, "test_top1": 0.6499, "train_seconds": 2},
        {"model": "vit", "fraction": 0.04, "seed": 1, "test_top1": 0.7866, "train_seconds": 8}]


def test_gpu_and_cpu_runs_are_paired_and_compared_per_model_with_holm():
    rng = np.random.default_rng(0)
    keys = [(m, f, s) for m in ("resnet", "vit") for f in (0.01, 0.02, 0.04) for s in range(3)]
    cpu = pd.DataFrame([{"model": m, "fraction": f, "seed": s, "test_top1": 0.7 + f} for m, f, s in keys])
    shift = {"resnet": 0.0, "vit": 0.03}  # the ViT's GPU runs 3 points better, the ResNet's the same
    gpu = cpu.assign(test_top1=[t + shift[m] + rng.normal(0, 0.002) for m, t in zip(cpu["model"], cpu["test_top1"])],
                     train_seconds=1).iloc[:-1]  # one run still unfinished on the GPU
    pairs = device_runs.paired_runs(gpu, cpu)
    assert len(pairs) == 17 and np.allclose(pairs["diff_points"], 100 * (pairs["gpu_top1"] - pairs["cpu_top1"]))
    summary = device_runs.compare(pairs, 0.95).set_index("model")
    assert summary.loc["vit", "significant"] and np.isnan(summary.loc["vit", "equivalence_bound"])
    assert summary.loc["vit", "low"] > 2.5 and summary.loc["vit", "high"] < 3.5
    resnet = summary.loc["resnet"]
    assert not resnet["significant"] and resnet["equivalence_bound"] == max(-resnet["low"], resnet["high"]) < 0.5
    assert {summary.loc[m, "confidence"] for m in summary.index} <= {0.975, 0.95}  # Holm over 2 models
    assert summary.loc["resnet", "runs"] == 9 and summary.loc["vit", "runs"] == 8


def test_the_merge_sets_the_gpu_runs_beside_the_cpu_runs(tmp_path, monkeypatch):
    call = tmp_path / "call"
    call.mkdir()
    (call / "device.json").write_text('{"device": "cuda", "name": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0", '
                                      '"python": "3.12.3", "threads": 2}')
    (call / "dvc-default-study.log").write_text(_LOG)
    pd.DataFrame({"stage": ["train@resnet-0.0025-0", "train@vit-0.04-1"], "seconds": [10.0, 14.0],
                  "status": ["done", "done"], "step": "default-study"}).to_csv(call / "stages.csv", index=False)
    pd.DataFrame([{"seconds": 24.0, "returncode": 0, "stopped": False, "time_limit": 60.0, "stages_started": 2,
                   "stages_done": 2, "stages_in_pipeline": 2, "targets": "all", "params": "params.yaml",
                   "step": "default-study"}]).to_csv(call / "studies.csv", index=False)
    cpu = pd.DataFrame({"model": ["resnet", "vit"], "fraction": [0.0025, 0.04], "seed": [0, 1],
                        "test_top1": [0.66, 0.78]})
    cpu.to_csv(tmp_path / "runs.csv", index=False)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "merged"
    assert main(["gpu-acceptance", "--out", str(out), "--merge", str(call), "--compare-runs",
                 str(tmp_path / "runs.csv")]) == 0
    text = (out / "acceptance.md").read_text()
    assert "## The default study's runs: GPU against CPU" in text
    assert "| resnet | 1 | 64.99 | 66.00 | -1.01 | – | – | 1.01 |" in text  # one run: nothing inferred
    assert "A train stage took 12.0 s of wall time on average (2 stages), of which the run's own training" in text
    assert "took 5.0 s; the other 7.0 s" in text
    assert main(["gpu-acceptance", "--out", str(out), "--compare-runs", str(tmp_path / "runs.csv")]) == 2
    assert main(["gpu-acceptance", "--out", str(out), "--merge", str(call), "--compare-runs",
                 str(tmp_path / "missing.csv")]) == 2


@pytest.mark.parametrize("run", ["h200-2026-11-26", "h100-2026-11-27"])
def test_the_committed_gpu_report_is_what_its_tables_render(run, tmp_path):
    """Each acceptance.md under docs/gpu/ (quoted in docs/gpu/README.md) stays what the current code makes of its CSVs."""
    committed = ROOT / "docs" / "gpu" / run
    copy = tmp_path / "gpu"
    shutil.copytree(committed, copy)
    (copy / "acceptance.md").unlink()
    assert acc.render(copy).read_text() == (committed / "acceptance.md").read_text()
    accuracy = pd.read_csv(committed / "accuracy.csv")
    pairs = pd.read_csv(committed / "runs.csv")
    recomputed = device_runs.compare(pairs, 0.95)
    pd.testing.assert_frame_equal(recomputed, accuracy, check_dtype=False)


def test_study_run_lines_give_each_stage_its_time_and_failures():
    import io

    lines = io.StringIO("run: 3 stage(s) to check or run\n"
                        "prepare (12 s): prepare: fashionmnist ...\n"
                        "train@vit-0.5-0: FAILED; skipping 2 stage(s) downstream\n"
                        "train@resnet-0.5-0 (7 s): train: resnet fraction 0.5 seed 0: test top-1 0.9\n"
                        "train@vit-0.5-1 (cell train@vit-0.5-0+1) (9 s): train: vit fraction 0.5 seeds 0, 1 as one cell\n")
    starts, finished = [], []
    scratch_repro._read_stages(lines, io.StringIO(), starts, 0.0, finished)
    assert starts == []
    assert [(r["stage"], r["status"]) for r in finished] == [
        ("prepare", "done"), ("train@vit-0.5-0", "failed"), ("train@resnet-0.5-0", "done"), ("train@vit-0.5-1", "done")]
    assert finished[3]["seconds"] == 9.0
    assert finished[0]["seconds"] == 12.0 and math.isnan(finished[1]["seconds"])


def test_the_whole_range_tables_are_what_its_archived_runs_give(tmp_path):
    """docs/gpu/h200-2026-11-28: the H200's whole-range run was stopped at its limit; the curves and budget-check
    tables beside it are the study's own stages run on the metrics it archived (without DeiT's one run at 20%,
    a cell of one seed; the budget check without the DeiT, whose 20% runs did not finish)."""
    folder = ROOT / "docs" / "gpu" / "h200-2026-11-28"
    with tarfile.open(folder / "gpu-preset-outputs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    shutil.rmtree(tmp_path / "runs" / "deit" / "f0.2_s0")
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert params["fractions"] == [0.0025, 0.01, 0.04, 0.2, 1.0] and len(params["seeds"]) == 8
    no_student = tmp_path / "no_student.yaml"
    no_student.write_text(yaml.safe_dump({**params, "distill": []}))
    runs, runs_2x = str(tmp_path / "runs"), str(tmp_path / "runs_2x")
    assert main(["curves", "--params", str(tmp_path / "params.yaml"), "--runs", runs, "--figures",
                 str(tmp_path / "figures"), "--tables", str(tmp_path / "curves")]) == 0
    assert main(["budget-check", "--params", str(no_student), "--runs", runs, "--runs-2x", runs_2x, "--figures",
                 str(tmp_path / "figures"), "--tables", str(tmp_path / "budget_check")]) == 0
    for table in ("curves/gaps.csv", "curves/gap_trends.csv", "curves/data_efficiency.csv",
                  "budget_check/budget_check.csv", "budget_check/runs.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / table), pd.read_csv(folder / table))
    gaps = pd.read_csv(folder / "curves" / "gaps.csv").set_index(["comparison", "train_images"])
    assert gaps.loc[("vit - resnet", 57000), "adj_ci_high"] < 0  # the ResNet still leads at all 57,000 images


def test_the_cells_step_trains_one_cell_of_the_smoke_study_as_one_step(smoke_run):
    """The cell path at smoke size: `study run` joins the first cell's three seeds into one float32 step; each seed
    writes its run, recording the cell it trained in."""
    out = smoke_run[1]
    runs = pd.read_csv(out / "device-runs.csv")
    cells = runs[runs["step"] == "cells"]
    assert sorted(cells["seed"]) == [0, 1, 2] and set(cells["model"]) == {"resnet"}
    assert (cells["cell_seeds"] == 3).all() and (cells["precision"] == "fp32").all()
    assert cells["train_seconds"].nunique() == 1  # one step for the three: one clock
    assert (runs.loc[runs["step"] == "default-study", "cell_seeds"] == 1).all()
    stages = pd.read_csv(out / "stages.csv")
    trained = stages[(stages["step"] == "cells") & stages["stage"].str.startswith("train@")]
    assert sorted(trained["stage"]) == [f"train@resnet-0.5-{s}" for s in range(3)] and (trained["status"] == "done").all()
    text = (out / "acceptance.md").read_text()
    assert "## A cell's seeds in one step against one seed per step" in text
    studies = pd.read_csv(out / "studies.csv").set_index("step")
    assert studies.loc["cells", "returncode"] == 0 and studies.loc["ladder-preset", "stopped"]
