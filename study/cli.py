"""``study``: the command line of the pipeline's stages and of the tools around it.

Each command is a module with ``add_arguments(parser)`` and ``main(args) -> str`` (the one-line summary printed
at the end). Only the module of the command being run is imported: a stage's process loads the stage's own code
and nothing else, so ``dvc.yaml`` can list exactly what a stage runs (tests/test_stage_deps.py checks it), and
editing a tool never makes a stage stale. A :class:`StudyError` becomes ``error: <message>`` on stderr with exit
status 2 and no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from study.errors import StudyError

# name -> (module, one-line help). The DVC stages first (study/stages, in pipeline order), then the tools.
COMMANDS: dict[str, tuple[str, str]] = {
    "prepare": ("study.stages.prepare", "load the dataset and write it as compact arrays with a manifest"),
    "subsets": ("study.stages.subsets", "write the validation split and nested, stratified training fractions"),
    "train": ("study.stages.train", "train one model on one fraction with one seed"),
    "curves": ("study.stages.curves", "data-efficiency curves, gaps, power-law fits from every run's metrics"),
    "distillation": ("study.stages.distillation", "the teacher's train/test accuracy and each student's test-set "
                     "agreement with it"),
    "cka": ("study.stages.cka", "CKA similarity within and across models and fractions"),
    "attention": ("study.stages.attention", "attention maps, rollout and mean attention distance of the "
                  "ViT-family models"),
    "report": ("study.stages.report", "write reports/: report.md, headline metrics, provenance, setup tables"),
    "pretrained-analysis": ("study.pretrained.analysis_stage", "CKA, per-head attention distance and rollout of "
                            "pretrained checkpoints (the pretrained preset, pretrained/dvc.yaml)"),
    "pretrained-report": ("study.pretrained.report_stage", "write the pretrained analysis's report.md and "
                          "provenance.json"),
    "check": ("study.tools.check", "validate the parameters file and exit"),
    "run": ("study.engine.command", "do what `dvc repro` does, with independent stages running at the same time "
            "on Ray"),
    "pretrained-check": ("study.pretrained.check", "load one pretrained checkpoint (Hugging Face folder, timm name "
                         "+ weights, study run) and print what it is"),
    "levers": ("study.tools.levers", "train one model per recipe setting of a lever grid and tabulate "
               "validation top-1 (what holds a model back; study/levers.py)"),
    "models": ("study.bench.models_command", "print parameters and forward FLOPs of the study's models"),
    "bench": ("study.bench.bench_command", "measure training speed and MFU: the study's step against the usual "
              "DataLoader recipe"),
    "gpu-acceptance": ("study.bench.acceptance_command", "the GPU acceptance: ResNet-18, ViT-Tiny and the presets' "
                       "models benched against the usual recipe, then timed `dvc repro` of the default study "
                       "(--params) and the GPU preset in a scratch copy; tables into --out"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; only ``command``'s module is imported to add its own options."""
    parser = argparse.ArgumentParser(
        prog="study",
        description="vit-vs-cnn: when does a Vision Transformer beat a CNN? Stage commands of the DVC pipeline "
        "(run them through `dvc repro`, or `study run` to run independent stages at once; both pass every path).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help) in COMMANDS.items():
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--params", type=Path, default=Path("params.yaml"),
                       help="parameters file (default: params.yaml)")
        if name == command:
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(command if command in COMMANDS else None).parse_args(argv)
    try:
        summary = importlib.import_module(COMMANDS[args.command][0]).main(args)
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
