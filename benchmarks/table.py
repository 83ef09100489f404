"""The benchmark's results table: one row per (model, path, DataLoader workers), its speed-ups, its printout.

The ``path`` column names how a row's step was run: ``study`` (:mod:`benchmarks.study_path`),
``study+augment`` (the same under heavy augmentation, to show what augmentation costs) or ``usual``
(:mod:`benchmarks.usual_path`). Throughput is the median of the timed windows and ``spread_pct`` their range,
so that a reader sees how steady a number is; the CSV keeps every column, the terminal shows the compared ones.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from benchmarks.measure import Timing, memory_kind
from benchmarks.workload import BenchModel
from study.core.io import atomic_path
from study.train.augment import Augmentation

STUDY, STUDY_AUGMENTED, USUAL = "study", "study+augment", "usual"
_MIB = 2**20


def result_row(spec: BenchModel, path: str, workers: int | None, implementation: str, data: str, precision: str,
               augmentation: Augmentation, timing: Timing, batch_size: int, steps: int, train_flops: int,
               peak_flops: float, peak_dtype: str, device: torch.device) -> dict[str, Any]:
    """One measurement as a row: img/s (median window), its spread, memory, FLOPs and MFU."""
    rates = [batch_size * steps / seconds for seconds in timing.window_seconds]
    images_per_s = statistics.median(rates)
    return {
        "model": spec.name, "arch": spec.arch, "arch_args": json.dumps(spec.arch_args, sort_keys=True),
        "path": path, "workers": workers, "implementation": implementation,
        "data": data, "precision": precision, "augment": json.dumps(augmentation.as_dict()), "batch_size": batch_size,
        "images_per_s": images_per_s, "ms_per_step": 1000 * batch_size / images_per_s,
        "spread_pct": 100 * (max(rates) - min(rates)) / images_per_s,
        "peak_mem_mib": timing.peak_memory_bytes / _MIB, "memory": memory_kind(device),
        "train_gflop_per_image": train_flops / 1e9, "achieved_gflop_s": train_flops * images_per_s / 1e9,
        "peak_gflop_s": peak_flops / 1e9, "peak_dtype": peak_dtype,
        "mfu": train_flops * images_per_s / peak_flops,
    }


def with_speedups(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a table with ``speedup``: study img/s over this usual row's; on a study row (plain or
    augmented), its img/s over the fastest usual row of the same model (the conservative ratio). The
    ``study+augment`` row also gets ``augment_cost_pct``, the extra time per step that heavy augmentation
    takes, as a share of the plain study step's."""
    table = pd.DataFrame(rows)
    speedup, cost = [], []
    for _, row in table.iterrows():
        same = table[table["model"] == row["model"]]
        study_rate = same.loc[same["path"] == STUDY, "images_per_s"].iloc[0]
        usual_rates = same.loc[same["path"] == USUAL, "images_per_s"]
        if row["path"] == USUAL:
            speedup.append(study_rate / row["images_per_s"])
        else:
            speedup.append(row["images_per_s"] / usual_rates.max() if len(usual_rates) else math.nan)
        cost.append(100 * (study_rate / row["images_per_s"] - 1) if row["path"] == STUDY_AUGMENTED else math.nan)
    return table.assign(speedup=speedup, augment_cost_pct=cost)


def format_table(table: pd.DataFrame) -> str:
    """The columns a reader compares, rounded for the terminal."""
    several = table["peak_dtype"].nunique() > 1  # precisions side by side: name each row's
    shown = pd.DataFrame({
        "model": table["model"],
        "path": [(p if pd.isna(w) else f"{p} (w={int(w)})") + (f", {d}" if several else "")
                 for p, w, d in zip(table["path"], table["workers"], table["peak_dtype"])],
        "img/s": table["images_per_s"].round(0).astype(int),
        "ms/step": table["ms_per_step"].round(1),
        "spread %": table["spread_pct"].round(1),
        "peak MiB": table["peak_mem_mib"].round(0).astype(int),
        "GFLOP/img": table["train_gflop_per_image"].round(4),
        "MFU %": (100 * table["mfu"]).round(2),
        "speed-up": table["speedup"].round(2),
        "implementation": table["implementation"],
    })
    if (table["path"] == STUDY_AUGMENTED).any():
        shown.insert(len(shown.columns) - 1, "aug cost %", table["augment_cost_pct"].round(1))
    peaks = table.groupby("peak_dtype", sort=False)["peak_gflop_s"].first()
    precisions = ", ".join(sorted(set(table["precision"])))
    footer = ("peak: " + ", ".join(f"{gflops:.0f} GFLOP/s ({dtype} matmul)" for dtype, gflops in peaks.items())
              + f" measured; memory: {table['memory'].iloc[0]}; precision: {precisions}")
    return shown.to_string(index=False) + "\n" + footer


def write_csv(table: pd.DataFrame, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        table.to_csv(tmp, index=False)
