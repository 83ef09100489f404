"""Which checkout's code a command runs: the imported ``study`` package must be the current project's own.

Why: ``pip install -e DIR`` points the ``study`` command at DIR's code for good. Run inside another copy of the
project (a preset's working copy from ``study preset``, a second clone), it would run DIR's code silently: an edit
to the copy's ``study/`` would change nothing, and a ``dvc repro`` there would record in the copy's dvc.lock the
hashes of the copy's code beside results that other code produced. So every command run inside a project refuses,
in one line naming both packages and the fix, when the package it imported is not that project's.

A project is the nearest folder at or above the current one holding ``dvc.yaml``, or ``params.yaml`` beside
``configs/`` (where ``study preset`` and ``--params``' default look). Its code is its own ``study/`` package; a
project without one (``pretrained/``, whose dvc.yaml runs ``../study``) runs the package of the nearest folder above
it that has one. Outside any project, or where no folder above it holds a ``study/`` package (a test's scratch
folder), there is nothing to compare and nothing is refused.

Standard library only: the CLI calls :func:`check_own_code` before any command's module is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from study.core.errors import StudyError

PACKAGE = Path(__file__).resolve().parents[1]  # the folder of the `study` package this process imported


def project_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``dvc.yaml``, or ``params.yaml`` and ``configs/``."""
    for folder in (start, *start.parents):
        if (folder / "dvc.yaml").is_file() or ((folder / "params.yaml").is_file() and (folder / "configs").is_dir()):
            return folder
    return None


def project_code(root: Path) -> Path | None:
    """The ``study`` package a project at ``root`` runs: its own, else that of the nearest folder above it."""
    for folder in (root, *root.parents):
        if (folder / "study" / "__init__.py").is_file():
            return folder / "study"
    return None


def check_own_code(cwd: Path | None = None, package: Path = PACKAGE) -> None:
    """Refuse (:class:`StudyError`) when the project around ``cwd`` (default: the current folder) runs another
    ``study`` package than ``package``, the imported one."""
    root = project_root((cwd or Path.cwd()).resolve())
    code = project_code(root) if root is not None else None
    if code is None or code.resolve() == package.resolve():
        return
    raise StudyError(f"this project's code is {code}, but `study` runs {package}; run `pip install -e "
                     f"{code.parent}` to run the project's own code, or run from {package.parent}, the checkout "
                     "the package comes from")


def own_code_env(folder: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) with the checkout of the project around ``folder`` first on
    PYTHONPATH, so that ``study`` and ``dvc`` started there import that project's own package without an install
    of it. For the tools and tests that make a scratch copy of this checkout and run the copy (its code the same
    bytes as this one's); a user's copy gets its own ``pip install -e``."""
    env = dict(os.environ if env is None else env)
    root = project_root(folder.resolve())
    code = project_code(root) if root is not None else None
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(code.parent), env.get("PYTHONPATH"))))
    return env
