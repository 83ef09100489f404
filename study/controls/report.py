"""The report's sentences on the controls: what each arm that changes one thing of the ViT (or of the ResNet's
recipe) does to top-1 on the clean images and under the probes on and off the ViT's patch grid, with the
interaction between the two; how much each trained ViT relies on its attention; whether a ViT without position
embedding keeps more of its accuracy under the patch shuffle; what the seeds could detect; and the section with the
figure and tables behind them.

Read from the ``controls`` stage's tables (``reports/tables/controls``); nothing is computed here beyond choosing
rows. Everything here is exploratory: intervals, no verdict words (the plan's claims carry the verdicts, stage
``plan``).
"""

from __future__ import annotations

import math

import pandas as pd

from study import controls
from study.robustness import condition_label
from study.outputs.tables import markdown_table
from study.writing.section import EXPLORATORY, Part, Rows, Sources


def _ci(mean: float, low: float, high: float, label: str = "adjusted CI") -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{mean:+.1f} points (no interval)"
    return f"{mean:+.1f} points ({label} {low:+.1f} to {high:+.1f})"


def _pooled(row) -> str:
    return _ci(row["mean"], row["mean_adj_low"], row["mean_adj_high"])


def grid_sentences(pooled: pd.DataFrame, on_off: pd.DataFrame) -> list[str]:
    """Per comparison: the clean contrast, then each on-grid probe with its off-grid controls and the
    interaction (on − off), in one sentence."""
    out = []
    for comparison, rows in on_off.groupby("comparison", sort=False):
        clean = pooled[(pooled["comparison"] == comparison) & (pooled["probe"] == "clean")]
        parts = [f"clean {_pooled(clean.iloc[0])}"] if not clean.empty else []
        for _, at in rows.groupby("probe", sort=False):
            first = at.iloc[0]
            offs = "; ".join(
                f"off the grid, {r['off_grid']} {_ci(r['off_mean'], r['off_mean_adj_low'], r['off_mean_adj_high'])}, "
                f"interaction {_ci(r['interaction'], r['interaction_ci_low'], r['interaction_ci_high'], 'CI')}"
                for _, r in at.iterrows())
            parts.append(f"{first['on_grid']} "
                         f"{_ci(first['on_mean'], first['on_mean_adj_low'], first['on_mean_adj_high'])} ({offs})")
        out.append(f"{comparison}, each seed's mean over the fractions: " + "; ".join(parts) + ".")
    return out


def uniform_sentences(fractions: pd.DataFrame) -> list[str]:
    """How much each trained ViT relies on its attention, per fraction: uniform attention at test time, on the
    clean images and under the patch-grid shuffle."""
    out = []
    uniform = fractions[fractions["comparison"].str.contains(controls.UNIFORM_SUFFIX, regex=False)]
    for comparison, rows in uniform.groupby("comparison", sort=False):
        for label, probe in (("clean", "clean"), ("under the patch-grid shuffle", "rearrangement")):
            at = rows[(rows["probe"] == probe) & (rows["variant"].isin(["clean", "shuffle"]))]
            if probe == "rearrangement" and not at.empty:
                at = at[at["level"] == at["level"].max()]
            if at.empty:
                continue
            cells = ", ".join(f"{int(r.train_images):,} images {100 * r.diff_mean:+.1f} (adjusted CI "
                              f"{100 * r.adj_ci_low:+.1f} to {100 * r.adj_ci_high:+.1f})" for r in at.itertuples())
            out.append(f"{comparison} (every attention row replaced by the uniform average over tokens at test time, "
                       f"no retraining: how much these trained weights rely on their attention, not what attention "
                       f"is worth as a design) {label}: {cells}.")
    return out


def retention_sentences(retention: pd.DataFrame) -> list[str]:
    """Per pair, the difference in retained accuracy under the patch-grid shuffle, per fraction."""
    out = []
    shuffled = retention[retention["on_grid"].astype(bool)]
    for comparison, rows in shuffled.groupby("comparison", sort=False):
        cells = ", ".join(f"{int(r.train_images):,} images {100 * r.diff_mean:+.1f} (adjusted CI "
                          f"{100 * r.adj_ci_low:+.1f} to {100 * r.adj_ci_high:+.1f})" for r in rows.itertuples())
        out.append(f"{comparison}, retained accuracy (top-1 shuffled / own clean top-1, points) under the "
                   f"{_label(rows)}: {cells}.")
    return out


def power_sentences(power: pd.DataFrame) -> list[str]:
    if power.empty:
        return []
    first = power.iloc[0]
    low, high = power["power"].min(), power["power"].max()
    needed = power["seeds_needed"].dropna()
    return [f"Seeds: {int(first['seeds'])} over {int(first['fractions'])} fractions; at the observed SDs of the seeds' "
            f"mean contrasts ({power['seed_sd_points'].min():.1f} to {power['seed_sd_points'].max():.1f} points) a "
            f"t-test on the seeds' means detects a {first['effect_points']:g}-point contrast with power "
            f"{100 * low:.0f}% to {100 * high:.0f}% at α = {first['alpha']:g} over a family of "
            f"{int(first['family'])}"
            + (f"; 80% power would need {int(needed.min())} to {int(needed.max())} seeds" if len(needed) else "")
            + f" (table `{controls.POWER}.csv`)."]


def _findings(sources: Sources) -> list[str]:
    pooled = sources.table(controls.FOLDER, controls.POOLED)
    on_off = sources.table_if_written(controls.FOLDER, controls.GRID)
    fractions = sources.table(controls.FOLDER, controls.FRACTIONS)
    power = sources.table(controls.FOLDER, controls.POWER)
    retention = sources.table_if_written(controls.FOLDER, controls.RETENTION)
    grid = grid_sentences(pooled, on_off) if on_off is not None and not on_off.empty else []
    kept = retention_sentences(retention) if retention is not None and not retention.empty else []
    return [*grid, *uniform_sentences(fractions), *kept, *power_sentences(power)]


