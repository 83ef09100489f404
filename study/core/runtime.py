"""Process-wide switches (threads, determinism, seeds, device), set in one place.

Each command calls :func:`configure` once, first thing (the stages through :func:`study.core.entry.configured`);
nothing in the package flips a global at import.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch


# Set by `study run` (study/infra/engine) for a stage it reserved CPUs for: that many intra-op threads replace
# `train.threads`. Read only by configure(), which only a command's entry point calls.
THREADS_VARIABLE = "STUDY_THREADS"


def configure(threads: int = 0, deterministic: bool = True) -> None:
    """Set intra-op threads (0 keeps torch's default; $STUDY_THREADS, when set, replaces ``threads``) and
    deterministic kernels."""
    threads = _threads_override(threads)
    if threads > 0:
        torch.set_num_threads(threads)
    if deterministic:
        # cuBLAS needs a fixed workspace to be deterministic (CUDA docs, "Reproducibility").
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    else:  # also undoes an earlier call's determinism (``study gpu-acceptance`` benches with autotuning)
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.benchmark = True
    # TF32 matmuls on Ampere+ GPUs: a large speed-up for float32 parts, well within training noise.
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def _threads_override(threads: int) -> int:
    """``threads``, or the positive integer in $STUDY_THREADS when that is set (a one-line error otherwise)."""
    value = os.environ.get(THREADS_VARIABLE)
    if value is None:
        return threads
    if not value.strip().isdigit() or int(value) < 1:
        from study.core.errors import StudyError

        raise StudyError(f"{THREADS_VARIABLE} = {value!r}: must be a positive integer (threads); unset it to use train.threads")
    return int(value)


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch; return a CPU generator for the data order and augmentation."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def pick_device(requested: str) -> torch.device:
    """'auto' means CUDA when present; asking for CUDA without one is a user error."""
    from study.core.errors import StudyError

    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise StudyError("train.device = 'cuda' but no CUDA device is available; use 'auto' or 'cpu'")
    return torch.device(requested)
