"""The budget check: is a run's test accuracy a property of the model and the data, or of the budget it was given?

Convergence is shown, not inferred from the shape of a curve. The runs of the checked fractions (every trained
model, every seed) are trained again with ``factor`` times the budget (``budget.epochs`` and ``budget.min_steps``
scaled, the cosine schedule spanning the longer run; stages ``train_2x`` and ``distill_2x``), and each model x
fraction *cell* is judged on the paired change of test top-1, ``Δ = top-1 (longer run) − top-1 (study's run)``,
one value per seed (same subset, same initialisation seed, same teacher for the distilled student):

- :func:`extra_seed_runs` — the check's extra seeds (``budget_check.seeds``), trained at the checked fractions
  only and at both budgets, join the study's runs for the pairing and nothing else;
- :func:`paired_runs` — one row per run pair: both top-1s, both step counts, Δ, and both runs' last-quarter flags;
- :func:`budget_check_table` — per cell: mean Δ, its Student-t interval, and that interval Holm-adjusted across
  the family of cells (:func:`study.stats.intervals.holm_intervals`), with the verdict of :func:`verdict`:

  * **converged** — the adjusted interval lies within ``±tolerance``: more budget changes top-1 by less than the
    tolerance (an equivalence claim; an interval at level ``1 − a`` inside the bounds is a TOST at level ``a/2``,
    so the claim is conservative);
  * **not budget-bound** — the adjusted interval's upper end is at most ``+tolerance`` but its lower end is below
    ``−tolerance``: more training would not raise top-1 by the tolerance (a one-sided claim, the one the study's
    question needs: are the study's runs short of budget?), though the longer runs may be worse by more than it
    (``lower_at_longer`` marks an interval wholly below ``−tolerance``). Converged is the stronger statement, and
    every converged cell is also not budget-bound (column ``not_budget_bound``);
  * **budget-bound** — the adjusted interval's lower end is above ``+tolerance``: the longer runs are better by
    more than the tolerance, so the study's runs measure the budget as much as the model;
  * **undetermined** — anything else: an interval too wide to tell, or a gain that may or may not exceed the
    tolerance (an upper end above ``+tolerance``);
  * **too few seeds** — fewer than :data:`~study.stats.intervals.MIN_SEEDS` paired seeds: the means are shown,
    nothing is claimed, and the cell stays out of the Holm family.

- ``seeds_to_converge`` (:func:`~study.stats.intervals.seeds_within`) — a projection, not a measurement: how many
  seeds would put a cell's interval inside ``±tolerance`` if its mean and spread held. It says what an undetermined
  verdict would cost to settle, and when no number of seeds would (a mean change beyond the tolerance).

The last-quarter flag every run records (``convergence.still_improving``, study.train.convergence) is a cheap
screen: it reads the validation loss of one run. The tables count it beside the check, so the two can be compared.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd


from study.stats.intervals import MIN_SEEDS, holm_intervals, seeds_within, t_interval
from study.core.errors import StudyError

CONVERGED, NOT_BUDGET_BOUND, BUDGET_BOUND = "converged", "not budget-bound", "budget-bound"
UNDETERMINED, TOO_FEW_SEEDS = "undetermined", "too few seeds"
VERDICTS = (CONVERGED, NOT_BUDGET_BOUND, BUDGET_BOUND, UNDETERMINED, TOO_FEW_SEEDS)

RUN_COLUMNS = ["model", "fraction", "seed", "train_images", "factor", "steps_1x", "steps_2x", "top1_1x", "top1_2x",
               "delta", "still_improving_1x", "still_improving_2x"]
CELL_COLUMNS = ["model", "fraction", "train_images", "seeds", "factor", "steps_1x", "steps_2x", "top1_1x_mean",
                "top1_2x_mean", "delta_mean", "delta_ci_low", "delta_ci_high", "adj_ci_low", "adj_ci_high",
                "adj_confidence", "p_holm", "tolerance", "verdict", "not_budget_bound", "lower_at_longer",
                "seeds_to_converge", "still_improving_1x", "still_improving_2x"]


def recorded_factor(folder: str | Path) -> float:
    """The budget factor a run recorded in its metrics.json (runs of the study's own budget record none: 1)."""
    return float(json.loads((Path(folder) / "metrics.json").read_text()).get("budget_factor", 1.0))


def with_factors(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` (a :func:`study.runs.table.collect_runs` table, with its ``folder`` column) with each run's
    recorded budget ``factor``."""
    return runs.assign(factor=[recorded_factor(folder) for folder in runs["folder"]])


def extra_seed_runs(runs: pd.DataFrame, longer: pd.DataFrame, extra_seeds) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(runs, longer)`` with the budget check's extra seeds at the study's budget moved from ``longer`` (the
    ``runs_2x`` folder, where stage ``check_1x`` writes them, under ``x1/``) to ``runs``: a run of ``longer`` joins
    ``runs`` when its recorded factor is 1 and its seed is one of ``extra_seeds``. Any other run of factor 1 stays in
    ``longer``: :func:`paired_runs` refuses it if its seed is checked and ignores it otherwise."""
    moved = np.isclose(longer["factor"].to_numpy(float), 1.0) & longer["seed"].isin(list(extra_seeds)).to_numpy()
    if not moved.any():
        return runs, longer
    return pd.concat([runs, longer[moved]], ignore_index=True), longer[~moved].reset_index(drop=True)


def paired_runs(runs: pd.DataFrame, longer: pd.DataFrame, factor: float, fractions, models, seeds) -> pd.DataFrame:
    """One row per (model, checked fraction, seed) trained at both budgets: both runs' test top-1 and steps, and
    ``delta`` = longer − study's. ``runs`` and ``longer`` are :func:`study.runs.table.collect_runs` tables of the
    study's runs and of the longer ones, each with a ``factor`` column (:func:`with_factors`); runs outside
    ``fractions``, ``models`` and ``seeds`` (runs of other parameters left in the folders) are ignored.

    Raises :class:`StudyError` when a longer run was trained at another factor, a run of the study's budget is not
    one, or a checked model x fraction has no pair at all.
    """
    keys = ["model", "fraction", "seed"]

    def chosen(df: pd.DataFrame) -> pd.DataFrame:
        return df[df["model"].isin(list(models)) & df["fraction"].isin(list(fractions)) & df["seed"].isin(list(seeds))]

    study, more = chosen(runs), chosen(longer)
    for df, wanted, where in ((study, 1.0, "the study's runs"), (more, factor, "the longer runs")):
        wrong = df[~np.isclose(df["factor"].to_numpy(float), wanted)]
        if not wrong.empty:
            r = wrong.iloc[0]
            raise StudyError(f"{r.get('folder', r['model'])}: trained at budget x{r['factor']:g}, but {where} need "
                             f"x{wanted:g} (budget_check.factor); rerun its stage (`dvc repro`)")
    both = study.merge(more, on=keys, suffixes=("_1x", "_2x"), validate="one_to_one")
    for model in models:
        for fraction in fractions:
            if not ((both["model"] == model) & (both["fraction"] == fraction)).any():
                raise StudyError(f"budget check: no {model} runs at fraction {fraction} trained at both budgets; "
                                 "train them (`dvc repro`, stages train_2x and distill_2x)")
    out = pd.DataFrame({
        "model": both["model"], "fraction": both["fraction"], "seed": both["seed"],
        "train_images": both["train_images_1x"], "factor": both["factor_2x"],
        "steps_1x": both["steps_1x"], "steps_2x": both["steps_2x"],
        "top1_1x": both["test_top1_1x"], "top1_2x": both["test_top1_2x"],
        "delta": both["test_top1_2x"] - both["test_top1_1x"],
        "still_improving_1x": both["under_trained_1x"].astype(bool),
        "still_improving_2x": both["under_trained_2x"].astype(bool),
    })
    order = {model: i for i, model in enumerate(models)}  # the study's order: teachers before students
    return out[RUN_COLUMNS].sort_values(keys, key=lambda c: c.map(order) if c.name == "model" else c, ignore_index=True)


def verdict(low: float, high: float, tolerance: float, seeds: int) -> str:
    """The verdict of one cell from the (Holm-adjusted) interval ``[low, high]`` of its mean Δ: *too few seeds*
    below ``MIN_SEEDS`` seeds, *converged* inside ``±tolerance``, *not budget-bound* with only the upper end at most
    ``+tolerance``, *budget-bound* wholly above ``+tolerance``, *undetermined* otherwise (an undefined interval
    included). The bounds count as inside, for converged and not budget-bound alike, so that every converged cell
    is not budget-bound."""
    if seeds < MIN_SEEDS:
        return TOO_FEW_SEEDS
    if not (math.isfinite(low) and math.isfinite(high)):
        return UNDETERMINED
    if -tolerance <= low and high <= tolerance:
        return CONVERGED
    if high <= tolerance:
        return NOT_BUDGET_BOUND
    if low > tolerance:
        return BUDGET_BOUND
    return UNDETERMINED


def rejudged(cells: pd.DataFrame) -> pd.DataFrame:
    """A per-cell table without the one-sided rule's column ``not_budget_bound`` (the committed preset studies'
    tables) with its verdicts given again by :func:`verdict` from its own adjusted intervals, tolerance and
    seeds, and the column added after ``verdict``; a current table is returned as it is. Only the verdict of an
    interval wholly at or below ``+tolerance`` but not inside ``±tolerance`` changes (undetermined to not
    budget-bound), and "no inference" becomes "too few seeds"."""
    if "not_budget_bound" in cells or cells.empty:
        return cells
    verdicts = [verdict(r.adj_ci_low, r.adj_ci_high, r.tolerance, int(r.seeds)) for r in cells.itertuples()]
    out = cells.assign(verdict=verdicts)
    out.insert(out.columns.get_loc("verdict") + 1, "not_budget_bound", [v in (CONVERGED, NOT_BUDGET_BOUND)
                                                                         for v in verdicts])
    return out


def budget_check_table(pairs: pd.DataFrame, confidence: float, tolerance: float) -> pd.DataFrame:
    """Per model x fraction (:data:`CELL_COLUMNS`, in the order of ``pairs``): mean top-1 at both budgets, mean Δ
    with its t-interval, the interval Holm-adjusted across every cell with at least ``MIN_SEEDS`` seeds, the
    verdict and whether it says the cell is not budget-bound (converged or not budget-bound), the seeds projected
    to show the cell converged (:func:`~study.stats.intervals.seeds_within`; a cell outside the family is projected
    as if it joined it), and how many runs of each budget the last-quarter screen flagged as still improving."""
    cells = [(key, g.sort_values("seed")) for key, g in pairs.groupby(["model", "fraction"], sort=False)]
    family = [i for i, (_, g) in enumerate(cells) if len(g) >= MIN_SEEDS]
    adjusted = dict(zip(family, holm_intervals([cells[i][1]["delta"].to_numpy(float) for i in family], confidence)))
    rows = []
    for i, ((model, fraction), g) in enumerate(cells):
        mean, _, half = t_interval(g["delta"].to_numpy(float), confidence)
        adj = adjusted.get(i)
        low, high = (adj.low, adj.high) if adj else (math.nan, math.nan)
        said = verdict(low, high, tolerance, len(g))
        rows.append({
            "model": model, "fraction": fraction, "train_images": int(g["train_images"].median()), "seeds": len(g),
            "factor": float(g["factor"].iloc[0]), "steps_1x": int(g["steps_1x"].median()),
            "steps_2x": int(g["steps_2x"].median()), "top1_1x_mean": g["top1_1x"].mean(),
            "top1_2x_mean": g["top1_2x"].mean(), "delta_mean": mean, "delta_ci_low": mean - half,
            "delta_ci_high": mean + half, "adj_ci_low": low, "adj_ci_high": high,
            "adj_confidence": adj.confidence if adj else math.nan, "p_holm": adj.p_holm if adj else math.nan,
            "tolerance": tolerance, "verdict": said,
            "not_budget_bound": said in (CONVERGED, NOT_BUDGET_BOUND),
            "lower_at_longer": bool(adj is not None and len(g) >= MIN_SEEDS and high < -tolerance),
            "seeds_to_converge": seeds_within(g["delta"].to_numpy(float), tolerance, confidence,
                                                   len(family) + (i not in adjusted)),
            "still_improving_1x": int(g["still_improving_1x"].sum()),
            "still_improving_2x": int(g["still_improving_2x"].sum()),
        })
    return pd.DataFrame(rows, columns=CELL_COLUMNS)
