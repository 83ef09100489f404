"""The GPU acceptance's steps: what each measures, the targets it is judged by, and acceptance.md rendered from
the folder of results (every step's rows, from one call or several merged).

The steps and their order are :data:`STEPS` (:mod:`benchmarks.acceptance` describes each); their sizes live in
:mod:`benchmarks.acceptance.sizes`, their targets here (docs/gpu/README.md, "The targets").
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
from pathlib import Path

import pandas as pd
import torch

from benchmarks.acceptance.sizes import BenchSize
from benchmarks.measure import measure_peak_flops
from benchmarks.step_variants import bench_variants
from benchmarks.study_vs_usual import run_benchmark
from benchmarks.table import STUDY
from benchmarks.workload import BenchModel, Shape
from study.core.errors import StudyError
from study.core.io import atomic_path, read_json, write_json, write_text
from study.outputs.tables import markdown_table
from study.train.augment import Augmentation

STEPS = ("bench", "bench-presets", "steps", "startup", "profile", "default-study", "cells", "gpu-preset",
         "ladder-preset")
BENCH_STEPS, VARIANTS_STEP, STARTUP_STEP, PROFILE_STEP, STUDY_STEPS = STEPS[:2], STEPS[2], STEPS[3], STEPS[4], STEPS[5:]
CELLS_STEP = "cells"
# The headline models and the targets the GPU acceptance checks (docs/gpu/README.md, "The targets"): MFU
# against the measured bf16 peak, and img/s against the usual DataLoader recipe in the same run; the default
# study end to end.
HEADLINE_SHAPE = Shape(image_size=32, in_chans=3, num_classes=10)
HEADLINE = (BenchModel("ResNet-18 (3x3 stem)", "resnet18"), BenchModel("ViT-Tiny/4", "vit"))
MFU_TARGET = {"ResNet-18 (3x3 stem)": 0.35, "ViT-Tiny/4": 0.25}
SPEEDUP_TARGET = 3.0
# The default study end to end on one H100 or H200 with `study run --jobs N`: its training is under a minute of GPU
# work (about 3.2 M training images at 80,000-200,000 img/s), so 3 minutes leave 2 for process start, evaluation
# and DVC's bookkeeping.
DEFAULT_STUDY_SECONDS_TARGET = 180.0


# --- benchmarks --------------------------------------------------------------------------------------------


def bench_groups(groups: list[tuple[str, Shape, list[BenchModel]]], size: BenchSize, device: torch.device,
                 precision: str) -> pd.DataFrame:
    """Both paths for every model, one :func:`run_benchmark` per input shape; ``group`` names where a model
    comes from (the headline pair or a preset)."""
    tables = []
    for name, shape, models in groups:
        table = run_benchmark(models, shape, batch_size=size.batch_size, steps=size.steps,
                              warmup_steps=size.warmup_steps, repeats=size.repeats, workers=list(size.workers),
                              device=device, images=size.images, compile_model=size.compile_model,
                              peak_size=size.peak_size, precision=precision)
        shown = f"{shape.in_chans}x{shape.image_size}x{shape.image_size}"
        tables.append(table.assign(group=name, input=shown, classes=shape.num_classes))
    return pd.concat(tables, ignore_index=True)


# --- the study's step against plain, captured and compiled steps ------------------------------------------------

# The step's targets on one H100 or H200 (docs/gpu/README.md, "The targets"): img/s of the study's fastest step
# (graph, or graph + compile), with MFU against the measured bf16 peak where given. The default models' speeds are
# those that keep the default study's training under a minute of GPU work (above); the headline models' hold the
# study's step to a CIFAR-sized ResNet-18 and ViT-Tiny/4. The default study's models are judged in its stages too.
VARIANT_TARGETS = {
    ("headline", "ResNet-18 (3x3 stem)"): (80_000, 0.33),
    ("headline", "ViT-Tiny/4"): (50_000, 0.14),
    ("default", "resnet"): (150_000, None),
    ("default", "vit"): (80_000, None),
}
# The CIFAR ResNet's augmentation (crop after 4 px of padding, flip): the study's own for the headline models.
HEADLINE_AUGMENTATION = Augmentation(crop_padding=4, hflip=True)


def variant_groups(default_models: list[BenchModel], default_shape: Shape, default_batch: int,
                   headline_batch: int, compile_models: bool) -> list[tuple[str, Shape, list[BenchModel], int, tuple[str, ...]]]:
    """(group, shape, models, batch, models compiled) of the ``steps`` step: the headline pair with the study's
    crop and flip, and without augmentation, and the default study's own models. Compiling takes up to a minute
    per model, so only the models whose targets need it are compiled, and none when ``compile_models`` is off."""
    augmented = [dataclasses.replace(m, augmentation=HEADLINE_AUGMENTATION) for m in HEADLINE]
    headline_compiled = tuple(m.name for m in HEADLINE) if compile_models else ()
    default_compiled = ("vit",) if compile_models else ()
    return [("headline", HEADLINE_SHAPE, augmented, headline_batch, headline_compiled),
            ("headline", HEADLINE_SHAPE, list(HEADLINE), headline_batch, ()),
            ("default", default_shape, default_models, default_batch, default_compiled)]


def bench_variant_groups(groups, size: BenchSize, device: torch.device, precision: str) -> pd.DataFrame:
    peak, dtype = measure_peak_flops(device, size.peak_size, precision=precision)
    tables = [bench_variants(models, shape, batch_size=batch, steps=size.steps, warmup_steps=size.warmup_steps,
                             repeats=size.repeats, images=max(size.images, 2 * batch), device=device,
                             peak_flops=peak, precision=precision, compiled_models=compiled).assign(group=name)
              for name, shape, models, batch, compiled in groups]
    return pd.concat(tables, ignore_index=True).assign(peak_tflop_s=peak / 1e12, peak_dtype=dtype)


def variants_section(table: pd.DataFrame, gpu: bool) -> list[str]:
    ok = _errors(table) == ""
    shown = pd.DataFrame({
        "group": table["group"], "model": table["model"], "input": table["input"], "batch": table["batch_size"],
        "augment": table["augment"], "variant": table["variant"],
        "img/s": [f"{v:,.0f}" if k else "failed" for v, k in zip(table["images_per_s"], ok)],
        "ms/step": table["ms_per_step"].round(2), "MFU %": (100 * table["mfu"]).round(1),
        "error": _errors(table),
    })
    peak = table["peak_tflop_s"].iloc[0]
    lines = ["## The study's step against plain, captured and compiled steps", "",
             f"Same model, weights and synthetic data per row, data on the device; MFU against {peak:.1f} TFLOP/s "
             f"({table['peak_dtype'].iloc[0]}) measured in the same run. `plain eager`: a fixed batch, no gather, "
             "augmentation or schedule; `study eager`: the study's step (`train.graph: off`); `study graph`: the same "
             "step as one CUDA graph; `+ compile`: with `torch.compile` inside the graph.", "",
             markdown_table(shown, digits=2), ""]
    if gpu:
        lines += ["Targets: " + "; ".join(_variant_verdict(table, key, target) for key, target in
                                          VARIANT_TARGETS.items()), ""]
    return lines


def _errors(table: pd.DataFrame) -> pd.Series:
    """The error column as text: read back from CSV, a column with no error is all NaN (floats)."""
    return table["error"].astype(object).where(table["error"].notna(), "")


def _variant_verdict(table: pd.DataFrame, key: tuple[str, str], target: tuple[float, float | None]) -> str:
    group, model = key
    rows = table[(table["group"] == group) & (table["model"] == model) & table["variant"].str.startswith("study graph")
                 & (_errors(table) == "")]
    if group == "headline":
        rows = rows[rows["augment"] != "none"]
    if rows.empty:
        return f"{model} not measured"
    best = rows.loc[rows["images_per_s"].idxmax()]
    speed, mfu = target
    ok = best["images_per_s"] >= speed and (mfu is None or best["mfu"] >= mfu)
    shown_mfu = f" (target {100 * mfu:.0f}% MFU: {100 * best['mfu']:.1f}%)" if mfu else ""
    return (f"{model} {best['images_per_s']:,.0f} img/s by {best['variant']} (target {speed:,}){shown_mfu}: "
            f"{'met' if ok else 'not met'}")


# In-stage targets for the default study's models on the GPU (img/s of a run's own steps, its metrics.json).
IN_STAGE_TARGETS = {"vit": 80_000, "resnet": 150_000}


def device_runs_section(runs: pd.DataFrame, gpu: bool) -> list[str]:
    """Per model, how fast the study's runs trained inside their stages: the images/s of each run's own steps."""
    if "budget_factor" not in runs:  # a call that finished no run
        return []
    if "step" in runs:  # the cell path's runs have their own section
        runs = runs[runs["step"] != CELLS_STEP]
    runs = runs[runs["budget_factor"] == 1.0]
    if runs.empty:
        return []
    by_model = runs.groupby("model", sort=False).agg(
        runs=("run", "size"), steps=("steps", "median"), train_s=("train_seconds", "median"),
        median_img_s=("images_per_s", "median"), best_img_s=("images_per_s", "max"), graph=("graph", "first"),
    ).reset_index()
    lines = ["## The default study's runs: in-stage training speed", "",
             "Each run's own optimiser steps, as the run recorded them: images seen over `train_seconds`, which "
             "include the graph's capture and leave out evaluation and process start; at the study's budget.", "",
             markdown_table(by_model.round(1), digits=1), ""]
    verdicts = []
    for model, target in IN_STAGE_TARGETS.items():
        row = by_model[by_model["model"] == model]
        if len(row):
            best = row.iloc[0]["median_img_s"]
            verdicts.append(f"{model} median {best:,.0f} img/s (target {target:,}): {'met' if best >= target else 'not met'}")
    return lines + (["Targets: " + "; ".join(verdicts), ""] if verdicts and gpu else [])


def cells_section(runs: pd.DataFrame) -> list[str]:
    """Per model, the in-stage img/s of the default study's runs one seed per step (the default-study step) beside
    the same runs with each cell's seeds in one vmapped step (the cells step): whether the device gains from cells."""
    if "step" not in runs or "cell_seeds" not in runs:
        return []
    runs = runs[runs["budget_factor"] == 1.0]
    cells, alone = runs[runs["step"] == CELLS_STEP], runs[runs["step"] == "default-study"]
    if cells.empty:
        return []
    by_model = cells.groupby("model", sort=False).agg(
        runs=("run", "size"), seeds_per_step=("cell_seeds", "max"), precision=("precision", "first"),
        cell_img_s=("images_per_s", "median")).reset_index()
    by_model["cell_total_img_s"] = by_model["cell_img_s"] * by_model["seeds_per_step"]
    by_model["one_seed_img_s"] = by_model["model"].map(alone.groupby("model")["images_per_s"].median())
    by_model["ratio"] = by_model["cell_total_img_s"] / by_model["one_seed_img_s"]
    return ["## A cell's seeds in one step against one seed per step", "",
            "Each run's own steps as it recorded them (images seen over `train_seconds`). Every seed of a cell "
            "records the cell's time, so `cell_img_s` is one seed's share and `cell_total_img_s` the cell's, all "
            "its seeds together; `one_seed_img_s`: the median of the default-study step's runs of the same model "
            "(empty where that step did not run into this folder); `ratio`: the cell's total over one seed's.", "",
            markdown_table(by_model.round(2), digits=2), ""]


