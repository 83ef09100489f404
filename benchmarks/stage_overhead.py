"""What a training stage's process costs beyond its optimiser steps: its wall time minus its ``train_seconds``.

Why: every DVC training stage is a new ``study train`` process, so what it does before its first step and after
its last (start Python, import torch and the study, read the data, evaluate, write the run) is paid once per run: 27
times in the smoke preset. The target on a 2-core CPU like CI's is 3 s
(docs/performance.md, where the measured overhead is quoted); this reports it and its verdict, it asserts nothing.

How: the preset's data is prepared once by the real ``prepare`` and ``subsets`` stages in a temporary folder; then
each model's training stage runs as the pipeline runs it (``python -m study train``, its own process, from the
checkout) ``--repeats`` times after one untimed warm-up round (the first start reads every file from disk), the
models interleaved round by round so that a busy spell of the machine falls on all of them alike. A run's overhead
is its process's wall time minus the ``train_seconds`` its metrics.json records; the median over the repeats is
reported, with every value.

Run: ``python -m benchmarks.stage_overhead [--preset smoke] [--model resnet --model vit] [--repeats 3]
[--out overhead.csv]`` (the preset's dataset must be at hand: the smoke preset's digits always are).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]  # the checkout whose `study` the stages run
TARGET_SECONDS = 3.0  # per training stage on the 2-core CPU (docs/performance.md)


def _timed(argv: list[str]) -> float:
    """Wall seconds of ``python -m study <argv>`` run from the checkout, which must succeed."""
    tic = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "study", *argv], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - tic
    if result.returncode != 0:
        raise RuntimeError(f"`study {' '.join(argv)}` failed:\n{result.stderr[-2000:]}")
    return seconds


def prepare(preset: str, folder: Path) -> tuple[Path, float, int]:
    """The preset's params.yaml in ``folder``, with its data prepared and its subsets drawn there by the real
    stages; returns (params file, the preset's first fraction, its first seed)."""
    from study.presets import preset_params, preset_text

    raw = preset_params(ROOT, preset)
    params = folder / "params.yaml"
    params.write_text(preset_text(ROOT, preset))
    _timed(["prepare", "--params", str(params), "--out", str(folder / "prepared")])
    _timed(["subsets", "--params", str(params), "--prepared", str(folder / "prepared"), "--out",
            str(folder / "subsets")])
    return params, float(raw["fractions"][0]), int(raw["seeds"][0])


def training_overheads(params: Path, data: Path, models: list[str], fraction: float, seed: int, repeats: int,
                       runs: Path) -> pd.DataFrame:
    """One row per timed training stage: model, repeat, wall seconds, train_seconds and their difference."""
    rows = []
    for repeat in range(repeats + 1):  # round 0 is the warm-up, not reported
        for model in models:
            run = runs / f"{model}-{repeat}"
            wall = _timed(["train", "--params", str(params), "--model", model, "--fraction", str(fraction),
                           "--seed", str(seed), "--prepared", str(data / "prepared"),
                           "--subset", str(data / "subsets" / f"s{seed}" / f"f{fraction}.npy"),
                           "--validation", str(data / "subsets" / "validation.npy"), "--run", str(run)])
            train = json.loads((run / "metrics.json").read_text())["train_seconds"]
            if repeat:
                rows.append({"model": model, "repeat": repeat, "wall_s": wall, "train_s": train,
                             "overhead_s": wall - train})
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: the median overhead, wall and training time over the repeats, every overhead, and the verdict
    against :data:`TARGET_SECONDS`."""
    rows = []
    for model, runs in table.groupby("model", sort=False):
        overhead = statistics.median(runs["overhead_s"])
        rows.append({"model": model, "runs": len(runs), "median_overhead_s": overhead,
                     "median_wall_s": statistics.median(runs["wall_s"]),
                     "median_train_s": statistics.median(runs["train_s"]),
                     "all_overhead_s": " ".join(f"{v:.2f}" for v in runs["overhead_s"]),
                     "target_s": TARGET_SECONDS, "met": overhead <= TARGET_SECONDS})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="smoke", help="a configs/ name (default smoke)")
    parser.add_argument("--model", action="append", help="a key of models (repeatable; default resnet and vit)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds after the warm-up (default 3)")
    parser.add_argument("--out", type=Path, help="also write every timed run as CSV here")
    args = parser.parse_args(argv)
    models = args.model or ["resnet", "vit"]
    with tempfile.TemporaryDirectory(prefix="stage-overhead-") as scratch:
        folder = Path(scratch)
        try:
            params, fraction, seed = prepare(args.preset, folder)
            table = training_overheads(params, folder, models, fraction, seed, args.repeats, folder / "runs")
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    shown = summary(table)
    print(f"training stage overhead ({args.preset} preset, fraction {fraction}, seed {seed}; wall time minus "
          f"train_seconds, median of {args.repeats} after a warm-up):")
    print(shown.round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
