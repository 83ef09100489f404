"""``study gpu-acceptance``: the GPU acceptance in one command, each step short enough for one device call.

Steps (``--step``, repeatable; default: all, in this order), each sized for one 10-minute device call (not yet
run on a GPU):

* ``bench`` — ResNet-18 (3×3 stem) and ViT-Tiny/4 (dim 192, depth 12, 3 heads) on 32×32×3, 10 classes: the
  study's training step beside the usual DataLoader recipe (:mod:`study.bench.train_step`), with img/s, MFU
  against a matmul peak measured in the same run (bf16 on GPU, float32 on CPU) and peak memory.
* ``bench-presets`` — the same for the models of the GPU presets (their own input shapes and recipes).
* ``default-study`` and ``gpu-preset`` — ``dvc repro`` of the default study (the ``--params`` file) and of
  ``configs/fashionmnist_gpu.yaml`` in a scratch copy of the project, so that the checkout's params.yaml and
  dvc.lock are never touched, with each stage's wall time. A run that reaches ``time_limit`` is stopped, and
  the table says so and how many stages it finished: the full GPU preset (75 runs of up to 126,563 steps)
  cannot end inside one device call.

Every step adds its rows to ``bench.csv`` or ``stages.csv`` in the output folder (replacing that step's rows
from an earlier call) and renders ``acceptance.md`` from what the folder holds, so steps run in separate device
calls still give one report. ``--smoke`` (CI, CPU) runs every step at toy size with ``configs/smoke.yaml``.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from study.bench.train_step import STUDY, BenchModel, Shape, run_benchmark
from study.errors import StudyError
from study.io import atomic_path, read_json, write_json, write_text
from study.report.tables import markdown_table

STEPS = ("bench", "bench-presets", "default-study", "gpu-preset")
BENCH_STEPS, STUDY_STEPS = STEPS[:2], STEPS[2:]
# The headline models and their targets (issue 26): MFU against the measured bf16 peak, and img/s against the
# usual DataLoader recipe in the same run; the default study end to end.
HEADLINE_SHAPE = Shape(image_size=32, in_chans=3, num_classes=10)
HEADLINE = (BenchModel("ResNet-18 (3x3 stem)", "resnet18"), BenchModel("ViT-Tiny/4", "vit"))
MFU_TARGET = {"ResNet-18 (3x3 stem)": 0.35, "ViT-Tiny/4": 0.25}
SPEEDUP_TARGET = 3.0
DEFAULT_STUDY_SECONDS_TARGET = 300.0
# Top-level entries of the checkout that a scratch copy leaves out: environments, kits, pipeline outputs, caches.
_NOT_COPIED = {".git", ".venv", ".kit", ".whl", ".carry", ".gl", "runs", "data", "reports", "build", ".pytest_cache"}
_STOP_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class BenchSize:
    batch_size: int
    steps: int  # per timed window
    warmup_steps: int  # untimed first: compilation, allocator and DataLoader start-up
    repeats: int  # timed windows; the median is reported
    workers: tuple[int, ...]  # DataLoader workers of the usual recipe
    images: int  # synthetic training images
    compile_model: bool
    peak_size: int | None  # matmul side for the peak; None: the device's default


# On GPU: the batch of the published CIFAR recipes' large-batch variants, 8 of the device's 16 cores loading.
GPU_SIZE = BenchSize(batch_size=512, steps=50, warmup_steps=15, repeats=3, workers=(8,), images=16384,
                     compile_model=True, peak_size=None)
# CI on CPU: a toy batch; the peak still at the CPU's default size (a smaller matmul understates it, MFU > 1).
SMOKE_SIZE = BenchSize(batch_size=2, steps=2, warmup_steps=1, repeats=1, workers=(0,), images=4,
                       compile_model=False, peak_size=None)


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


# --- timed `dvc repro` in a scratch copy -------------------------------------------------------------------


def scratch_copy(root: Path, dest: Path, params_file: Path, dataset_files: Path | None, data_root: str) -> Path:
    """A copy of the project at ``dest`` with ``params_file`` as its params.yaml, no outputs, no dvc.lock, and
    the dataset's files (if given) in its ``data_root``; a git repository when git exists, else DVC without SCM."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).resolve()
        skipped = {n for n in names if n in ("__pycache__",) or n.endswith(".egg-info")}
        if here == root.resolve():
            skipped |= _NOT_COPIED & set(names) | {"dvc.lock"}
        if here == (root / ".dvc").resolve():
            skipped |= {"tmp", "cache", "config.local"} & set(names)
        return skipped

    shutil.copytree(root, dest, ignore=ignore, symlinks=True)
    shutil.copy(params_file, dest / "params.yaml")
    if dataset_files is not None:
        shutil.copytree(dataset_files, dest / data_root, dirs_exist_ok=True)
    if shutil.which("git"):
        for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=acceptance", "-c", "user.email=acceptance@local",
                                                       "commit", "-qm", "scratch copy"]):
            subprocess.run(["git", *args], cwd=dest, check=True, capture_output=True)
    else:  # DVC without git: its documented `core.no_scm` switch, in the copy's local config
        (dest / ".dvc" / "config.local").write_text("[core]\n    no_scm = true\n")
    return dest


