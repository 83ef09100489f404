"""The report's sentences about the budget check: convergence shown by training longer, not inferred from a curve;
and its section, the figure and per-cell table.

Read from the ``budget_check`` stage's per-cell table (``reports/tables/budget_check/budget_check.csv``,
:mod:`study.budget_check.check`), worded by its verdicts and nothing else:

- per model, for each checked fraction: the mean change of test top-1 with the longer budget, its Holm-adjusted
  interval and the verdict (converged, not budget-bound, budget-bound, undetermined; with too few seeds, described
  only);
- how many cells converged, how many more were not budget-bound (one-sided: more training would not raise top-1 by
  the tolerance), and how many were budget-bound;
- for an undetermined cell, what settling it would cost: the projected seeds of
  :func:`study.budget_check.check.seeds_to_converge`, named as the projection it is;
- the last-quarter flag, named as the cheap screen it is, counted beside the check.

A study without a budget check has no such table, and the report no such part (:data:`FINDINGS`, :data:`SECTION`).
The projection (column ``seeds_to_converge``) is absent from the budget-check tables of the committed preset studies
(all but the default study's); there the sentences and the table leave it out.
"""

from __future__ import annotations

import math

import pandas as pd

from study import budget_check
from study.budget_check.check import rejudged
from study.outputs.tables import markdown_table
from study.writing.format import images, interval, no_inference, percent, plural, points
from study.writing.section import Part, Rows, Sources
from study.stats.intervals import MIN_SEEDS


def budget_check_sentences(cells: pd.DataFrame | None) -> list[str]:
    """The budget check in sentences: the rule, one sentence per model (its Δ, interval and verdict at every checked
    fraction), "k of n cells converged, j not budget-bound, ...", and the cheap screen's count. ``cells`` is the
    stage's ``budget_check`` table (:func:`study.outputs.tables.read_table`), judged again where it predates the
    one-sided rule (:func:`study.budget_check.check.rejudged`); ``None`` (no budget check in params) or empty gives
    none."""
    if cells is None or cells.empty:
        return []
    cells = rejudged(cells).sort_values(["model", "fraction"])
    factor, tolerance = float(cells["factor"].iloc[0]), float(cells["tolerance"].iloc[0])
    confidence = cells["adj_confidence"].dropna()
    fractions = sorted(cells["fraction"].unique())
    tol = f"{100 * tolerance:g} point{'' if 100 * tolerance == 1 else 's'}"
    out = [f"Budget check: every run at {' and '.join(percent(f) for f in fractions)} of the data was trained again "
           f"with x{factor:g} the budget (the cosine schedule spanning the longer run), every model and seed; a model "
           f"x fraction is called converged where the Holm-adjusted interval of the paired change in test top-1 "
           f"(longer − study's run, per seed) lies within ±{tol}, not budget-bound where only its upper end lies "
           f"below +{tol} (more training would not raise top-1 by {tol}), budget-bound where it lies above +{tol}, "
           "and undetermined otherwise"
           + (f" (adjusted levels {100 * confidence.min():.3g}% to {100 * confidence.max():.3g}%)"
              if not confidence.empty else "") + "."]
    for model, g in cells.groupby("model", sort=False):
        out.append(f"{model}: " + "; ".join(_cell(r, factor) for r in g.itertuples()) + ".")
    inferable = cells[cells["seeds"] >= MIN_SEEDS]
    converged = int((inferable["verdict"] == "converged").sum())
    bound = int((inferable["verdict"] == "budget-bound").sum())
    unbound = int((inferable["verdict"] == "not budget-bound").sum())
    if inferable.empty:
        out.append(f"With at most {plural(int(cells['seeds'].max()), 'seed')} per cell no cell is judged "
                   f"(at least {MIN_SEEDS} are needed): the changes above are descriptive.")
    else:
        left = len(cells) - len(inferable)
        out.append(f"{converged} of {plural(len(cells), 'cell')} converged, {unbound} not budget-bound, "
                   f"{bound} budget-bound, {len(inferable) - converged - unbound - bound} undetermined"
                   + (f", {left} not judged (fewer than {MIN_SEEDS} seeds)" if left else "") + ".")
        if "seeds_to_converge" in cells and (inferable["verdict"] == "undetermined").any():
            out.append("The seeds projected for an undetermined cell are those at which its interval, at Holm's "
                       "strictest level, would lie within the tolerance if the mean and SD of its paired changes "
                       "held: a projection, not a measurement, and a rough one from few seeds (the SD of 3 seeds "
                       "has a 95% interval of about 0.5x to 6x its estimate).")
    flagged, total = int(cells["still_improving_1x"].sum()), int(cells["seeds"].sum())
    out.append(f"The last-quarter flag (validation loss still falling by more than 1% over the last quarter of a run), "
               f"a cheap screen of one run, marked {flagged} of the {plural(total, 'run')} of these cells at the "
               "study's budget; the verdicts above rest on the longer runs, not on it.")
    return out


