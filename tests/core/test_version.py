"""One version: pyproject.toml's, printed by `study --version`, repeated by CITATION.cff and, once installed, by the
distribution's metadata (study/core/version.py)."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import yaml

from study.core.version import DISTRIBUTION, pyproject_version, study_version

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_the_command_and_citation_name_the_same_version():
    version = pyproject_version((ROOT / "pyproject.toml").read_text())
    assert version and version[0].isdigit()
    printed = subprocess.run([sys.executable, "-m", "study", "--version"], cwd=ROOT, capture_output=True, text=True)
    assert printed.returncode == 0 and printed.stdout == f"study {version}\n", printed.stderr
    assert study_version() == version
    assert str(yaml.safe_load((ROOT / "CITATION.cff").read_text())["version"]) == version


def test_the_installed_metadata_names_it_too():
    """An editable install keeps the version it was installed with: after a bump, `pip install -e .` again."""
    assert metadata.version(DISTRIBUTION) == pyproject_version((ROOT / "pyproject.toml").read_text()), \
        "the installed metadata is stale; reinstall: pip install -e ."


def test_the_version_is_read_from_the_project_table_only():
    text = ('[build-system]\nrequires = ["setuptools"]\n\n[tool.other]\nversion = "9.9"\n\n'
            '[project]\nname = "x"\nversion = "1.2.3"\n\n[tool.after]\nversion = "8.8"\n')
    assert pyproject_version(text) == "1.2.3"
    assert pyproject_version('[project]\nname = "x"\ndynamic = ["version"]\n[tool.x]\nversion = "2"\n') is None
