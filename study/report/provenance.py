"""Where a report came from: code version, pipeline state, parameters, software and hardware."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

_PACKAGES = ("torch", "torchvision", "timm", "numpy", "scipy", "scikit-learn", "pandas", "matplotlib",
             "seaborn", "dvc", "vit-vs-cnn")
# Files the pipeline itself rewrites while it runs: they do not make the code "dirty".
_PIPELINE_OUTPUTS = ("dvc.lock", "reports/", "runs/", "data/")


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
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


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


def provenance(params_path: str | Path, lock_path: str | Path, devices: list[str], train_seconds: float) -> dict:
    return {
        **code_state(),
        "dvc_lock_sha256": file_digest(lock_path),
        "params_sha256": file_digest(params_path),
        "params": Path(params_path).read_text(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_description(),
        "training_devices": sorted(set(devices)),
        "training_seconds_total": round(train_seconds, 1),
        "generated_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
