"""The code a ``study`` command runs: its module and every ``study`` module those import, found by reading the
source (no import is executed). ``dvc.yaml`` must list exactly these files as a stage's code dependencies.

    python tests/pipeline/stage_imports.py train      # the files to list under the train stage's deps

A folder whose every file the command runs is listed as the folder: DVC then records one hash for it instead of
one per file, which keeps ``dvc.lock`` small (DVC parses and rewrites the whole lock file after every stage, about
3 s for the default study's 600 KB lock of one file per module). Bytecode is outside every hash (``.dvcignore``).

Imports inside functions count (a stage runs them); imports under ``if TYPE_CHECKING:`` do not (they never
run). Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first, so those count too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "study"


def module_file(name: str) -> Path | None:
    """The source file of module ``name`` of the package, or None when it is not one."""
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported_names(tree: ast.AST, package: str) -> set[str]:
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against the importing module's package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}


def closure(*modules: str) -> set[Path]:
    """Every source file that importing ``modules`` runs, within the package."""
    seen: set[Path] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # the parent packages run first
            prefix = ".".join(parts[:depth])
            path = module_file(prefix)
            if path is None or path in seen:
                continue
            seen.add(path)
            package = prefix if path.name == "__init__.py" else ".".join(prefix.split(".")[:-1])
            todo.extend(_imported_names(ast.parse(path.read_text(), str(path)), package))
    return seen


def command_files(command: str) -> set[Path]:
    """The files ``study <command>`` runs: the CLI and the command's module, with everything they import."""
    sys.path.insert(0, str(ROOT))
    from study.core.cli import commands

    return closure(f"{PACKAGE}.core.cli", commands()[command][0])


def _sources(folder: Path) -> set[Path]:
    """The files DVC hashes for ``folder`` (bytecode and caches are ignored by ``.dvcignore``)."""
    return {p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def listed(files: set[Path]) -> list[Path]:
    """``files`` as a stage lists them: every folder all of whose files are among them stands in for its files,
    the deepest folders first (a folder holding a file the command never runs is listed file by file)."""
    entries = set(files)
    folders = {f for path in files for f in path.parents if ROOT / PACKAGE in (f, *f.parents)}
    for folder in sorted(folders, key=lambda f: -len(f.parts)):
        if _sources(folder) <= files:
            entries = {e for e in entries if folder not in e.parents} | {folder}
    return sorted(entries)


PIPELINES = {"dvc.yaml": "", "pretrained/dvc.yaml": "../"}  # file -> prefix of the package in its deps


if __name__ == "__main__":
    for path in listed(command_files(sys.argv[1])):
        print(f"      - {path.relative_to(ROOT)}")