def startup_section(table: pd.DataFrame) -> list[str]:
    shown = table.assign(median_s=table["median_s"].round(2), ratio=table["ratio_to_import_torch"].round(2))
    return ["## Process start", "", "Each command's median wall time over interleaved rounds (every DVC stage is a "
            "new process and pays it).", "", markdown_table(shown[["command", "median_s", "ratio", "all_s"]],
                                                            digits=2), ""]


# --- the folder of results -----------------------------------------------------------------------------------


def merge_csv(path: Path, table: pd.DataFrame, step: str) -> pd.DataFrame:
    """``path`` with its rows of ``step`` replaced by ``table``'s."""
    table = table.assign(step=step)
    if path.exists():
        earlier = pd.read_csv(path)
        table = pd.concat([earlier[earlier["step"] != step], table], ignore_index=True)
    with atomic_path(path) as tmp:
        table.to_csv(tmp, index=False)
    return table


def merge_folders(folders: list[Path], out: Path) -> Path:
    """Put the results of separate calls (one device call per step, each with its own folder) into ``out``:
    each folder's rows replace those of the same step, its logs and device description are copied; then
    ``acceptance.md`` is rendered. Later folders win."""
    out.mkdir(parents=True, exist_ok=True)
    for folder in folders:
        if not (folder / "device.json").is_file():
            raise StudyError(f"--merge {folder}: no device.json there; give folders that `study gpu-acceptance` wrote")
        for name in ("bench.csv", "variants.csv", "startup.csv", "profile.csv", "kernels.csv", "stages.csv",
                     "studies.csv", "device-runs.csv"):
            if (folder / name).is_file():
                table = pd.read_csv(folder / name)
                for step, rows in table.groupby("step", sort=False):
                    merge_csv(out / name, rows.drop(columns="step"), step)
        for extra in [folder / "device.json", *folder.glob("dvc-*.log")]:
            if extra.resolve() != (out / extra.name).resolve():
                shutil.copy(extra, out / extra.name)
    return render(out)


