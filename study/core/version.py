"""The study's one version: ``version`` in pyproject.toml's ``[project]`` table, which CITATION.cff repeats and
``study --version`` prints (tests/core/test_version.py holds the three equal).

Read from the pyproject.toml beside the imported package when there is one (an editable install, a checkout run
with ``python -m study``), so that a version bumped there is the one reported without reinstalling; else from the
installed distribution's metadata (a wheel install, which ships no pyproject.toml). Kept out of the code itself so
that a new version makes no stage of the pipeline stale.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "vit-vs-cnn"  # pyproject.toml's `name`
_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def study_version() -> str:
    """The version of the code this process runs, e.g. ``"1.0.0"``."""
    if _PYPROJECT.is_file():
        found = pyproject_version(_PYPROJECT.read_text())
        if found:
            return found
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"  # neither a checkout nor installed: nothing says which code this is


def pyproject_version(text: str) -> str | None:
    """``version`` of the ``[project]`` table of a pyproject.toml's text (a plain string, as this project writes it;
    a regular expression, since tomllib arrived only in Python 3.11)."""
    table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = re.search(r'^version\s*=\s*"([^"]+)"', table.group(1), re.M) if table else None
    return found.group(1) if found else None