def _cell(r, factor: float) -> str:
    where = f"at {percent(r.fraction)} ({images(r.train_images)})"
    change = f"{points(r.delta_mean)} points at x{factor:g}"
    if r.seeds < MIN_SEEDS:
        return f"{where} {change} ({no_inference(int(r.seeds), MIN_SEEDS)})"
    ci = interval(r.adj_ci_low, r.adj_ci_high, 1, scale=100.0, signed=True, label="adjusted CI")
    lower = ", the longer runs worse by more than the tolerance" if bool(r.lower_at_longer) else ""
    return f"{where} {change} ({ci}): {r.verdict}{lower}{_projection(r)}"


def _projection(r) -> str:
    """What settling an undetermined cell would take (column ``seeds_to_converge``; nothing where the table has
    no such column)."""
    n = getattr(r, "seeds_to_converge", math.nan)
    if r.verdict != "undetermined" or math.isnan(n):
        return ""
    if math.isinf(n):
        if abs(r.delta_mean) >= r.tolerance:
            return (f"; no number of seeds would show it converged, its mean change being beyond "
                    f"±{100 * r.tolerance:g} point{'' if 100 * r.tolerance == 1 else 's'}")
        return "; more than 1,000 seeds would be needed to show it converged (projection)"
    return f"; about {int(n)} seeds would show it converged if its mean and SD held (projection)"


def _cells(sources: Sources) -> pd.DataFrame:
    return sources.table(budget_check.FOLDER, budget_check.CELLS)


def _section(sources: Sources) -> list[str]:
    """The budget check's figure and per-cell table, below the data-efficiency curves whose runs it trains again;
    nothing where the check paired no runs."""
    cells = _cells(sources)
    if cells.empty:
        return []
    cells = rejudged(cells)
    projected = "seeds_to_converge" in cells
    return ["## Budget check", "",
            sources.figure(budget_check.FOLDER, budget_check.FIGURE,
                           "Change of test top-1 with a longer budget (longer − study's run, paired by seed) per model "
                           "and checked fraction: thin bars t-intervals, thick bars Holm-adjusted; grey: the tolerance "
                           "band; filled where a verdict (converged, not budget-bound or budget-bound) was "
                           "reached."), "",
            "Per model and checked fraction: steps and mean test top-1 at both budgets, the mean change with its "
            "Holm-adjusted interval, the verdict, "
            + ("the seeds that would show the cell converged if its mean and SD held (a projection; inf: none "
               "would), " if projected else "")
            + "and the runs the last-quarter screen flagged as still improving:",
            "",
            markdown_table(cells[[c for c in _COLUMNS if c in cells]]), ""]


_COLUMNS = ("model", "fraction", "train_images", "seeds", "steps_1x", "steps_2x", "top1_1x_mean", "top1_2x_mean",
            "delta_mean", "adj_ci_low", "adj_ci_high", "verdict", "seeds_to_converge", "still_improving_1x",
            "still_improving_2x")
_NEEDS = ((budget_check.FOLDER, budget_check.CELLS),)
def _rows(sources: Sources) -> list[dict]:
    """The findings table's rows: per checked fraction, whether twice the budget would raise any model by the
    tolerance (the budget check's own one-sided rule, declared in ``budget_check``)."""
    cells = rejudged(_cells(sources))
    rows = []
    for _, at in cells.groupby("fraction", sort=True):
        tolerance = 100 * float(at["tolerance"].iloc[0])
        evidence = "; ".join(f"{r.model} {100 * r.delta_mean:+.1f} ({100 * r.adj_ci_low:+.1f} to "
                             f"{100 * r.adj_ci_high:+.1f})" for r in at.itertuples())
        judged = {verdict: sorted(g["model"]) for verdict, g in at.groupby("verdict")}
        verdict = "; ".join(f"{verdict}: {', '.join(models)}" for verdict, models in judged.items())
        rows.append({"claim": f"More budget would not raise a model by {tolerance:g} point at "
                              f"{int(at['train_images'].iloc[0]):,} images (not budget-bound)",
                     "evidence": f"Δ top-1 at {at['factor'].iloc[0]:g}× the steps, {int(at['seeds'].min())} seeds: "
                                 + evidence,
                     "control": "the same runs trained longer (paired by seed)", "verdict": verdict})
    return rows


FINDINGS = Part(lambda sources: budget_check_sentences(_cells(sources)), needs=_NEEDS)
ROWS = Rows(_rows, needs=_NEEDS)
SECTION = Part(_section, needs=_NEEDS)