def _section(sources: Sources) -> list[str]:
    on_off = sources.table_if_written(controls.FOLDER, controls.GRID)
    power = sources.table(controls.FOLDER, controls.POWER)
    lines = ["## Controls: the patch grid, attention and the recipe (exploratory)", ""]
    fig = sources.figure(controls.FOLDER, controls.FIGURE,
                         "Each comparison's contrast (points of test top-1, each seed's mean over the fractions) on "
                         "the ViT's patch grid (vermillion) and off it (blue); bars: Holm-adjusted intervals across "
                         "the condition's comparisons; filled: the interval excludes zero. Exploratory.")
    if fig:
        lines += [fig, ""]
    if on_off is not None and not on_off.empty:
        lines += ["On the grid and off it, with the interaction (on − off, per seed):", "",
                  markdown_table(on_off, 1), ""]
    lines += ["What the seeds can detect:", "", markdown_table(power, 2), ""]
    return lines


def _rows(sources: Sources) -> list[dict]:
    """Exploratory rows of the findings table: each configured comparison on the clean images and under the
    patch-grid shuffle with its first control (the matched offset shuffle where the study scored it), and each
    ViT's reliance on its attention. The other probes are in the section's table."""
    pooled = sources.table(controls.FOLDER, controls.POOLED)
    on_off = sources.table_if_written(controls.FOLDER, controls.GRID)
    rows = []
    configured = pooled[pooled["family"] == "controls"]
    for comparison, at in configured.groupby("comparison", sort=False):
        clean = at[at["probe"] == "clean"]
        if not clean.empty:
            c = clean.iloc[0]
            rows.append({"claim": f"{comparison} on clean images", "evidence": _pooled(c),
                         "control": f"same images, seeds, budget; {int(c['seeds'])} seeds, {int(c['fractions'])} "
                                    "fractions", "verdict": EXPLORATORY, "comparison": comparison,
                         "condition": "clean"})
        if on_off is None or on_off.empty:
            continue
        mine = on_off[on_off["comparison"] == comparison]
        shuffle = mine[mine["probe"] == on_off["probe"].iloc[0]]  # the patch-grid shuffle: its first pair
        for _, grid in shuffle.groupby("probe", sort=False):
            first = grid.iloc[0]
            control = "; ".join(f"{r['off_grid']}: {_ci(r['off_mean'], r['off_mean_adj_low'], r['off_mean_adj_high'])}"
                                f", interaction {_ci(r['interaction'], r['interaction_ci_low'], r['interaction_ci_high'], 'CI')}"
                                for _, r in grid.head(1).iterrows())
            rows.append({"claim": f"{comparison} under the {first['on_grid']}",
                         "evidence": _ci(first["on_mean"], first["on_mean_adj_low"], first["on_mean_adj_high"]),
                         "control": control, "verdict": EXPLORATORY, "comparison": comparison,
                         "condition": first["on_grid"]})
    position = sources.table_if_written(controls.FOLDER, controls.POSITION)
    if position is not None and not position.empty:
        rows.append(_position_row(position))
    uniform = pooled[pooled["family"] == "uniform attention"]
    for comparison, at in uniform.groupby("comparison", sort=False):
        clean = at[at["probe"] == "clean"]
        if clean.empty:
            continue
        evidence = f"clean {_pooled(clean.iloc[0])}"
        patch_grid = on_off["on_grid"].iloc[0] if on_off is not None and not on_off.empty else None
        shuffle = at[at["condition"] == patch_grid]  # the ViT's own patch-grid shuffle
        if not shuffle.empty:
            s = shuffle.iloc[0]
            evidence += f"; {s['condition']} {_pooled(s)}"
        rows.append({"claim": f"{comparison.split(' - ')[1]}'s trained weights rely on its attention",
                     "evidence": f"{comparison}: {evidence}",
                     "control": "the same weights at test time, every attention row made uniform (not retrained: "
                                "reliance, not the worth of attention as a design)",
                     "verdict": EXPLORATORY, "comparison": comparison, "condition": "clean"})
    return rows


def _label(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    return condition_label(first["probe"], first["variant"], first["level"])


def _position_row(position: pd.DataFrame) -> dict:
    """The position hypothesis as a findings row: the twin's retained accuracy under the patch-grid shuffle minus
    its ViT's, per fraction, beside the same under the offset shuffle."""
    def cells(rows: pd.DataFrame) -> str:
        return ", ".join(f"{int(r.train_images):,} images {100 * r.diff_mean:+.1f} ({100 * r.adj_ci_low:+.1f} to "
                         f"{100 * r.adj_ci_high:+.1f})" for r in rows.itertuples())

    on = position[position["on_grid"].astype(bool)]
    off = position[~position["on_grid"].astype(bool)]
    comparison = position["comparison"].iloc[0]
    return {"claim": f"Position embedding costs the ViT accuracy under its patch shuffle ({comparison}, retained "
                     "accuracy)",
            "evidence": f"{_label(on)}: {cells(on)}" if len(on) else "",
            "control": f"{_label(off)}: {cells(off)}" if len(off) else "no off-grid shuffle scored",
            "verdict": EXPLORATORY, "comparison": comparison, "condition": "retained"}


NEEDS = ((controls.FOLDER, controls.POOLED), (controls.FOLDER, controls.FRACTIONS), (controls.FOLDER, controls.POWER))
FINDINGS = Part(_findings, needs=NEEDS)
SECTION = Part(_section, needs=NEEDS)
ROWS = Rows(_rows, needs=NEEDS)
