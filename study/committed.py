"""Committed reports as a reader opens them: this study's ``reports/``, or a preset's run committed under
``reports/<name>/``, with the parameters its tables were computed with. The notebooks read through this module;
no DVC stage imports it.

A preset's committed statistics may have been recomputed by ``study rerender`` (study/tools/rerender.py) with this
checkout's code and parameters; its ``provenance.json`` then holds a ``rerendered`` record beside the runs' own
parameters, and the recomputed tables follow the record's (the runs' own may even predate today's schema).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from study.core.config import Params, parse_params
from study.core.errors import StudyError
from study.core.io import read_json

PROVENANCE = "provenance.json"


def committed_presets(root: Path) -> list[str]:
    """The presets whose run is committed under ``root/reports/<name>/``."""
    return sorted(path.parent.name for path in (root / "reports").glob(f"*/{PROVENANCE}"))


def report_folder(root: Path, study: str | None = None) -> Path:
    """``root/reports`` (``study`` None: this study's own report) or ``root/reports/<study>`` (a preset's)."""
    if study is None:
        return root / "reports"
    folder = root / "reports" / study
    if not (folder / PROVENANCE).is_file():
        raise StudyError(f"no committed report of {study!r} (no {folder / PROVENANCE}); the presets committed under "
                         f"reports/: {', '.join(committed_presets(root)) or 'none'}")
    return folder


def report_params(folder: Path) -> Params:
    """The parameters the report in ``folder`` was computed with: ``study rerender``'s where it recomputed the
    statistics, else the runs' own."""
    path = folder / PROVENANCE
    if not path.is_file():
        raise StudyError(f"{path} is missing: run `dvc repro` first (in {folder.parent})")
    record = read_json(path)
    return parse_params(yaml.safe_load(record.get("rerendered", record)["params"]), source=str(path))
