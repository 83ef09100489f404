"""What holds a model back, measured on the validation split: one training run per lever setting.

A *lever* is one knob of the recipe (warmup, peak lr, weight decay, label smoothing, CutMix, batch size,
depth/width, patch size, budget). A grid file names, per lever, the settings to try as small deltas on a
base parameters file; every trial trains one model on one fraction with one seed through the study's own
``study train`` code (:func:`study.train.stage.run`), so a trial is exactly a run of the pipeline
with that delta. Only the validation split and the training subset are read back: the test set, which the
trainer scores as it always does, never enters the table (recipes are chosen on validation).

Grid file (YAML)::

    base: params.yaml                  # relative to the grid file's folder's parent, or absolute
    model: vit
    fraction: 0.01
    seed: 0                            # or seeds: [0, 1]: every setting once per seed, averaged in the table
    common: {train: {augment: {hflip: false}}}   # optional: a delta applied to the base before every trial
    levers:
      base: {"as in the base": {}}     # the base itself; every lever's row shows it beside its settings
      lr:                              # lever name
        "1e-3": {models: {vit: {lr: 1.0e-3}}}      # setting label -> delta, merged into the base
        "4e-3": {models: {vit: {lr: 4.0e-3}}}
      patch size: {"7": {models: {vit: {arch_args: {patch_size: 7}}}, fraction: 0.1}}  # also model, fraction

Output: one CSV row per trial (lever, setting, validation top-1 and loss, train top-1, still improving,
steps, seconds), and a Markdown table with one row per lever.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from study.core.config import parse_params
from study.data.subsets import subset_file
from study.core.errors import StudyError
from study.core.io import atomic_path, read_json
from study.outputs.tables import markdown_table
from study.presets import merged as merge  # a delta merges into the base as a preset does into params.yaml

_COLUMNS = ["lever", "setting", "model", "fraction", "seed", "val_top1", "val_loss", "train_top1",
            "still_improving", "val_loss_change_last_quarter", "steps", "epochs", "train_seconds"]


@dataclass(frozen=True)
class Trial:
    lever: str
    setting: str
    model: str
    fraction: float
    seed: int
    delta: dict


def read_grid(path: Path) -> tuple[dict, list[Trial]]:
    """The base parameters (raw mapping) and the trials a grid file names."""
    if not path.is_file():
        raise StudyError(f"{path}: no such lever grid; pass --grid <file> (see study/levers.py)")
    try:
        grid = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        raise StudyError(f"{path}: not valid YAML; fix the syntax (grid format: study/levers.py)") from None
    if not isinstance(grid, dict) or not isinstance(grid.get("levers"), dict):
        raise StudyError(f"{path}: expected a mapping with a `levers` mapping; see the grid format in study/levers.py")
    missing = {"base", "model", "fraction", "levers"} - set(grid)
    if missing:
        raise StudyError(f"{path}: missing {', '.join(sorted(missing))}; see the grid format in study/levers.py")
    base_path = Path(grid["base"])
    base = yaml.safe_load(base_path.read_text()) if base_path.is_file() else None
    if base is None:
        raise StudyError(f"{path}: base {base_path} is not a parameters file (paths are relative to the project root)")
    base = merge(base, grid.get("common") or {})
    seeds = grid.get("seeds", [grid.get("seed", 0)])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise StudyError(f"{path}: seeds = {seeds!r}; give a list of non-negative integers, e.g. seeds: [0, 1]")
    trials = []
    for lever, settings in grid["levers"].items():
        for setting, delta in settings.items():
            delta = dict(delta or {})
            model, fraction = delta.pop("model", grid["model"]), float(delta.pop("fraction", grid["fraction"]))
            trials.extend(Trial(lever, str(setting), model, fraction, int(seed), delta) for seed in seeds)
    for trial in trials:  # every delta must give valid params before any training starts
        params = parse_params(merge(base, trial.delta), source=f"{path} ({trial.lever}: {trial.setting})")
        if trial.fraction not in params.fractions:
            raise StudyError(f"{path}: fraction {trial.fraction} is not in the base's fractions {params.fractions}")
    return base, trials


def run_trial(base: dict, trial: Trial, prepared: Path, subsets: Path, teacher: Path | None = None) -> dict:
    """Train one trial in a scratch folder; return its CSV row (validation and training figures only)."""
    from study.train.stage import run as train_stage  # torch and the models: only when a trial runs

    params = parse_params(merge(base, trial.delta), source=f"{trial.lever}: {trial.setting}")
    with tempfile.TemporaryDirectory(prefix="levers-") as tmp:
        out = Path(tmp)
        tic = time.perf_counter()
        train_stage(
            params, trial.model, trial.fraction, trial.seed, prepared,
            subset_file(subsets, trial.seed, trial.fraction), subsets / "validation.npy", teacher,
            out / "model.pt", out / "metrics.json", out / "history.csv", out / "resume.pt", out / "predictions.npy",
        )
        metrics = read_json(out / "metrics.json")
    return {
        "lever": trial.lever, "setting": trial.setting, "model": trial.model, "fraction": trial.fraction,
        "seed": trial.seed, "val_top1": metrics["val_top1"], "val_loss": metrics["val_loss"],
        "train_top1": metrics["train_top1"], "still_improving": metrics["convergence"]["still_improving"],
        "val_loss_change_last_quarter": metrics["convergence"]["val_loss_change_last_quarter"],
        "steps": metrics["budget"]["steps"], "epochs": metrics["budget"]["epochs"],
        "train_seconds": round(time.perf_counter() - tic, 1),
    }


def lever_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per lever: each setting's validation top-1 (train top-1; * = still improving in any seed), and the
    best; with several seeds, each setting's mean over them (the seeds column says how many)."""
    out = []
    rows = (rows.groupby(["lever", "setting", "model", "fraction"], sort=False)
            .agg(val_top1=("val_top1", "mean"), train_top1=("train_top1", "mean"),
                 still_improving=("still_improving", "any"), seeds=("seed", "nunique")).reset_index())
    base = rows[rows["lever"] == "base"]
    for lever, group in rows[rows["lever"] != "base"].groupby("lever", sort=False):
        # every lever against the unchanged base, where the base trains the lever's model
        group = pd.concat([base[base["model"].isin(group["model"])], group], ignore_index=True)
        cells = [f"{r.setting}: {100 * r.val_top1:.1f} ({100 * r.train_top1:.0f}{'*' if r.still_improving else ''})"
                 for r in group.itertuples()]
        best = group.loc[group["val_top1"].idxmax()]
        out.append({"lever": lever, "model": best["model"], "fraction": best["fraction"],
                    "seeds": int(group["seeds"].min()),
                    "settings: val top-1 % (train top-1 %)": "; ".join(cells),
                    "best on validation": best["setting"],
                    "spread (points)": round(100 * (group["val_top1"].max() - group["val_top1"].min()), 1)})
    return pd.DataFrame(out)


