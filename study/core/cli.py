"""``study``: the command line of the pipeline's stages and of the tools around it.

A command is a module found by where it lives, never listed here: ``study/<question>/stage.py`` is the stage
``<question>`` of ``dvc.yaml`` (``study attention``), ``study/<package>/stage_<name>.py`` a stage of a package that
has several or whose stage is named for its output (``study/data/stage_prepare.py`` is ``study prepare``),
``study/tools/<name>.py`` a tool, and ``study/pretrained/stages/<name>.py`` the stage ``pretrained-<name>`` of
``pretrained/dvc.yaml``; dashes in a name are underscores in its module. Each has ``add_arguments(parser)`` and
``main(args) -> str``, the one-line summary printed at the end; its docstring's first line is its help. Only the
module of the command being run is imported: a stage's process loads its own code and nothing else, so
``dvc.yaml`` lists exactly what a stage runs (tests/pipeline/test_stage_deps.py), and adding or editing a tool or
another stage never makes a stage stale. Before a command's module is imported, the imported package must be the
current project's own (:mod:`study.core.checkout`). A :class:`StudyError` becomes ``error: <message>`` on stderr
with exit status 2 and no traceback.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import re
import sys
from pathlib import Path

from study.core.checkout import check_own_code
from study.core.errors import StudyError

_HOME = Path(__file__).resolve().parents[1]  # the package `study`
# The pipeline's stages in dvc.yaml's order; other commands follow by name.
_STAGE_ORDER = ("prepare", "subsets", "train", "curves", "distillation", "cka", "attention", "robustness", "controls",
                "plan", "ladder", "budget-check", "report")


def _command_modules() -> list[tuple[str, Path, str]]:
    """``(command, source file, module)`` of every command, from the file layout alone."""
    found = []
    for path in sorted(_HOME.glob("*/stage*.py")):
        package = path.parent.name
        name = package if path.stem == "stage" else path.stem.removeprefix("stage_")
        found.append((name.replace("_", "-"), path, f"study.{package}.{path.stem}"))
    for folder, prefix, package in (("tools", "", "study.tools."), ("pretrained/stages", "pretrained-",
                                                                     "study.pretrained.stages.")):
        for path in sorted((_HOME / folder).glob("[!_]*.py")):
            found.append((prefix + path.stem.replace("_", "-"), path, package + path.stem))
    return found


def commands() -> dict[str, tuple[str, str]]:
    """``name -> (module, one-line help)`` for every command, read from the sources without importing them."""
    return {name: (module, _help(path)) for name, (module, path) in _ordered_commands().items()}


@functools.cache
def _ordered_commands() -> dict[str, tuple[str, Path]]:
    """``name -> (module, source file)`` in the order help lists them: the file layout alone, no file read."""
    ordered = sorted(_command_modules(), key=lambda c: (_STAGE_ORDER.index(c[0]) if c[0] in _STAGE_ORDER
                                                         else len(_STAGE_ORDER), c[0]))
    return {name: (module, path) for name, path, module in ordered}


def _help(path: Path) -> str:
    return _summary(ast.get_docstring(ast.parse(path.read_text())) or "")


def _summary(doc: str) -> str:
    """The docstring's first sentence, without the ````study name````: prefix stages and tools start with."""
    first = doc.split("\n\n")[0].replace("\n", " ")
    first = first.split(": ", 1)[-1].rstrip(".") if first.startswith(("``study", "Stage ``")) else first
    return re.sub(r":\w+:`~?([^`]*)`", r"\1", first).replace("``", "`")  # reST roles and literals, as plain text


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; only ``command``'s module is imported to add its own options."""
    parser = argparse.ArgumentParser(
        prog="study",
        description="vit-vs-cnn: when does a Vision Transformer beat a CNN? Stage commands of the DVC pipeline "
        "(run them through `dvc repro`, or `study run` to run independent stages at once; both pass every path).",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    known = _ordered_commands()
    for name, (module, path) in known.items():
        # Only the list of commands (`study`, `study --help`, a misspelt command) shows every command's help line;
        # reading all their sources costs a tenth of a second at every stage's start, so a command reads its own.
        help = _help(path) if command not in known or name == command else None
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--params", type=Path, default=Path("params.yaml"),
                       help="parameters file (default: params.yaml)")
        if name == command:
            importlib.import_module(module).add_arguments(p)
    return parser


class _Version(argparse.Action):
    """``study --version``: the study's version (:mod:`study.core.version`), read only when asked for."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0,
                         help="print the study's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from study.core.version import study_version

        print(f"study {study_version()}")  # on stdout, as argparse's own version action prints
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(command).parse_args(argv)
    try:
        check_own_code()  # before the command's own code is even imported
        summary = importlib.import_module(_ordered_commands()[args.command][0]).main(args)
    except StudyError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of stdout left (`study preset NAME --print | head`): nothing to report
        return _quiet_exit()
    except OSError as err:  # the file system refused (a full disk, a permission, a vanished file): no traceback
        print(f"error: {_os_error(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished work is kept; rerun the same command (or `dvc repro`) to resume", file=sys.stderr)
        return 130
    try:
        print(summary)
    except BrokenPipeError:
        return _quiet_exit()
    return 0


def _quiet_exit() -> int:
    """Exit 0 after the reader of stdout closed it, without Python's report of the failed final flush."""
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _os_error(err: OSError) -> str:
    """One line for an OSError that no stage turned into a StudyError: the file, the reason, the fix."""
    where = f"{err.filename}: " if err.filename else ""
    reason = err.strerror or " ".join(str(err).split())
    return f"{where}{reason}; fix the file system problem (space, permissions, a missing file) and rerun"
