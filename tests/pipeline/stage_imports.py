"""The code a ``study`` command runs: its module and every ``study`` module those import, found by reading the
source (no import is executed). ``dvc.yaml`` must list exactly these files as a stage's code dependencies.

    python tests/pipeline/stage_imports.py train      # the files to list under the train stage's deps
    python tests/pipeline/stage_imports.py --write    # rewrite every stage's list in dvc.yaml that differs

A folder whose every file the command runs is listed as the folder: DVC then records one hash for it instead of
one per file, which keeps ``dvc.lock`` small (DVC parses and rewrites the whole lock file after every stage, about
3 s for the default study's 600 KB lock of one file per module). Bytecode is outside every hash (``.dvcignore``).

Imports inside functions count (a stage runs them); imports under ``if TYPE_CHECKING:`` do not (they never
run). Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first, so those count too. The model
registry (``study/archs.py``) names each family's constructor as a ``"module:attribute"`` string that
``study.models`` imports when it builds that family, so a stage importing ``study.models`` runs every module the
registry names.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "study"
REGISTRY, BUILDER = ROOT / PACKAGE / "archs.py", f"{PACKAGE}.models"  # the registry, and what builds from it


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


def registry_modules() -> set[str]:
    """The modules of the registry's constructors: its ``"study.<module>:<attribute>"`` strings."""
    pattern = re.compile(rf"({PACKAGE}(\.\w+)+):\w+")
    return {match.group(1) for node in ast.walk(ast.parse(REGISTRY.read_text(), str(REGISTRY)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (match := pattern.fullmatch(node.value))}


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
            if prefix == BUILDER:
                todo.extend(registry_modules())
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

# A stage's own deps list: a flow list (``deps: [a, b]``, possibly over several lines) or a block list.
_DEPS = re.compile(r"\n    deps:(?: \[[^\]]*\]|(?:\n      - [^\n]*)+)")


def rewrite_deps(name: str, prefix: str) -> list[str]:
    """Rewrite, in pipeline file ``name``, the code deps of every stage whose list is not what its command imports,
    as a block list (other deps kept in place, comments elsewhere untouched); a stage that inherits its deps
    through a merge key changes with its template. Returns the stages rewritten."""
    import yaml

    path = ROOT / name
    text = path.read_text()
    rewritten = []
    for stage, body in yaml.safe_load(text)["stages"].items():
        is_code = lambda dep: isinstance(dep, str) and dep.startswith(prefix + PACKAGE)  # noqa: E731
        code = [prefix + str(p.relative_to(ROOT)) for p in listed(command_files(body["cmd"].split()[1]))]
        if [d for d in body["deps"] if is_code(d)] == code:
            continue
        start = text.find(f"\n  {stage}:")
        found, following = _DEPS.search(text, start), re.compile(r"\n  \S").search(text, start + 1)
        if start < 0 or found is None or (following and found.start() > following.start()):
            continue  # inherited through a merge key: its template is rewritten
        first = next(i for i, d in enumerate(body["deps"]) if is_code(d))
        others = [d for d in body["deps"] if not is_code(d)]
        deps = others[:first] + code + others[first:]
        text = text[:found.start()] + "\n    deps:" + "".join(f"\n      - {d}" for d in deps) + text[found.end():]
        rewritten.append(stage)
    path.write_text(text)
    return rewritten


if __name__ == "__main__":
    if sys.argv[1] == "--write":
        for name, prefix in PIPELINES.items():
            print(name, "rewritten:", ", ".join(rewrite_deps(name, prefix)) or "none")
    else:
        for path in listed(command_files(sys.argv[1])):
            print(f"      - {path.relative_to(ROOT)}")