def device_description(device: torch.device) -> dict:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        from study.report.provenance import cpu_description

        cpu = cpu_description()
        name = f"{cpu['model_name']} ({os.cpu_count()} logical CPUs, {cpu['torch_cpu_capability']})"
    return {"device": device.type, "name": name, "torch": torch.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version(), "threads": torch.get_num_threads()}


def write_device(out: Path, device: torch.device) -> None:
    write_json(out / "device.json", device_description(device))


def render(out: Path) -> Path:
    """``acceptance.md`` from what ``out`` holds: the tables docs/performance.md takes, with the targets."""
    parts = ["# GPU acceptance", ""]
    if (out / "device.json").exists():
        d = read_json(out / "device.json")
        parts += [f"Device: {d['name']} ({d['device']}); PyTorch {d['torch']}, CUDA {d['cuda']}, Python {d['python']}, "
                  f"{d['threads']} intra-op threads.", ""]
        if d["device"] != "cuda":
            parts += ["Not a GPU: the targets below are a GPU's, so no verdict is given.", ""]
    if (out / "bench.csv").exists():
        parts += bench_section(pd.read_csv(out / "bench.csv"), gpu=_on_gpu(out))
    if (out / "variants.csv").exists():
        parts += variants_section(pd.read_csv(out / "variants.csv"), gpu=_on_gpu(out))
    if (out / "startup.csv").exists():
        parts += startup_section(pd.read_csv(out / "startup.csv"))
    if (out / "device-runs.csv").exists():
        parts += device_runs_section(pd.read_csv(out / "device-runs.csv"), gpu=_on_gpu(out))
        parts += cells_section(pd.read_csv(out / "device-runs.csv"))
    if (out / "profile.csv").exists():
        kernels = pd.read_csv(out / "kernels.csv") if (out / "kernels.csv").exists() else pd.DataFrame()
        parts += profile_section(pd.read_csv(out / "profile.csv"), kernels)
    if (out / "stages.csv").exists() and (out / "studies.csv").exists():
        parts += study_section(pd.read_csv(out / "stages.csv"), pd.read_csv(out / "studies.csv"), gpu=_on_gpu(out))
    if (out / "runs.csv").exists() and (out / "accuracy.csv").exists():
        stages = pd.read_csv(out / "stages.csv") if (out / "stages.csv").exists() else pd.DataFrame()
        parts += comparison_section(pd.read_csv(out / "runs.csv"), pd.read_csv(out / "accuracy.csv"), stages)
    path = out / "acceptance.md"
    write_text(path, "\n".join(parts) + "\n")
    return path


