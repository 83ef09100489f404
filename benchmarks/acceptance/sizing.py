"""How many seconds of GPU training a preset asks for, at the in-stage rates a device call measured: the arithmetic
that sizes a GPU preset for one 10-minute call.

Each training run of the preset (every baseline and student at every fraction and seed, and the budget check's
longer runs and extra seeds) takes its budget's images (study.train.stage.scaled_budget) at its model's measured
rate: the median img/s of that model's longest runs in a ``device-runs.csv`` that ``study gpu-acceptance`` wrote.
It counts training alone, run after run: process starts, evaluation, DVC's bookkeeping and the analysis stages
come on top (docs/gpu/: a 300-step stage took 11-21 s of wall time for 1-2 s of training), and stages run side by
side share the one device.

    python -m benchmarks.acceptance.sizing --preset confirmatory_gpu --rates docs/gpu/h200-2026-11-28/device-runs.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from study.core.config import Params, parse_params
from study.core.errors import StudyError
from study.data.subsets import class_counts
from study.presets import preset_params
from study.train.stage import scaled_budget

# Training images per class before the validation split is carved out (the datasets' published sizes).
TRAIN_PER_CLASS = {"fashionmnist": (6000,) * 10, "cifar10": (5000,) * 10, "cifar100": (500,) * 100}
# A model's rate is read from its runs of at least this many steps: shorter ones time their start-up, not the step.
LONG_RUN_STEPS = 800


def training_runs(params: Params) -> pd.DataFrame:
    """One row per training run the preset's pipeline trains: model, fraction, seed, budget factor, steps, images."""
    counts = np.array(TRAIN_PER_CLASS.get(params.data.dataset, ()))
    if not counts.size:
        raise StudyError(f"sizing knows no class sizes for dataset {params.data.dataset!r}; "
                         f"size a preset of {', '.join(TRAIN_PER_CLASS)}")
    pool = counts - class_counts(counts, params.data.val_fraction)  # (classes,) after the validation split
    models = [*params.baselines, *([params.distill.student] if params.distill else [])]
    check = params.budget_check
    factors = [(1.0, f, params.seeds) for f in params.fractions]
    if check is not None:
        factors += [(check.factor, f, params.seeds) for f in check.fractions]  # the study's seeds, twice the budget
        factors += [(factor, f, check.seeds) for f in check.fractions for factor in (1.0, check.factor)]
    rows = []
    for factor, fraction, seeds in factors:
        images = int(class_counts(pool, fraction).sum())
        budget = scaled_budget(params.budget, images, int(pool.sum()), factor)
        rows += [{"model": m, "fraction": fraction, "seed": s, "budget_factor": factor, "steps": budget.steps,
                  "images": budget.images_seen} for m in models for s in seeds]
    return pd.DataFrame(rows)


def measured_rates(device_runs: pd.DataFrame) -> pd.Series:
    """Per model, the median in-stage img/s of its runs of at least LONG_RUN_STEPS steps."""
    long = device_runs[device_runs["steps"] >= LONG_RUN_STEPS]
    return long.groupby("model")["images_per_s"].median()


def sizing(params: Params, rates: pd.Series) -> pd.DataFrame:
    """Runs, images and seconds of training per model, fraction and budget factor, at ``rates``."""
    runs = training_runs(params)
    missing = sorted(set(runs["model"]) - set(rates.index))
    if missing:
        raise StudyError(f"no measured rate for {', '.join(missing)} (no run of {LONG_RUN_STEPS}+ steps in the "
                         "device-runs table); give a table from a call that trained them")
    table = runs.groupby(["model", "fraction", "budget_factor"], sort=False).agg(
        runs=("seed", "size"), steps=("steps", "first"), images=("images", "sum")).reset_index()
    table["img_per_s"] = table["model"].map(rates).round(0)
    table["seconds"] = (table["images"] / table["model"].map(rates)).round(1)
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", required=True, help="a configs/ name")
    parser.add_argument("--rates", type=Path, required=True, help="a device-runs.csv of `study gpu-acceptance`")
    args = parser.parse_args(argv)
    try:
        if not args.rates.is_file():
            raise StudyError(f"--rates {args.rates}: no such file; give a device-runs.csv that `study gpu-acceptance` "
                             "wrote (docs/gpu/*/device-runs.csv)")
        params = parse_params(preset_params(Path.cwd(), args.preset), source=f"configs/{args.preset}.yaml")
        table = sizing(params, measured_rates(pd.read_csv(args.rates)))
    except StudyError as err:
        raise SystemExit(f"error: {err}") from None
    print(table.to_string(index=False))
    print(f"{args.preset}: {int(table['runs'].sum())} runs, {table['images'].sum() / 1e6:.1f} M training images, "
          f"{table['seconds'].sum():.0f} s of training one run after another at the rates of {args.rates}")


if __name__ == "__main__":
    main()
