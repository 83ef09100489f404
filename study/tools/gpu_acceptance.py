"""``study gpu-acceptance``: the steps of :mod:`benchmarks.acceptance`, results into ``--out``.

Run from the project root. ``--params`` is the default study; ``--smoke`` swaps every preset for the smoke preset
(configs/smoke.yaml merged over params.yaml, as every preset is), the models for toy sizes, and runs one training
stage of it for the default study.
``--merge``: run nothing; gather the folders of earlier calls (one per device call) into ``--out`` and render it;
with ``--compare-runs``, also set the default study's GPU runs beside the CPU runs of that table
(:mod:`benchmarks.acceptance.device_runs`).

The measurements and the report are the benchmarks' (:mod:`benchmarks.acceptance.steps`, outside the package); how
big each step is, on a GPU and with ``--smoke``, is :mod:`benchmarks.acceptance.sizes`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from benchmarks.acceptance import steps as acc
from benchmarks.acceptance.device_runs import compare, paired_runs, runs_from_log, runs_from_metrics
from benchmarks.acceptance.scratch_repro import archive_outputs, scratch_copy, timed_repro
from benchmarks.acceptance.sizes import TIME_LIMIT_SECONDS, acceptance_sizes
from benchmarks.from_params import bench_models, bench_shape
from benchmarks.profile import profile_models
from benchmarks.startup import time_startup
from study.core import runtime
from study.core.config import Params, parse_params
from study.stats.confidence import confidence
from study.core.errors import StudyError
from study.core.entry import configured
from study.presets import header, merged, params_text, preset_params, preset_text

# Where scripts/device-kit puts the default study's dataset for a device machine, which cannot download it.
KIT_DATASET = Path(".kit", "fashion-mnist")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("--out", type=Path, required=True, help="folder of the results: acceptance.md and its CSVs")
    p.add_argument("--step", action="append", choices=acc.STEPS,
                   help="run only this step (repeatable; default: all, in this order); each is sized for one 10-minute "
                   "device call, and a later call adds its rows to --out")
    p.add_argument("--smoke", action="store_true", help="toy sizes and the smoke preset: the CPU check CI runs")
    p.add_argument("--time-limit", type=float, default=TIME_LIMIT_SECONDS, help="seconds after which a `dvc repro` "
                   f"is stopped (default {TIME_LIMIT_SECONDS:.0f})")
    p.add_argument("--group", action="append", choices=("headline", "default"), help="the steps step: only this "
                   "group of models (repeatable; default both)")
    p.add_argument("--jobs", type=int, help="run the studies with `study run --jobs N` (a local pool of N stages at "
                   "once) instead of `dvc repro`")
    p.add_argument("--warm", action="store_true", help="with --jobs: `study run --warm` (each stage in a fork of a "
                   "warm worker that imported torch once)")
    p.add_argument("--preset", default="confirmatory_gpu", help="the gpu-preset step's preset, a configs/ name "
                   "(default confirmatory_gpu: the confirmatory study over 0.25-100%% of the data on fresh seeds)")
    p.add_argument("--ladder-preset", default="ladder_gpu", help="the ladder-preset step's preset (default "
                   "ladder_gpu: the ladder's rungs up to the whole training set)")
    p.add_argument("--gpus-per-run", type=float, help="with --jobs: engine.gpus_per_run of the studies' scratch "
                   "copies (the share of the GPU each stage takes; 0.125 runs eight at once)")
    p.add_argument("--dataset-files", type=Path, help="Fashion-MNIST's IDX files, copied into the scratch copy's "
                   "data.root (default: .kit/fashion-mnist when it exists, else the study's own search)")
    p.add_argument("--merge", type=Path, action="append", metavar="FOLDER", help="run no step: gather the --out "
                   "folders of earlier calls (one per device call) into --out and render acceptance.md (repeatable)")
    p.add_argument("--compare-runs", type=Path, metavar="RUNS_CSV", help="with --merge: the CPU runs of the default "
                   "study (reports/tables/curves/runs.csv) to set its GPU runs beside, paired by model, fraction "
                   "and seed")


def main(args: argparse.Namespace) -> str:
    params = configured(args.params)
    out, root = args.out, Path.cwd()
    if args.compare_runs and not args.merge:
        raise StudyError("--compare-runs needs --merge: it compares the runs of folders that earlier calls wrote")
    if args.compare_runs and not args.compare_runs.is_file():
        raise StudyError(f"--compare-runs {args.compare_runs}: no such file; give the curves stage's runs.csv "
                         "(reports/tables/curves/runs.csv)")
    if args.merge:
        report = acc.merge_folders(args.merge, out)
        if args.compare_runs and (out / "dvc-default-study.log").is_file():
            pairs = paired_runs(_default_study_runs(out), pd.read_csv(args.compare_runs))
            acc.write_comparison(out, pairs, compare(pairs, confidence(params)))
            report = acc.render(out)
        return f"gpu-acceptance: {len(args.merge)} folder(s) merged -> {report}"
    if not (root / "dvc.yaml").is_file():
        raise StudyError(f"no dvc.yaml in {root}; run `study gpu-acceptance` from the project root")
    dataset_files = args.dataset_files or (KIT_DATASET if KIT_DATASET.is_dir() else None)
    steps = args.step or list(acc.STEPS)
    sizes = acceptance_sizes(args.smoke)
    names = list(sizes.bench_presets)  # the presets whose models are benched
    if not args.smoke:  # checked before anything is written
        names += [name for step, name in (("gpu-preset", args.preset), ("ladder-preset", args.ladder_preset))
                  if step in steps]
    presets = {name: parse_params(preset_params(root, name), source=f"configs/{name}.yaml") for name in names}
    device = runtime.pick_device(params.train.device)
    if device.type == "cuda":
        runtime.configure(threads=params.train.threads, deterministic=False)  # cuDNN autotuning, as the presets
    out.mkdir(parents=True, exist_ok=True)
    acc.write_device(out, device)
    done = []
    for step in steps:
        if step in acc.BENCH_STEPS:
            groups = ([("headline", acc.HEADLINE_SHAPE, list(acc.HEADLINE))] if step == "bench" else
                      [(name, bench_shape(p), bench_models(p)) for name, p in presets.items()])
            table = acc.bench_groups(groups, sizes.bench, device, precision="auto")
            acc.merge_csv(out / "bench.csv", table, step)
            done.append(f"{step}: {len(table)} rows")
            continue
        if step == acc.VARIANTS_STEP:
            study = presets["smoke"] if args.smoke else params
            groups = acc.variant_groups(bench_models(study, ["resnet", "vit"]), bench_shape(study),
                                        sizes.variants_default_batch or study.budget.batch_size,
                                        headline_batch=sizes.variants.batch_size,
                                        compile_models=sizes.variants.compile_model)
            groups = [g for g in groups if g[0] in (args.group or ("headline", "default"))]
            table = acc.bench_variant_groups(groups, sizes.variants, device, precision="auto")
            for group, rows in table.groupby("group", sort=False):  # a later call may redo one group alone
                acc.merge_csv(out / "variants.csv", rows, f"{step}-{group}")
            done.append(f"{step}: {len(table)} rows, {int((table['error'].fillna('') != '').sum())} failed")
            continue
        if step == acc.STARTUP_STEP:
            table = time_startup(repeats=sizes.startup_repeats, cuda=device.type == "cuda")
            acc.merge_csv(out / "startup.csv", table, step)
            done.append(f"{step}: " + ", ".join(f"{r.command} {r.median_s:.2f} s" for r in table.itertuples()))
            continue
        if step == acc.PROFILE_STEP:
            bench = sizes.bench
            summary, kernels = profile_models(list(acc.HEADLINE), acc.HEADLINE_SHAPE, batch_size=bench.batch_size,
                                              steps=sizes.profile_steps, warmup_steps=bench.warmup_steps,
                                              images=bench.images, device=device, compile_model=bench.compile_model)
            acc.merge_csv(out / "profile.csv", summary, step)
            acc.merge_csv(out / "kernels.csv", kernels, step)
            done.append(f"{step}: {len(summary)} models")
            continue
        preset = {"gpu-preset": args.preset, "ladder-preset": args.ladder_preset}.get(step)
        name = "smoke" if args.smoke else preset
        study = presets[name] if name else params
        label, text = (f"{name}.yaml", preset_text(root, name)) if name else (args.params.name, args.params.read_text())
        targets = ([f"train@{study.baselines[0]}-{study.fractions[0]}-{study.seeds[0]}"]
                   if step == "default-study" and not sizes.whole_default_study else [])
        jobs = args.jobs
        if step == acc.CELLS_STEP:  # cells exist only under `study run`, which groups a cell's stages
            text, targets = cell_study(text, study, whole=sizes.whole_default_study)
            jobs = jobs or 1
        limit = (min(args.time_limit, sizes.preset_seconds) if preset and sizes.preset_seconds else args.time_limit)
        files = dataset_files if study.data.dataset == "fashionmnist" else None
        if args.gpus_per_run is not None:
            if "\nengine:" in "\n" + text:
                raise StudyError(f"--gpus-per-run: {label} has an engine section already; set gpus_per_run there")
            text += f"\nengine: {{gpus_per_run: {args.gpus_per_run}}}  # study gpu-acceptance --gpus-per-run\n"
        with tempfile.TemporaryDirectory(prefix="study-acceptance-") as scratch:
            project = scratch_copy(root, Path(scratch) / "project", text, files, study.data.root)
            rows, summary = timed_repro(project, targets, limit, out / f"dvc-{step}.log", jobs=jobs,
                                        warm=args.warm)
            acc.merge_csv(out / "device-runs.csv", runs_from_metrics(project), step)
            archive_outputs(project, out / f"{step}-outputs.tar.gz")
        acc.merge_csv(out / "stages.csv", pd.DataFrame(rows, columns=["stage", "seconds", "status"]), step)
        acc.merge_csv(out / "studies.csv", pd.DataFrame([{**summary, "params": label}]), step)
        done.append(f"{step}: {summary['stages_done']} stage(s) in {summary['seconds']:.0f} s"
                    + (" (stopped at the time limit)" if summary["stopped"] else "")
                    + ("" if summary["returncode"] == 0 or summary["stopped"] else " (FAILED, see the log)"))
    report = acc.render(out)
    return f"gpu-acceptance on {device.type}: " + "; ".join(done) + f" -> {report}"


def cell_study(text: str, study: Params, whole: bool) -> tuple[str, list[str]]:
    """The cells step's params (``text`` with every seed of a cell in one step, in float32: the cell step takes no
    bf16) and targets: on a GPU every training stage of the study at its budget, so that its in-stage speed stands
    beside the default-study step's one seed per step; in the smoke check the first model's first cell."""
    seeds = len(study.seeds)
    raw = merged(yaml.safe_load(text), {"train": {"precision": "fp32", "cell": {"cpu": seeds, "cuda": seeds}}})
    comment = header(text) + f"\n# study gpu-acceptance --step cells: a cell's {seeds} seeds in one step, float32.\n"
    fraction = study.fractions[0]
    cell = [f"train@{study.baselines[0]}-{fraction}-{seed}" for seed in study.seeds]
    every = [f"train@{m}-{f}-{s}" for m in study.baselines for f in study.fractions for s in study.seeds]
    if study.distill is not None:
        every += [f"distill@d0-{f}-{s}" for f in study.fractions for s in study.seeds]
    return params_text(raw, comment), every if whole else cell


def _default_study_runs(out: Path) -> pd.DataFrame:
    """The default study's GPU runs at the study's budget: from device-runs.csv (every run's metrics.json, which
    calls since `study run --jobs` write), else from the train stages' summary lines in the `dvc repro` log."""
    if (out / "device-runs.csv").is_file():
        runs = pd.read_csv(out / "device-runs.csv")
        runs = runs[(runs["step"] == "default-study") & (runs["budget_factor"] == 1.0)]
        return runs[["model", "fraction", "seed", "test_top1", "train_seconds"]].reset_index(drop=True)
    return runs_from_log((out / "dvc-default-study.log").read_text())