def _on_gpu(out: Path) -> bool:
    return (out / "device.json").exists() and read_json(out / "device.json")["device"] == "cuda"


def bench_section(table: pd.DataFrame, gpu: bool) -> list[str]:
    peaks = table.groupby("group")[["peak_gflop_s", "peak_dtype"]].first()
    shown = pd.DataFrame({
        "group": table["group"], "model": table["model"], "input": table["input"],
        "path": [p if pd.isna(w) else f"{p}, {int(w)} workers" for p, w in zip(table["path"], table["workers"])],
        "img/s": table["images_per_s"].round(0).astype(int), "ms/step": table["ms_per_step"].round(1),
        "MFU %": (100 * table["mfu"]).round(1), "peak MiB": table["peak_mem_mib"].round(0).astype(int),
        "study/usual": table["speedup"].round(2), "precision": table["precision"],
    })
    lines = ["## Training step: the study's against the usual DataLoader recipe", "",
             f"Batch {int(table['batch_size'].iloc[0])}; memory: {table['memory'].iloc[0]}; peaks measured in the "
             "same run: " + "; ".join(f"{g} {r.peak_gflop_s / 1000:.1f} TFLOP/s ({r.peak_dtype})"
                                      for g, r in peaks.iterrows()) + ".", "",
             markdown_table(shown, digits=2), ""]
    if gpu:
        lines += ["Targets: " + "; ".join(_verdict(table, model, target) for model, target in MFU_TARGET.items()), ""]
    return lines


