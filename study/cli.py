"""``study``: the command line every DVC stage calls.

Each subcommand validates ``--params`` first (nothing runs on a bad file), sets the process-wide runtime
switches once, runs its stage and prints a one-line summary. A :class:`StudyError` becomes
``error: <message>`` on stderr with exit status 2 and no traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from study.errors import StudyError


def _add(sub, name: str, help: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help, description=help)
    p.add_argument("--params", type=Path, default=Path("params.yaml"), help="parameters file (default: params.yaml)")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="study",
        description="vit-vs-cnn: when does a Vision Transformer beat a CNN? Stage commands of the DVC pipeline "
        "(run them through `dvc repro`, or `study run` to run independent stages at once; both pass every path).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _add(sub, "check", "validate the parameters file and exit")

    p = _add(sub, "prepare", "load the dataset and write it as compact arrays with a manifest")
    p.add_argument("--out", type=Path, required=True, help="output folder (data/prepared)")

    p = _add(sub, "subsets", "write the validation split and nested, stratified training fractions")
    p.add_argument("--prepared", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True, help="output folder (data/subsets)")

    p = _add(sub, "train", "train one model on one fraction with one seed")
    p.add_argument("--model", required=True, help="a key of `models` in params")
    p.add_argument("--fraction", type=float, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--prepared", type=Path, required=True)
    p.add_argument("--subset", type=Path, required=True, help="index file of the training subset")
    p.add_argument("--validation", type=Path, required=True, help="index file of the validation split")
    p.add_argument("--teacher", type=Path, help="teacher's model.pt (distilled student only)")
    p.add_argument("--checkpoint", type=Path, required=True, help="final weights (model.pt)")
    p.add_argument("--metrics", type=Path, required=True, help="metrics.json")
    p.add_argument("--history", type=Path, required=True, help="history.csv")
    p.add_argument("--resume", type=Path, required=True, help="resume state, kept across kills")
    p.add_argument("--predictions", type=Path, required=True, help="predictions.npy: test-set argmax per head")

    for name, help in [
        ("curves", "data-efficiency curves, gaps, power-law fits from every run's metrics"),
        ("cka", "CKA similarity within and across models and fractions"),
        ("attention", "attention maps, rollout and mean attention distance of the ViT-family models"),
    ]:
        p = _add(sub, name, help)
        p.add_argument("--runs", type=Path, required=True, help="folder holding the runs (runs)")
        if name != "curves":
            p.add_argument("--prepared", type=Path, required=True)
        p.add_argument("--figures", type=Path, required=True, help="output folder for figures")
        p.add_argument("--tables", type=Path, required=True, help="output folder for tables")

    p = _add(sub, "distillation", "the teacher's train/test accuracy and each student's test-set agreement with it")
    p.add_argument("--runs", type=Path, required=True, help="folder holding the runs (runs)")
    p.add_argument("--tables", type=Path, required=True, help="output folder for tables")

    p = _add(sub, "report", "write reports/: report.md, headline metrics, provenance, setup tables")
    p.add_argument("--runs", type=Path, required=True)
    p.add_argument("--lock", type=Path, required=True, help="dvc.lock, digested into the provenance")
    p.add_argument("--tables", type=Path, required=True, help="folder of the analysis tables (reports/tables)")
    p.add_argument("--figures", type=Path, required=True, help="folder of the analysis figures (reports/figures)")
    p.add_argument("--out", type=Path, required=True, help="report.md")
    p.add_argument("--metrics", type=Path, required=True, help="headline metrics.json")
    p.add_argument("--provenance", type=Path, required=True, help="provenance.json")
    p.add_argument("--setup-tables", type=Path, required=True, help="output folder of the setup tables")

    p = _add(sub, "pretrained-check", "load one pretrained checkpoint (Hugging Face folder, timm name + weights, "
             "study run) and print what it is")
    p.add_argument("source", help="hf:<folder> (or a folder), timm:<model name> with --weights, or study:<model.pt>")
    p.add_argument("--weights", type=Path, help="local weights file of a timm: source (safetensors or state dict)")

    p = _add(sub, "pretrained-analysis", "CKA, per-head attention distance and rollout of pretrained checkpoints "
             "(the pretrained preset, pretrained/dvc.yaml)")
    p.add_argument("--checkpoints", type=Path, required=True, help="folder the preset's sources are relative to")
    p.add_argument("--images", type=Path, required=True, help="image folder (ImageFolder layout or flat JPEG/PNG)")
    p.add_argument("--figures", type=Path, required=True, help="output folder for figures")
    p.add_argument("--tables", type=Path, required=True, help="output folder for tables")

    p = _add(sub, "pretrained-report", "write the pretrained analysis's report.md and provenance.json")
    p.add_argument("--tables", type=Path, required=True, help="the analysis's tables")
    p.add_argument("--figures", type=Path, required=True, help="the analysis's figures")
    p.add_argument("--out", type=Path, required=True, help="report.md")
    p.add_argument("--provenance", type=Path, required=True, help="provenance.json")

    p = _add(sub, "levers", "train one model per recipe setting of a lever grid and tabulate validation top-1 "
             "(what holds a model back; study/levers.py)")
    p.add_argument("--grid", type=Path, required=True, help="the lever grid (docs/levers.yaml)")
    p.add_argument("--prepared", type=Path, required=True, help="the grid's base's prepared data (data/prepared)")
    p.add_argument("--subsets", type=Path, required=True, help="the grid's base's subsets (data/subsets)")
    p.add_argument("--out", type=Path, required=True, help="CSV, one row per trial; trials already in it are kept")
    p.add_argument("--table", type=Path, required=True, help="Markdown table, one row per lever")
    p.add_argument("--lever", action="append", help="run only this lever (repeatable)")

    p = _add(sub, "run", "do what `dvc repro` does, with independent stages running at the same time on Ray")
    p.add_argument("targets", nargs="*", metavar="TARGET", help="stages to bring up to date, with what they depend "
                   "on, as for `dvc repro` (default: the whole pipeline)")
    p.add_argument("--address", help="join this Ray cluster (e.g. 10.0.0.1:6379, from `ray start --head`) instead "
                   "of starting a local Ray instance")
    p.add_argument("--cpus", type=int, help="CPUs of the local Ray instance (default: all of this machine's)")
    p.add_argument("--gpus", type=int, help="GPUs of the local Ray instance (default: those Ray detects); on a "
                   "machine without, logical ones: stages are scheduled by engine.gpus_per_run all the same")
    p.add_argument("--cpus-per-run", type=int, help="CPUs, and torch threads, per training run for this run only "
                   "(default: engine.cpus_per_run, else train.threads); another thread count changes CPU results")

    p = _add(sub, "models", "print parameters and forward FLOPs of the study's models")
    p.add_argument("--image-size", type=int, help="override the dataset's image size")
    p.add_argument("--in-chans", type=int, help="override the dataset's channels")

    p = _add(sub, "bench", "measure training speed and MFU: the study's step against the usual DataLoader recipe")
    p.add_argument("--model", action="append", help="a key of `models` in params (repeatable; default: the trained "
                   "models unless --arch is given)")
    p.add_argument("--arch", action="append", help="a model name with its default size, e.g. resnet18 or vit "
                   "(ViT-Tiny/4) (repeatable)")
    p.add_argument("--image-size", type=int, help="override the dataset's image size")
    p.add_argument("--in-chans", type=int, help="override the dataset's channels")
    p.add_argument("--num-classes", type=int, help="override the dataset's number of classes")
    p.add_argument("--batch-size", type=int, help="default: budget.batch_size")
    p.add_argument("--steps", type=int, default=20, help="timed steps per window (default 20)")
    p.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--repeats", type=int, default=3, help="timed windows; the median is reported (default 3)")
    p.add_argument("--workers", type=int, action="append", help="DataLoader workers of the usual path (repeatable; default 2)")
    p.add_argument("--images", type=int, default=8192, help="synthetic training images (default 8192)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, help="torch.compile the study path "
                   "(default: train.compile)")
    p.add_argument("--precision", action="append", choices=("auto", "bf16", "fp32"), help="forward precision of "
                   "both paths (default: train.precision; auto = bf16 autocast on GPU, float32 on CPU); repeat it to "
                   "measure several side by side, e.g. --precision fp32 --precision bf16")
    p.add_argument("--augment-cost", action="store_true", help="also time each model's study step under heavy "
                   "augmentation (DeiT's: crop, flip, RandAugment, erasing, Mixup/CutMix), to show its cost")
    p.add_argument("--out", type=Path, default=Path("reports/bench.csv"), help="CSV of the results")

    p = _add(sub, "gpu-acceptance", "the GPU acceptance: ResNet-18, ViT-Tiny and the presets' models benched against "
             "the usual recipe, then timed `dvc repro` of the default study (--params) and the GPU preset in a "
             "scratch copy; tables into --out")
    p.add_argument("--out", type=Path, required=True, help="folder of the results: acceptance.md and its CSVs")
    p.add_argument("--step", action="append", choices=("bench", "bench-presets", "default-study", "gpu-preset"),
                   help="run only this step (repeatable; default: all, in this order); each is sized for one 10-minute "
                   "device call, and a later call adds its rows to --out")
    p.add_argument("--smoke", action="store_true", help="toy sizes and configs/smoke.yaml: the CPU check CI runs")
    p.add_argument("--time-limit", type=float, default=540.0, help="seconds after which a `dvc repro` is stopped "
                   "(default 540)")
    p.add_argument("--dataset-files", type=Path, help="Fashion-MNIST's IDX files, copied into the scratch copy's "
                   "data.root (default: .kit/fashion-mnist when it exists, else the study's own search)")
    p.add_argument("--merge", type=Path, action="append", metavar="FOLDER", help="run no step: gather the --out "
                   "folders of earlier calls (one per device call) into --out and render acceptance.md (repeatable)")
    return parser


def _run(args: argparse.Namespace) -> str:
    from study import runtime, stages
    from study.config import load_params

    if args.command.startswith("pretrained-"):
        return _run_pretrained(args)
    if args.command == "levers":
        from study.config import parse_params
        from study.levers import read_grid, sweep

        base, _ = read_grid(args.grid)
        runtime.configure(threads=parse_params(base, str(args.grid)).train.threads)  # CPU results depend on it
        return sweep(args.grid, args.prepared, args.subsets, args.out, args.table, args.lever)
    params = load_params(args.params)
    runtime.configure(threads=params.train.threads, deterministic=params.train.deterministic)
    if args.command == "check":
        return f"check: {args.params} is valid ({len(params.trained_models)} models, {len(params.fractions)} fractions, {len(params.seeds)} seeds)"
    if args.command == "prepare":
        return stages.prepare(params, args.out)
    if args.command == "subsets":
        return stages.subsets(params, args.prepared, args.out)
    if args.command == "train":
        from study.train.stage import train_stage

        return train_stage(
            params, args.model, args.fraction, args.seed, args.prepared, args.subset, args.validation,
            args.teacher, args.checkpoint, args.metrics, args.history, args.resume, args.predictions,
        )
    if args.command == "curves":
        return stages.curves(params, args.runs, args.figures, args.tables)
    if args.command == "distillation":
        return stages.distillation(params, args.runs, args.tables)
    if args.command in ("cka", "attention"):
        stage = getattr(stages, args.command)
        return stage(params, args.runs, args.prepared, args.figures, args.tables)
    if args.command == "report":
        return stages.report(params, args.params, args.lock, args.runs, args.tables, args.figures, args.out,
                             args.metrics, args.provenance, args.setup_tables)
    if args.command == "run":
        from study.engine.driver import run_study

        return run_study(params, args.targets, address=args.address, cpus=args.cpus, cpus_per_run=args.cpus_per_run,
                         gpus=args.gpus)
    if args.command == "models":
        return stages.models(params, args.image_size, args.in_chans)
    if args.command == "gpu-acceptance":
        kit_data = Path(".kit", "fashion-mnist")
        dataset_files = args.dataset_files or (kit_data if kit_data.is_dir() else None)
        return stages.gpu_acceptance(params, args.params, args.out, args.step, args.smoke, args.time_limit,
                                     dataset_files, args.merge)
    if args.command == "bench":
        return stages.bench(params, args.model, args.arch, args.image_size, args.in_chans, args.num_classes,
                            args.batch_size, args.steps, args.warmup_steps, args.repeats, args.workers, args.images,
                            args.compile, args.out, args.precision, args.augment_cost)
    raise AssertionError(args.command)


def _run_pretrained(args: argparse.Namespace) -> str:
    """The pretrained commands: their own parameters file (configs/pretrained.yaml), not the study's."""
    from study import runtime, stages
    from study.pretrained.params import load_pretrained_params

    if args.command == "pretrained-check":
        runtime.configure()
        return stages.pretrained_check(args.source, args.weights)
    params = load_pretrained_params(args.params)
    runtime.configure(threads=params.analysis.threads)
    if args.command == "pretrained-analysis":
        return stages.pretrained_analysis(params, args.checkpoints, args.images, args.figures, args.tables)
    return stages.pretrained_report(args.params, args.tables, args.figures, args.out, args.provenance)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        summary = _run(args)
    except StudyError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the file system refused (a full disk, a permission, a vanished file): no traceback
        print(f"error: {_os_error(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished work is kept; rerun the same command (or `dvc repro`) to resume", file=sys.stderr)
        return 130
    print(summary)
    return 0


def _os_error(err: OSError) -> str:
    """One line for an OSError that no stage turned into a StudyError: the file, the reason, the fix."""
    where = f"{err.filename}: " if err.filename else ""
    reason = err.strerror or " ".join(str(err).split())
    return f"{where}{reason}; fix the file system problem (space, permissions, a missing file) and rerun"
