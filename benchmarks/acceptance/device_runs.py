"""The default study's runs on the GPU against the same runs on the CPU: accuracy, and where a stage's time goes.

Why: a GPU run differs from the committed CPU run of the same params and seed (bf16 autocast, other kernels,
cuDNN's non-deterministic attention backward), so its test top-1 differs too; the question is whether it differs
systematically, which would make GPU and CPU results incomparable. Each run is one paired observation (same
model, fraction and seed on both devices); per model, the mean paired difference gets a t-interval,
Holm-adjusted across the models (:func:`study.stats.intervals.holm_intervals`), and where it includes 0 the
equivalence bound it supports.

The GPU's runs are read from the train stage's one-line summaries in the timed ``dvc repro`` log
(the line `study.train.stage.run` returns); the budget check's longer runs are left out (their line names
the budget factor). The CPU's are the ``curves`` stage's ``runs.csv``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from study.core.io import read_json
from study.stats.intervals import equivalence_bound, holm_intervals

# "train: vit fraction 0.02 seed 1: test top-1 0.7412 after 300 steps x 128 (...) in 5s, 8036 img/s on NVIDIA H200"
_SUMMARY = re.compile(r"^train: (?P<model>\S+) fraction (?P<fraction>[\d.e-]+) seed (?P<seed>\d+): "
                      r"test top-1 (?P<test_top1>[\d.]+).* in (?P<train_seconds>\d+)s, ", re.MULTILINE)


def runs_from_log(text: str) -> pd.DataFrame:
    """One row per finished training run (model, fraction, seed, test_top1, train_seconds) in a repro log."""
    rows = [{"model": m["model"], "fraction": float(m["fraction"]), "seed": int(m["seed"]),
             "test_top1": float(m["test_top1"]), "train_seconds": int(m["train_seconds"])}
            for m in _SUMMARY.finditer(text)]
    return pd.DataFrame(rows, columns=["model", "fraction", "seed", "test_top1", "train_seconds"])


def runs_from_metrics(project: Path) -> pd.DataFrame:
    """One row per finished training run of ``project`` (every ``metrics.json`` under it): where it trained, how
    fast (its own steps' img/s, which leave out process start and evaluation), and whether its step was a graph."""
    rows = []
    for path in sorted(project.glob("runs*/**/metrics.json")):
        m = read_json(path)
        rows.append({"run": str(path.parent.relative_to(project)), "model": m["model"], "fraction": m["fraction"],
                     "seed": m["seed"], "budget_factor": m.get("budget_factor", 1.0), "test_top1": m["test_top1"],
                     "steps": m["budget"]["steps"], "train_seconds": m["train_seconds"],
                     "images_per_s": m["throughput_images_per_s"], "graph": m.get("graph", "off"),
                     "device": m["device"], "precision": m["precision"],
                     "cell_seeds": len(m.get("cell", {}).get("seeds", [m["seed"]]))})
    return pd.DataFrame(rows)


def paired_runs(device_runs: pd.DataFrame, cpu_runs: pd.DataFrame) -> pd.DataFrame:
    """The runs both devices finished, with the difference in points (100 × (GPU − CPU) test top-1)."""
    cpu = cpu_runs[["model", "fraction", "seed", "test_top1"]].rename(columns={"test_top1": "cpu_top1"})
    pairs = device_runs.rename(columns={"test_top1": "gpu_top1"}).merge(cpu, on=["model", "fraction", "seed"])
    return pairs.assign(diff_points=100 * (pairs["gpu_top1"] - pairs["cpu_top1"]))


def compare(pairs: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Per model: runs, mean GPU − CPU difference with its Holm-adjusted interval, the equivalence bound where
    that interval includes 0, and the largest single-run difference."""
    groups = list(pairs.groupby("model", sort=False))
    adjusted = holm_intervals([g["diff_points"].to_numpy() for _, g in groups], confidence)
    rows = []
    for (model, g), a in zip(groups, adjusted):
        rows.append({"model": model, "runs": len(g), "fractions": g["fraction"].nunique(),
                     "gpu_top1": 100 * g["gpu_top1"].mean(), "cpu_top1": 100 * g["cpu_top1"].mean(),
                     "diff_points": a.mean, "low": a.low, "high": a.high, "confidence": a.confidence,
                     "significant": a.significant,
                     "equivalence_bound": equivalence_bound(a.low, a.high, a.significant, len(g)),
                     "largest_run_diff": g["diff_points"].abs().max()})
    return pd.DataFrame(rows)