def _verdict(table: pd.DataFrame, model: str, mfu_target: float) -> str:
    study = table[(table["model"] == model) & (table["path"] == STUDY)]
    if study.empty:
        return f"{model} not measured"
    row = study.iloc[0]
    ok = row["mfu"] >= mfu_target and row["speedup"] >= SPEEDUP_TARGET
    return (f"{model} {100 * row['mfu']:.1f}% MFU (target {100 * mfu_target:.0f}%), {row['speedup']:.2f}x the "
            f"usual recipe (target {SPEEDUP_TARGET:.0f}x): {'met' if ok else 'not met'}")


def profile_section(summary: pd.DataFrame, kernels: pd.DataFrame) -> list[str]:
    """Busy time against wall time per model, the time by kernel kind, and each model's costliest kernels
    (``kernels`` is empty off a GPU: the profiler then sees no device kernels)."""
    shown = pd.DataFrame({"model": summary["model"], "batch": summary["batch_size"],
                          "wall ms/step": summary["wall_ms_per_step"].round(2),
                          "GPU busy ms/step": summary["gpu_busy_ms_per_step"].round(2),
                          "busy %": summary["gpu_busy_pct"].round(1),
                          "kernels/step": summary["kernels_per_step"].round(0)})
    lines = ["## Where a step's time goes (torch.profiler)", "",
             f"{int(summary['steps'].iloc[0])} study steps per model after the benchmark's warm-up, under the "
             "profiler (which slows the host: wall times here exceed the benchmark's). Busy: the sum of the GPU's "
             "kernel durations per step; wall: the host's clock around the same steps. Busy well under wall means "
             "the GPU waits for the host to launch work; busy near wall means the kernels themselves are slow for "
             "their FLOPs.", "", markdown_table(shown, digits=2), ""]
    if kernels.empty:
        return lines + ["No device kernels were recorded: not a GPU.", ""]
    kinds = [c for c in summary.columns if c.startswith("ms ")]
    by_kind = summary[["model", *kinds]].rename(columns=lambda c: c.removeprefix("ms ")).round(2)
    top = kernels.assign(kernel=kernels["kernel"].str.slice(0, 60), calls_per_step=kernels["calls_per_step"].round(1),
                         ms_per_step=kernels["ms_per_step"].round(3), pct_of_busy=kernels["pct_of_busy"].round(1))
    return lines + ["GPU time per step by kernel kind (ms):", "", markdown_table(by_kind, digits=2), "",
                    "Costliest kernels per model:", "",
                    markdown_table(top[["model", "kind", "kernel", "calls_per_step", "ms_per_step", "pct_of_busy"]],
                                   digits=3), ""]


def write_comparison(out: Path, pairs: pd.DataFrame, summary: pd.DataFrame) -> None:
    """The paired GPU and CPU runs and their per-model comparison (:mod:`benchmarks.acceptance.device_runs`)."""
    for name, table in (("runs.csv", pairs), ("accuracy.csv", summary)):
        with atomic_path(out / name) as tmp:
            table.to_csv(tmp, index=False)


