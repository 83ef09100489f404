"""Where a report came from, recorded so that a reader can check it: the SHA-256 of every input it depends on.

``provenance.json`` holds the SHA-256 of ``params.yaml``, of every ``study/`` source file a stage of the
pipeline depends on (the ``deps`` of ``dvc.yaml``, folders expanded, bytecode caches skipped as DVC skips
them), of the prepared data's manifest, and of each run's :data:`RUN_FILES`; paths are relative to the folder
of ``dvc.yaml``: the study's runs and, where the study has a budget check, the longer runs of ``runs_2x/``,
whose test top-1 the budget check's verdicts rest on. All of them are written before the report stage runs, and
none after it. ``params.yaml``, the manifest, both runs folders and the report stage's own code are
dependencies of the stage, so their digests equal ``sha256sum`` of the files whenever ``dvc status`` is clean.
The other stages' code is not (a test holds each stage's code deps to what it imports): an edit reruns its
stage and the report only if that stage's outputs change, so a digest that differs from its file names code
edited since the report was written, without effect on its inputs. Not digested: ``dvc.lock``, which DVC rewrites right after the report stage (its digest
could never be checked), and ``dvc.yaml``, which DVC does not accept as a dependency. Beside the digests: the
git commit, software versions and the processor.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import yaml

from study.core.version import study_version

# The study's own version is recorded apart ("version": study.core.version, current in an editable install).
_PACKAGES = ("torch", "torchvision", "timm", "numpy", "scipy", "scikit-learn", "pandas", "matplotlib",
             "seaborn", "dvc")
# Files the pipeline itself rewrites while it runs: they do not make the code "dirty".
_PIPELINE_OUTPUTS = ("dvc.lock", "reports/", "runs/", "data/")
# What a run folder holds that the analyses and the report read (init.pt: the weights before the first step,
# the attention stage's baseline). history.csv and resume.pt are DVC outputs it does not cache: left out.
RUN_FILES = ("metrics.json", "init.pt", "model.pt", "predictions.npy")
# The package's folder, the one whose files count as the pipeline's code.
CODE_ROOT = "study"


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.rstrip("\n")  # not strip(): porcelain lines start with a meaningful space


def code_state() -> dict:
    """The git commit and whether tracked source files differ from it (pipeline outputs excluded)."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") or ""
    changed = [line[3:] for line in status.splitlines() if line[3:] and not line[3:].startswith(_PIPELINE_OUTPUTS)]
    return {"git_commit": commit, "git_dirty": bool(changed), "dirty_files": changed}


def file_digest(path: str | Path) -> str | None:
    """SHA-256 of the file's bytes (what ``sha256sum`` prints), or ``None`` when there is no such file."""
    path = Path(path)
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):  # streamed: model weights can be large
            digest.update(block)
    return digest.hexdigest()


def _is_cache(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix == ".pyc"


def pipeline_code(pipeline: str | Path) -> list[Path]:
    """Every file under ``study/`` that a stage of ``pipeline`` (``dvc.yaml``) lists in its ``deps``, folders
    expanded and bytecode left out, sorted (paths as DVC resolves them: from the pipeline's folder)."""
    root = Path(pipeline).parent
    stages = (yaml.safe_load(Path(pipeline).read_text()) or {}).get("stages", {})
    files: set[Path] = set()
    for stage in stages.values():
        for dep in stage.get("deps", []) or stage.get("do", {}).get("deps", []):
            path = Path(next(iter(dep)) if isinstance(dep, dict) else dep)
            if "${" in str(path) or path.parts[:1] != (CODE_ROOT,):
                continue
            found = [p for p in (root / path).rglob("*") if p.is_file()] if (root / path).is_dir() else [root / path]
            files.update(p for p in found if not _is_cache(p))
    return sorted(files)


def run_files(*runs_dirs: str | Path) -> list[Path]:
    """Each finished run's :data:`RUN_FILES` that exist, folder by folder of ``runs_dirs`` and run by run (a run is
    a folder with ``metrics.json``); a runs folder that does not exist (no budget check) holds none."""
    return [folder / name for runs_dir in runs_dirs
            for folder in sorted(p.parent for p in Path(runs_dir).rglob("metrics.json"))
            for name in RUN_FILES if (folder / name).is_file()]


def digests(paths: list[Path], root: str | Path) -> dict[str, str | None]:
    """``{path relative to root: SHA-256}`` of each of ``paths`` (symbolic links kept, as a reader's shell
    would name the files)."""
    return {Path(os.path.relpath(os.path.abspath(p), os.path.abspath(root))).as_posix(): file_digest(p) for p in paths}


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def cpu_description(cpuinfo: str | Path = "/proc/cpuinfo") -> dict:
    """The processor the numbers came from. CPU results change with the kernels torch dispatches to (its
    capability, e.g. AVX512 or AVX2), and every wall time with the processor: Linux's ``/proc/cpuinfo``
    names it (elsewhere, the platform's name)."""
    import torch

    fields: dict[str, str] = {}
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())  # the first processor's entry
    except OSError:
        pass
    return {
        "model_name": fields.get("model name") or platform.processor() or "unknown",
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "logical_cpus": os.cpu_count(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def provenance(*, params_path: str | Path, pipeline: str | Path, manifest: str | Path,
               runs_dirs: list[str | Path], devices: list[str], train_seconds: float) -> dict:
    """The record written as ``provenance.json``: code state, the digests above, software, hardware, and the
    devices and total time of training (``devices``, ``train_seconds``: from the run table). ``runs_dirs``: the
    study's runs folder, then the budget check's (``runs_2x``) where the study has one; one digest list holds
    both, each path naming its folder."""
    root = Path(pipeline).parent
    return {
        "version": study_version(),
        **code_state(),
        "params_sha256": file_digest(params_path),
        "params": Path(params_path).read_text(),
        "code_sha256": digests(pipeline_code(pipeline), root),
        "data_sha256": digests([Path(manifest)], root),
        "runs_sha256": digests(run_files(*runs_dirs), root),
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_description(),
        "training_devices": sorted(set(devices)),
        "training_seconds_total": round(train_seconds, 1),
        "generated_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