def sweep(grid: Path, prepared: Path, subsets: Path, out_csv: Path, out_md: Path,
          levers: list[str] | None = None) -> str:
    """Run every trial of ``grid`` not yet in ``out_csv`` (a killed sweep resumes), then write the table."""
    base, trials = read_grid(grid)
    if levers:
        trials = [t for t in trials if t.lever in levers]
    done = pd.read_csv(out_csv) if out_csv.is_file() else pd.DataFrame(columns=_COLUMNS)
    finished = set(zip(done["lever"], done["setting"].astype(str), done["seed"].astype(int)))
    for trial in trials:
        if (trial.lever, trial.setting, trial.seed) in finished:
            continue
        row = run_trial(base, trial, prepared, subsets)
        print(f"levers: {trial.lever}={trial.setting} (seed {trial.seed}): val top-1 {row['val_top1']:.4f}, "
              f"train top-1 {row['train_top1']:.4f}, still improving {row['still_improving']}")
        done = pd.concat([done, pd.DataFrame([row])], ignore_index=True)
        with atomic_path(out_csv) as tmp:
            done.to_csv(tmp, index=False)
        write_lever_table(done, grid, out_md)  # after every trial: a stopped sweep leaves a table of what it ran
    table = write_lever_table(done, grid, out_md)
    return f"levers: {len(done)} trials, {table.shape[0]} levers -> {out_csv}, {out_md}"


def write_lever_table(done: pd.DataFrame, grid: Path, out_md: Path) -> pd.DataFrame:
    """Write the one-row-per-lever Markdown table of the trials in ``done``; return the table."""
    table = lever_table(done)
    header = (f"# Levers: validation top-1 per recipe setting\n\n*Generated by `study levers --grid {grid}`; do not "
              "edit.* One training run per setting, a delta on the grid's base (first setting of every row, where it "
              "trains the row's model), scored on the validation split, never the test set. In brackets: top-1 on the run's own training images, "
              "unaugmented; `*`: still improving at the end (validation loss fell more than 1% over the last "
              "quarter of steps). With several seeds, each cell is their mean. Spread: best minus worst setting of the "
              "row (no interval).\n\n")
    with atomic_path(out_md) as tmp:
        tmp.write_text(header + markdown_table(table, 1) + "\n")
    return table
