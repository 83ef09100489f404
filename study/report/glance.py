"""The findings table that opens the report: one row per claim, with its evidence (effect and adjusted interval),
its control and its verdict (supported / inconclusive / refuted).

Rows, each read from a stage's table (nothing computed here beyond choosing rows and wording them):

- every comparison of ``analysis.controls.pairs`` on the clean images, then under each probe on the ViT's patch
  grid with the same probe off the grid as its control (stage ``controls``: one model over the fractions, paired
  by seed, Holm-adjusted); a win on the grid is "the ViT's own" only where it also holds off the grid;
- what uniform attention at test time costs each ViT (stage ``controls``, from the robustness scores);
- the budget check: whether twice the budget would raise a model by a point (stage ``budget_check``);
- distillation's control: whether the teacher's labels differed from the true ones (stage ``distillation``).
"""

from __future__ import annotations

import pandas as pd

from study import budget_check, controls, distillation
from study.report.section import Sources

COLUMNS = ["claim", "evidence", "control", "verdict"]


def _ci(row: pd.Series, prefix: str = "") -> str:
    return (f"{row[prefix + 'mean']:+.1f} ({row[prefix + 'mean_adj_low']:+.1f} to "
            f"{row[prefix + 'mean_adj_high']:+.1f})")


def _verdict(label: str, low: float, high: float, ahead: str, behind: str) -> str:
    """The stage's verdict (study.stats.trend.effect_verdict) as the table words it."""
    bound = max(abs(low), abs(high))
    if label == "supported":
        return f"supported: {ahead if low > 0 else behind} ahead"
    if label in ("no effect", "refuted"):
        return f"refuted: no effect beyond ±{bound:.1f}"
    return f"inconclusive: effects beyond ±{bound:.1f} excluded"


def _span(pooled: pd.DataFrame) -> str:
    """The range of training images the pooled contrasts average over, from the design's centre and fractions."""
    first = pooled.iloc[0]
    return f"{int(first['fractions'])} fractions, {int(first['seeds'])} seeds"


def comparison_rows(pooled: pd.DataFrame, on_off: pd.DataFrame | None) -> list[dict]:
    rows = []
    configured = pooled[pooled["family"] == "controls"]
    for comparison, at in configured.groupby("comparison", sort=False):
        a, b = comparison.split(" - ")
        clean = at[at["probe"] == "clean"]
        if not clean.empty:
            c = clean.iloc[0]
            rows.append({"claim": f"{a} and {b} differ on clean images",
                         "evidence": f"{a} − {b}: {_ci(c)} points, mean over {_span(at)}; "
                                     f"{c['slope_per_decade']:+.1f} per tenfold data",
                         "control": "same images, seeds, budget",
                         "verdict": _verdict(c["verdict"], c["mean_adj_low"], c["mean_adj_high"], a, b)})
        if on_off is None or on_off.empty:
            continue
        for probe, grid in on_off[on_off["comparison"] == comparison].groupby("probe", sort=False):
            on = grid.iloc[0]
            offs = "; ".join(f"{r['off_grid']}: {_ci(r, 'off_')}" for _, r in grid.iterrows())
            on_claimed = on["on_verdict"] == "supported"
            off_claimed = [r["off_verdict"] == "supported" and (r["off_mean"] > 0) == (on["on_mean"] > 0)
                           for _, r in grid.iterrows()]
            verdict = _verdict(on["on_verdict"], on["on_mean_adj_low"], on["on_mean_adj_high"], a, b)
            if on_claimed and not all(off_claimed):
                verdict += " on the patch grid only"
            elif on_claimed:
                verdict += " on and off the patch grid"
            rows.append({"claim": f"{a} and {b} differ under {on['on_grid']}",
                         "evidence": f"{a} − {b}: {_ci(on, 'on_')} points", "control": f"off the grid, {offs}",
                         "verdict": verdict})
    return rows


def uniform_rows(pooled: pd.DataFrame) -> list[dict]:
    rows = []
    uniform = pooled[pooled["family"] == "uniform attention"]
    for comparison, at in uniform.groupby("comparison", sort=False):
        model = comparison.split(" - ")[1]
        clean = at[at["probe"] == "clean"]
        shuffle = at[at["probe"] == "rearrangement"]
        if clean.empty:
            continue
        c = clean.iloc[0]
        evidence = f"{comparison}: clean {_ci(c)} points"
        if not shuffle.empty:
            s = shuffle.loc[shuffle["level"].idxmax()]
            evidence += f"; {s['condition']} {_ci(s)}"
        rows.append({"claim": f"{model}'s attention is worth accuracy (uniform attention at test time costs it)",
                     "evidence": evidence + f"; {_span(at)}",
                     "control": "the same weights, only the attention rows replaced",
                     "verdict": _verdict(c["verdict"], c["mean_adj_low"], c["mean_adj_high"], "uniform attention",
                                         f"{model}'s own attention")})
    return rows


def budget_rows(cells: pd.DataFrame) -> list[dict]:
    rows = []
    for fraction, at in cells.groupby("fraction", sort=True):
        evidence = "; ".join(f"{r.model} {100 * r.delta_mean:+.1f} ({100 * r.adj_ci_low:+.1f} to "
                             f"{100 * r.adj_ci_high:+.1f})" for r in at.itertuples())
        bound = at["adj_ci_high"] < at["tolerance"]
        verdict = ("supported for every model" if bound.all() else
                   f"supported for {', '.join(at.loc[bound, 'model'])}; inconclusive for "
                   f"{', '.join(at.loc[~bound, 'model'])}" if bound.any() else "inconclusive for every model")
        rows.append({"claim": f"More budget would not raise any model by a point at {int(at['train_images'].iloc[0]):,} "
                              "images (not budget-bound)",
                     "evidence": f"Δ top-1 at {at['factor'].iloc[0]:g}× the steps, {int(at['seeds'].min())} seeds: "
                                 + evidence,
                     "control": "the same runs trained longer (paired by seed)", "verdict": verdict})
    return rows


def distillation_rows(views: pd.DataFrame) -> list[dict]:
    if views.empty:
        return []
    total, differ = int(views["views"].sum()), float(views["disagreement_mean"].max())
    if differ > 0:
        return []
    return [{"claim": "Hard distillation adds a signal beyond the labels",
             "evidence": f"the teacher's label equals the true label on every training view ({total:,} views)",
             "control": "teacher labels against true labels",
             "verdict": "refuted by construction: the student trains on the labels twice"}]


def findings_table(sources: Sources) -> pd.DataFrame:
    """The table's rows from whichever stages' tables the study has."""
    rows = []
    pooled = sources.table_if_written(controls.FOLDER, controls.POOLED)
    if pooled is not None and not pooled.empty:
        rows += comparison_rows(pooled, sources.table_if_written(controls.FOLDER, controls.GRID))
        rows += uniform_rows(pooled)
    views = sources.table_if_written(distillation.FOLDER, distillation.TEACHER_VIEWS)
    if views is not None:
        rows += distillation_rows(views)
    cells = sources.table_if_written(budget_check.FOLDER, budget_check.CELLS)
    if cells is not None and not cells.empty:
        rows += budget_rows(cells)
    return pd.DataFrame(rows, columns=COLUMNS)
