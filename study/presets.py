"""Presets: each file in ``configs/`` names only what its study changes from ``params.yaml``, the default study.

A preset is an *overlay* of params.yaml, read by :func:`merged`: mappings merge recursively, lists and scalars
replace, and a key set to ``null`` (``~``) removes that key (``models: {deit: ~}`` is a study without the DeiT
model). A default is then set in one place, params.yaml, and a preset's file shows at a glance what it changes.
``study preset NAME DIR`` (study/tools/preset.py) writes a working copy of the project at DIR whose params.yaml is
the merged preset, so running a preset never overwrites a tracked file.

``configs/pretrained.yaml`` is not a preset of params.yaml: it is the whole parameters file of the pretrained
analysis (its own schema, study/pretrained/params.py), read in place by pretrained/dvc.yaml.

Only yaml and the standard library are imported: no DVC stage imports this module, and the tools that do stay
light.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import yaml

from study.core.errors import StudyError
from study.core.io import read_yaml

# Files of configs/ that are not overlays of params.yaml, and where they are run instead.
NOT_PRESETS = {"pretrained": "the pretrained analysis's own parameters file; run it with `cd pretrained && dvc repro`"}
# Top-level folders of the project that a working copy leaves out (pipeline outputs and data; dvc.lock too).
_NOT_COPIED = ("reports/", "runs/", "data/")
# Committed files under those folders that a stage reads as inputs, not outputs: the pilot's per-run tables, which
# size the confirmatory plan's power (dvc.yaml's plan stage lists them), go with every working copy.
COMMITTED_INPUTS = ("reports/pilot/tables/robustness/plan_runs.csv",)


def merged(base: dict, overlay: dict) -> dict:
    """``base`` with ``overlay`` merged in, neither modified: mappings merge recursively (a mapping where the base
    has none merges into an empty one), lists and scalars replace, and a ``None`` value removes the key."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = merged(out[key] if isinstance(out.get(key), dict) else {}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def preset_names(root: Path) -> list[str]:
    """The presets of ``root``'s configs/ folder, by name (the file's stem), without those that are not presets."""
    return sorted(p.stem for p in (root / "configs").glob("*.yaml") if p.stem not in NOT_PRESETS)


def read_mapping(path: Path) -> dict:
    """The mapping a YAML file holds; a one-line StudyError for a missing file, bad YAML or another top level."""
    raw = read_yaml(path, "check the name (`ls configs/`)")
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: expected a mapping of sections at the top level; fix the file")
    return raw


def preset_params(root: Path, name: str, _within: tuple[str, ...] = ()) -> dict:
    """``root``'s params.yaml merged with ``configs/<name>.yaml`` (raw, not validated: see parse_params). A preset
    whose ``base`` names another is merged over that one instead (``base: ladder``: the ladder's rungs and plan on
    another machine's budget), so a design is written once."""
    if name in NOT_PRESETS:
        raise StudyError(f"configs/{name}.yaml is not a preset of params.yaml but {NOT_PRESETS[name]}")
    path = root / "configs" / f"{name}.yaml"
    if not path.is_file():
        names = ", ".join(preset_names(root)) or "none"
        raise StudyError(f"no preset {name!r} (no file configs/{name}.yaml); choose one of: {names}")
    overlay = read_mapping(path)
    base = overlay.pop("base", None)
    if base is None:
        return merged(read_mapping(root / "params.yaml"), overlay)
    if name in _within or base == name:
        raise StudyError(f"configs/{name}.yaml: base: {base} makes a loop of presets "
                         f"({' -> '.join([*_within, name, base])}); name a preset that does not build on this one")
    return merged(preset_params(root, str(base), (*_within, name)), overlay)


def header(text: str) -> str:
    """The comment lines that open a YAML file's text (the header the report prints), each with its newline."""
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(lines)


def params_text(params: dict, comment: str = "") -> str:
    """``params`` as the text of a params.yaml: ``comment`` (comment lines) first, then the sections in order."""
    body = yaml.safe_dump(params, sort_keys=False, default_flow_style=None, allow_unicode=True, width=118)
    return comment + body


def preset_comment(root: Path, name: str) -> str:
    """The comment that opens preset ``name``'s params.yaml: the preset's header (what the report prints as its
    study's design), a blank line, then a line saying where the file came from."""
    return (header((root / "configs" / f"{name}.yaml").read_text()) + f"\n# Written by `study preset {name}`: "
            f"params.yaml with configs/{name}.yaml merged over it. Edit the preset, not this file.\n")


def preset_text(root: Path, name: str) -> str:
    """The text of preset ``name``'s params.yaml (raw: validate ``preset_params`` first where it matters)."""
    return params_text(preset_params(root, name), preset_comment(root, name))


def project_files(root: Path) -> list[str]:
    """The files of the project at ``root`` that a working copy takes, relative to it: tracked and untracked (not
    ignored) files of its git repository, without pipeline outputs (reports/, runs/, data/) and dvc.lock, but with
    the committed inputs among them (``COMMITTED_INPUTS``)."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                                cwd=root, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        raise StudyError(f"{root}: not a git checkout (or no git on PATH); run from a clone of the project") from None
    return [rel for rel in listed if rel and (rel in COMMITTED_INPUTS or not rel.startswith(_NOT_COPIED))
            and rel != "dvc.lock" and (root / rel).is_file()]


def working_copy(root: Path, dest: Path, params: dict | None = None, comment: str = "") -> Path:
    """A fresh git + DVC working copy of the project at ``root`` in ``dest`` (see :func:`project_files`), with
    ``params`` (preceded by ``comment``) as its params.yaml (none given: root's own), committed so that DVC works
    there; returns ``dest``."""
    files = project_files(root)
    dest.mkdir(parents=True, exist_ok=True)
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)
    if params is not None:
        (dest / "params.yaml").write_text(params_text(params, comment))
    commit_all(dest, "working copy")
    return dest


def commit_all(project: Path, message: str) -> None:
    """``git init`` in ``project`` and commit every file there (DVC needs a repository to track its stages)."""
    for args in (["init", "-q"], ["add", "-A"],
                 ["-c", "user.name=study", "-c", "user.email=study@localhost", "commit", "-qm", message]):
        subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)