def comparison_section(pairs: pd.DataFrame, summary: pd.DataFrame, stages: pd.DataFrame) -> list[str]:
    """GPU against CPU test top-1 per model, and how much of a train stage's wall time its training took."""
    shown = pd.DataFrame({
        "model": summary["model"], "runs": summary["runs"], "GPU top-1 %": summary["gpu_top1"].round(2),
        "CPU top-1 %": summary["cpu_top1"].round(2), "GPU - CPU (points)": summary["diff_points"].round(2),
        "interval": ["–" if pd.isna(lo) else f"{lo:+.2f} to {hi:+.2f} ({100 * c:.1f}%)"
                     for lo, hi, c in zip(summary["low"], summary["high"], summary["confidence"])],
        "excluded beyond": ["detected" if sig else ("–" if pd.isna(b) else f"±{b:.2f}")
                            for sig, b in zip(summary["significant"], summary["equivalence_bound"])],
        "largest single run": summary["largest_run_diff"].round(2),
    })
    lines = ["## The default study's runs: GPU against CPU", "",
             "Each finished training run of the timed `dvc repro` beside the committed CPU run of the same model, "
             "fraction and seed (bf16 autocast and other kernels on the GPU, float32 on the CPU). Mean paired "
             "difference per model with its t-interval, Holm-adjusted across the models; where it includes 0, the "
             "differences it excludes.", "", markdown_table(shown, digits=2), ""]
    if not stages.empty:
        train = stages[stages["stage"].str.startswith("train@") & (stages["status"] == "done")].reset_index(drop=True)
        keys = train["stage"].str.extract(r"train@(?P<model>[^-]+)-(?P<fraction>[\d.e-]+)-(?P<seed>\d+)$")
        timed = pd.concat([train, keys], axis=1).astype({"fraction": float, "seed": int})
        timed = timed.merge(pairs, on=["model", "fraction", "seed"])
        if len(timed):
            wall, inside = timed["seconds"].mean(), timed["train_seconds"].mean()
            lines += [f"A train stage took {wall:.1f} s of wall time on average ({len(timed)} stages), of which the "
                      f"run's own training (its summary line, whole seconds) took {inside:.1f} s; the other "
                      f"{wall - inside:.1f} s are the stage's process start (Python, imports, CUDA), data loading, "
                      "evaluation and DVC's bookkeeping.", ""]
    return lines


def study_section(stages: pd.DataFrame, studies: pd.DataFrame, gpu: bool) -> list[str]:
    lines = ["## The studies end to end, timed per stage", ""]
    jobs = studies["jobs"] if "jobs" in studies else pd.Series([float("nan")] * len(studies))
    summary = pd.DataFrame({
        "study": studies["step"], "params": studies["params"], "targets": studies["targets"],
        "command": ["dvc repro" if pd.isna(j) else f"study run --jobs {int(j)}" for j in jobs],
        "wall s": studies["seconds"].round(1),
        "stages done": [f"{int(d)} of {int(p)}" for d, p in zip(studies["stages_done"], studies["stages_in_pipeline"])],
        "ended": ["stopped at the time limit" if s else ("ok" if r == 0 else f"failed ({int(r)})")
                  for s, r in zip(studies["stopped"], studies["returncode"])],
    })
    lines += [markdown_table(summary, digits=1), ""]
    default = studies[studies["step"] == "default-study"]
    if gpu and len(default):
        row = default.iloc[0]
        ok = row["returncode"] == 0 and not row["stopped"] and row["seconds"] <= DEFAULT_STUDY_SECONDS_TARGET
        lines += [f"Target: the default study end to end in at most {DEFAULT_STUDY_SECONDS_TARGET:.0f} s: "
                  f"{row['seconds']:.0f} s, {'met' if ok else 'not met'}.", ""]
    per_stage = stages.assign(seconds=stages["seconds"].round(1))[["step", "stage", "seconds", "status"]]
    lines += ["Per stage: under `dvc repro`, which runs one stage at a time, the wall time from its start to the next "
              "stage's; under `study run`, where stages overlap, its own (whole seconds).", "",
              markdown_table(per_stage, digits=1), ""]
    return lines
