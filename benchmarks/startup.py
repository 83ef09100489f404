"""How long a process takes to start: ``import torch`` (with CUDA's initialisation on a GPU) against
``study train --help``, interleaved so that a busy moment of the machine touches both alike.

Every DVC stage is a new process, so its start is paid once per stage: on the default study's 63 stages, a
second of start is a minute of the study.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

import pandas as pd
import torch


def commands(cuda: bool) -> dict[str, list[str]]:
    """The processes timed, by label; ``study`` is the one on PATH (on a device machine, the kit's)."""
    torch_start = "import torch" + ("; torch.cuda.init()" if cuda else "")
    study = shutil.which("study")
    train_help = [study, "train", "--help"] if study else [sys.executable, "-m", "study", "train", "--help"]
    return {f"python -c '{torch_start}'": [sys.executable, "-c", torch_start], "study train --help": train_help}


def time_startup(repeats: int, cuda: bool) -> pd.DataFrame:
    """Median wall seconds of each command over ``repeats`` interleaved rounds, and the ratio to the first."""
    timed = commands(cuda)
    seconds: dict[str, list[float]] = {label: [] for label in timed}
    for _ in range(repeats):
        for label, argv in timed.items():
            tic = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            seconds[label].append(time.perf_counter() - tic)
    base = statistics.median(next(iter(seconds.values())))
    return pd.DataFrame([{"command": label, "median_s": statistics.median(values), "runs": len(values),
                          "ratio_to_import_torch": statistics.median(values) / base,
                          "all_s": " ".join(f"{v:.2f}" for v in values)} for label, values in seconds.items()])
