"""``study preset``: write a working copy of the project that runs preset NAME (configs/NAME.yaml merged over
params.yaml), so that running a preset never overwrites a tracked file.

``study preset NAME DIR`` copies the project's tracked and untracked (not ignored) files to DIR, which must be new
or empty, without pipeline outputs (reports/, runs/, data/) or dvc.lock, writes the merged, validated parameters as
its params.yaml (headed by the preset's header, which the report prints) and commits it all in a git repository of
its own, so that ``pip install -e DIR && cd DIR && dvc repro`` runs the preset there with the copy's own code.
``--print`` writes nothing: it prints the merged parameters instead. Nothing is written when the preset is unknown
or invalid. The merge: study/presets.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from study.core.config import parse_params
from study.core.errors import StudyError
from study.presets import params_text, preset_comment, preset_params, working_copy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the preset: configs/NAME.yaml (e.g. quick, smoke, distillation)")
    parser.add_argument("dir", nargs="?", type=Path, help="where to write the working copy (new, or an empty folder)")
    parser.add_argument("--print", action="store_true", help="print the merged parameters (a params.yaml) and "
                        "write nothing")


def main(args: argparse.Namespace) -> str:
    root = Path.cwd()
    if not (root / "params.yaml").is_file() or not (root / "configs").is_dir():
        raise StudyError(f"no params.yaml and configs/ in {root}; run `study preset` from the project root")
    if args.dir is None and not args.print:
        raise StudyError("give the folder to write the working copy to (study preset NAME DIR), or --print")
    params = preset_params(root, args.name)
    parse_params(params, source=f"configs/{args.name}.yaml merged over params.yaml")
    comment = preset_comment(root, args.name)
    if args.print:
        return params_text(params, comment).rstrip("\n")
    dest = args.dir
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise StudyError(f"{dest} exists and is not an empty folder; give a new folder (the copy is written whole)")
    if dest.resolve().is_relative_to(root.resolve()):
        raise StudyError(f"{dest} is inside the project; give a folder outside it (e.g. ../{args.name}-study)")
    working_copy(root, dest, params, comment)
    # `study` runs the code of the checkout it was installed from, and refuses to in another project
    # (study/core/checkout.py): the copy runs with its own install.
    return (f"preset {args.name}: a working copy with configs/{args.name}.yaml merged over params.yaml is in {dest}; "
            f"run it with its own code: pip install -e {dest} && cd {dest} && dvc repro")