def _dvc_env() -> dict[str, str]:
    """This interpreter's scripts (`dvc`, `study`) first on PATH; output unbuffered, so each line is timed."""
    scripts = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", ""), "PYTHONUNBUFFERED": "1"}


def _dvc() -> str:
    found = shutil.which("dvc", path=_dvc_env()["PATH"])
    if found is None:
        raise StudyError("`dvc` is not on PATH; install the project (or on a device machine: "
                         ". scripts/device-install)")
    return found


def _run_dvc(project: Path, *args: str) -> str:
    done = subprocess.run([_dvc(), *args], cwd=project, env=_dvc_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise StudyError(f"dvc {' '.join(args)} failed in {project}: {_last_line(done.stderr or done.stdout)}")
    return done.stdout


def timed_repro(project: Path, targets: list[str], time_limit: float | None, log: Path) -> tuple[list[dict], dict]:
    """``dvc repro [targets]`` in ``project``: one row per stage that started (its wall time, from its
    "Running stage" line to the next one or the end) and a summary. Stopped after ``time_limit`` seconds."""
    planned = len(_run_dvc(project, "stage", "list", "--name-only").split())
    starts: list[tuple[str, float]] = []
    tic = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen([_dvc(), "repro", *targets], cwd=project, env=_dvc_env(), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True)
        reader = threading.Thread(target=_read_stages, args=(process.stdout, out, starts, tic), daemon=True)
        reader.start()
        try:
            returncode = process.wait(timeout=time_limit)
            stopped = False
        except subprocess.TimeoutExpired:
            _stop(process)
            returncode, stopped = process.returncode, True
        reader.join()
    seconds = time.monotonic() - tic
    rows = []
    for i, (stage, start) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else seconds
        last = i + 1 == len(starts)
        if not last:
            status = "done"
        elif stopped:  # whatever dvc's exit status after SIGTERM (it can be 0): its last stage was cut short
            status = "stopped at the time limit"
        else:
            status = "done" if returncode == 0 else "failed"
        rows.append({"stage": stage, "seconds": end - start, "status": status})
    summary = {"seconds": seconds, "returncode": returncode, "stopped": stopped, "time_limit": time_limit,
               "stages_started": len(starts), "stages_done": sum(r["status"] == "done" for r in rows),
               "stages_in_pipeline": planned, "targets": " ".join(targets) or "all"}
    return rows, summary


def _read_stages(stream, out, starts: list[tuple[str, float]], tic: float) -> None:
    """Copy dvc's output to the log; note when each "Running stage 'name':" line arrives."""
    for line in stream:
        out.write(line)
        if line.startswith("Running stage '"):
            starts.append((line.split("'")[1], time.monotonic() - tic))


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM dvc's whole process group (it and the stage it runs), then SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, _STOP_GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


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
        for name in ("bench.csv", "stages.csv", "studies.csv"):
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
    if (out / "stages.csv").exists() and (out / "studies.csv").exists():
        parts += study_section(pd.read_csv(out / "stages.csv"), pd.read_csv(out / "studies.csv"), gpu=_on_gpu(out))
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


def study_section(stages: pd.DataFrame, studies: pd.DataFrame, gpu: bool) -> list[str]:
    lines = ["## `dvc repro`, timed per stage", ""]
    summary = pd.DataFrame({
        "study": studies["step"], "params": studies["params"], "targets": studies["targets"],
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
    lines += ["Per stage (wall time from its start to the next stage's):", "", markdown_table(per_stage, digits=1), ""]
    return lines
