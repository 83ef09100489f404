"""The report's sentences on robustness: where the ViT (and the DeiT) beats the ResNet when the test images are
occluded, rearranged, shifted or corrupted, at which fractions, and whether that grows or shrinks with data; and
the section of figures and tables behind them.

Read from the ``robustness`` stage's tables (``reports/tables/robustness``); nothing is computed here beyond
choosing rows. The rules, as for clean accuracy:

- a difference is claimed only when its Holm-adjusted interval (the stage's, across the fractions of one
  comparison, probe and level) excludes zero; otherwise the sentence says "no detectable difference" and gives
  the equivalence bound, the largest difference the adjusted interval leaves possible;
- a flip of the winner along a probe's levels only where the stage's adjusted intervals support it;
- with fewer than ``MIN_SEEDS`` seeds nothing is inferred: the sentences give means and say why.

Test-time variants (``vit@uniform``: the run with uniform attention) are contrasted with their own run only; the
sentences on the model comparisons leave them out and :func:`attention_sentences` words their cost.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from study import robustness
from study.outputs.tables import markdown_table
from study.writing.format import images, interval, no_inference, percent, plural, share
from study.writing.section import Part, Sources
from study.robustness import is_variant, trained_model
from study.robustness import wording
from study.stats.intervals import MIN_SEEDS

# The stage's tables the report reads.
TABLES = (robustness.PROBE_SET, robustness.HEADLINE, robustness.HEADLINE_CONTRASTS, robustness.CONTRASTS_ACCURACY,
          robustness.CONTRASTS_RETAINED, robustness.CONSISTENCY, robustness.CONTRASTS_CONSISTENCY,
          robustness.WINNER_FLIPS, robustness.MCE)


def read_robustness(folder: Path) -> dict[str, pd.DataFrame]:
    """The stage's tables the report reads (:data:`TABLES`), by name, from its tables ``folder``."""
    return {name: pd.read_csv(folder / f"{name}.csv") for name in TABLES}


def setup_sentence(probe_set: pd.DataFrame, accuracy: pd.DataFrame) -> str:
    s = probe_set.iloc[0]
    whole = " (the whole test set)" if int(s["images"]) == int(s["test_images"]) else f" of {int(s['test_images']):,}"
    fractions = accuracy["fraction"].nunique() if not accuracy.empty else 0
    probed = accuracy[accuracy["probe"] != "clean"]
    kinds = []
    for probe in [p for p in wording.PROBE_WORDS if p in set(probed["probe"])]:  # the stage's order of probes
        rows = probed[probed["probe"] == probe]
        found = list(dict.fromkeys(rows["variant"].astype(str)))
        ordered = ([v for v in wording.VARIANT_WORDS if v in found]
                   + [v for v in found if v not in wording.VARIANT_WORDS])
        words = {v: v.replace("_", " ") if probe == "corruption" else wording.VARIANT_WORDS[v] for v in ordered}
        levels = {v: ", ".join(wording.level(probe, x)
                               for x in sorted(rows.loc[rows["variant"] == v, "level"].unique()))
                  for v in ordered}
        name = wording.PROBE_WORDS.get(probe, probe)
        if len(set(levels.values())) == 1:  # shared levels: "occlusion (patch grid, offset grid: 10%, …)"
            variants = ", ".join(w for w in words.values() if w)
            kinds.append(f"{name} ({variants + ': ' if variants else ''}{levels[ordered[0]]})")
        else:  # "patch shuffle (2x2, 4x4, 7x7; offset grid: 7x7)", the unnamed variant first
            each = "; ".join(f"{words[v]}: {levels[v]}" if words[v] else levels[v]
                             for v in sorted(ordered, key=lambda v: bool(words[v])))
            kinds.append(f"{name} ({each})")
    planned = ""
    if "scoring" in probe_set and (probe_set["scoring"] == "plan").any():
        p = probe_set[probe_set["scoring"] == "plan"].iloc[0]
        all_of = " (the whole test set)" if int(p["images"]) == int(p["test_images"]) else ""
        planned = (f" The analysis plan's {int(p['conditions'])} conditions are scored again for its models' "
                   f"{int(p['runs'])} runs on {int(p['images']):,} test images{all_of}, drawn with the same seed "
                   f"(plan_runs); the intervals below are those of the {int(s['images']):,} images, exploratory.")
    return (f"All {int(s['runs'])} runs are probed on the same {int(s['images']):,} test images{whole}, drawn with "
            f"seed {int(s['image_seed'])}, under {int(s['conditions'])} conditions: the clean images, "
            + "; ".join(kinds) + " (docs/robustness.md). "
            f"Each model is compared with {s['reference']}, paired by seed (the same subset and images), with "
            f"intervals Holm-adjusted across the {plural(fractions, 'fraction')} of each comparison, probe and level."
            + planned)


def headline_sentences(values: pd.DataFrame, min_seeds: int = MIN_SEEDS) -> list[str]:
    """Per model, at the smallest and the largest fraction: top-1 at each headline condition."""
    out = []
    ends = sorted(values["fraction"].unique())
    ends = [ends[0], ends[-1]] if len(ends) > 1 else ends
    for model, rows in values.groupby("model", sort=True):
        parts = []
        for fraction in ends:
            at = rows[rows["fraction"] == fraction].sort_values("order")
            seeds = int(at["seeds"].min())
            listed = ", ".join(
                f"{r.condition} {share(r.top1_mean)}"
                + (f" ({interval(r.top1_ci_low, r.top1_ci_high, 1, scale=100.0)})" if seeds >= min_seeds else "")
                for r in at.itertuples())
            parts.append(f"at {images(at['train_images'].iloc[0])} ({percent(fraction)}): {listed}")
        seeds = int(rows["seeds"].min())
        note = "" if seeds >= min_seeds else f"; means of {plural(seeds, 'seed')}, {no_inference(seeds, min_seeds)}"
        out.append(f"{model}, top-1 " + "; ".join(parts) + note + ".")
    return out


def headline_contrast_sentences(contrasts: pd.DataFrame, planned: pd.DataFrame | None = None) -> list[str]:
    """Per comparison and headline condition: the contrast at every fraction and its trend with data. A contrast
    the analysis plan also tests (``planned``: its tests table) is named as exploratory beside the plan's number:
    one contrast, one number of record per report."""
    of_record = set()
    # tables of a plan with primary and secondary families only: a committed report written before keeps its words
    if planned is not None and not planned.empty and "family" in planned:
        contrast = planned[planned["test"] == "contrast"]
        of_record = {(c, cond) for c, cond in zip(contrast["comparison"], contrast["condition"])}
    out = []
    for (comparison, _, condition), g in contrasts.groupby(["comparison", "order", "condition"], sort=True):
        a, b = comparison.split(" - ")
        g = g.sort_values("train_images")
        parts = "; ".join(f"at {images(r.train_images)} {wording.clause(r, a, b)}" for r in g.itertuples())
        trend = g.iloc[0]
        if pd.isna(trend["slope_per_decade"]):
            change = "no trend with data can be fitted (fewer than 2 fractions without step-bound runs)"
        else:
            value = f"{trend['slope_per_decade']:+.1f} points per tenfold data"
            ci = interval(trend["slope_ci_low"], trend["slope_ci_high"], 1, signed=True, label="Holm-adjusted CI")
            used = f"{plural(int(trend['fractions_used']), 'fraction')} without step-bound runs"
            if not g["inference"].all():
                change = f"trend {value} (descriptive, {used})"
            elif trend["slope_significant"]:
                change = f"the contrast changes by {value} ({ci}, {used})"
            else:
                change = f"no detectable trend with data ({value}, {ci}, {used})"
        first = g.iloc[0]
        planned_here = (comparison, robustness.condition_label(first["probe"], first["variant"], first["level"]))
        record = (" Exploratory: the number of record for this contrast is the analysis plan's, on its own test "
                  "images and fractions." if planned_here in of_record else "")
        out.append(f"{wording.minus(comparison)}, {condition}: {parts}; {change}.{record}")
    return out


def win_sentences(contrasts: pd.DataFrame, what: str) -> list[str]:
    """Per comparison: in how many probed cells (condition × fraction) each model is detectably ahead on ``what``
    (top-1 or retained accuracy), and where the first model is."""
    out = []
    probed = contrasts[contrasts["probe"] != "clean"]
    for comparison, g in probed.groupby("comparison", sort=False):
        a, b = comparison.split(" - ")
        if not g["inference"].all():
            out.append(f"{wording.minus(comparison)}, {what}: {plural(int(g['seeds'].min()), 'seed')}, so no "
                       f"difference is "
                       f"inferred (at least {MIN_SEEDS} are needed); the tables give the means.")
            continue
        every = g["fraction"].nunique()
        ahead, behind = g[g["significant"] & (g["diff_mean"] > 0)], g[g["significant"] & (g["diff_mean"] < 0)]
        null = g[~g["significant"]]
        counts = (f"{a} is detectably ahead in {len(ahead)} of {len(g)} probed cells (condition × fraction), {b} in "
                  f"{len(behind)}, and {len(null)} show no detectable difference"
                  + (f" (equivalence bounds {100 * null['equivalence_bound'].min():.1f} to "
                     f"{100 * null['equivalence_bound'].max():.1f} points)" if len(null) else ""))
        if ahead.empty:
            where = f"{a} is ahead nowhere"
        else:
            groups = []
            for (probe, variant), rows in ahead.groupby(["probe", "variant"], sort=False):
                levels = "; ".join(f"{wording.level(probe, level)} at {wording.sizes(at, every)}"
                                   for level, at in rows.groupby("level", sort=True))
                groups.append(f"{wording.condition(probe, variant)}: {levels}")
            where = f"{a} is ahead under " + " | ".join(groups)
        per_probe = ", ".join(f"{wording.PROBE_WORDS.get(p, p)} {len(rows)} of {len(g[g['probe'] == p])}"
                              for p, rows in behind.groupby("probe", sort=False))
        against = f"; {b} is ahead in {per_probe}" if per_probe else ""
        out.append(f"{wording.minus(comparison)}, {what} (Holm-adjusted): {counts}. {where}{against}.")
    return out


def flip_sentences(flips: pd.DataFrame) -> list[str]:
    if flips is None or flips.empty:
        return []
    claimed = flips[flips["flip_claimed"]]
    changes = int((flips["sign_changes"] > 0).sum())
    if claimed.empty:
        return [f"No flip of the winner along a probe's levels is supported by the adjusted intervals; the mean "
                f"contrast changes sign along {changes} of {len(flips)} probe curves (comparison × probe × fraction)."]
    listed = "; ".join(
        f"{r.direction} at {images(r.train_images)} under {wording.condition(r.probe, r.variant)}: behind "
        + ("on the clean images" if r.significant_from_level == 0
           else f"at {wording.level(r.probe, r.significant_from_level)}")
        + f", ahead at {wording.level(r.probe, r.significant_to_level)}"
        for r in claimed.itertuples())
    return [f"Flips of the winner supported by the adjusted intervals ({len(claimed)} of {len(flips)} probe curves): "
            f"{listed}."]


def consistency_sentences(summary: pd.DataFrame, contrasts: pd.DataFrame, min_seeds: int = MIN_SEEDS
                          ) -> list[str]:
    """How many predictions a 1-px shift changes, per model at the smallest and largest fraction, and the
    contrasts of the consistency (1 − that share)."""
    if summary is None or summary.empty:
        return []
    out = []
    ends = sorted(summary["fraction"].unique())
    ends = [ends[0], ends[-1]] if len(ends) > 1 else ends
    parts = []
    for model, rows in summary.groupby("model", sort=True):
        at = []
        for fraction in ends:
            r = rows[rows["fraction"] == fraction].set_index("variant")
            changed = "/".join(share(1.0 - r.loc[d, "consistency_mean"]) for d in ("x", "y", "diagonal") if d in r.index)
            at.append(f"{changed} at {images(r['train_images'].iloc[0])}")
        parts.append(f"{model} {' and '.join(at)}")
    out.append("Share of the predictions a 1-px shift changes (along x / y / diagonally; Azulay & Weiss's probability "
               "of change): " + "; ".join(parts) + ".")
    for comparison, g in contrasts.groupby("comparison", sort=False):
        a, b = comparison.split(" - ")
        clauses = "; ".join(f"{wording.VARIANT_WORDS.get(d, d)} at {images(r.train_images)} {wording.clause(r, a, b)}"
                            for d, rows in g.groupby("variant", sort=False)
                            for r in rows.sort_values("train_images").itertuples()
                            if r.fraction in ends)
        out.append(f"1-px consistency (1 − that share), {wording.minus(comparison)}: {clauses}.")
    return out


def mce_sentences(table: pd.DataFrame) -> list[str]:
    """Mean corruption error of each model against the baseline, plain and relative, at every fraction."""
    if table is None or table.empty:
        return []
    out = []
    for (model, measure), g in table.groupby(["model", "measure"], sort=True):
        base = g["baseline"].iloc[0]
        name = "mean corruption error" if measure == "mce" else "relative mean corruption error (beyond clean error)"
        parts = []
        for r in g.sort_values("train_images").itertuples():
            value = f"{r.mean:.2f}"
            if not r.inference:
                parts.append(f"{value} at {images(r.train_images)} (descriptive)")
                continue
            ci = interval(r.adj_ci_low, r.adj_ci_high, 2, label="Holm-adjusted CI")
            if r.significant:
                verdict = "more robust" if r.mean < 1 else "less robust"
                parts.append(f"{value} at {images(r.train_images)} ({ci}: {verdict})")
            else:
                parts.append(f"{value} at {images(r.train_images)} (no detectable difference from 1, {ci})")
        out.append(f"{model}'s {name} against {base} (1 = as robust; below 1 = more robust): " + "; ".join(parts) + ".")
    return out


def attention_sentences(contrasts: pd.DataFrame, values: pd.DataFrame) -> list[str]:
    """What uniform attention at test time costs each model that has the variant, per fraction, clean and under the
    patch-grid shuffle (the headline contrasts ``<model>@uniform − <model>``), after one sentence on the method
    and the models without a variant (too few seeds: means only, :func:`study.robustness.wording.cost`). Empty when
    the stage scored no variant."""
    ablated = contrasts[contrasts["comparison"].map(lambda c: is_variant(c.split(" - ")[0]))]
    if ablated.empty:
        return []
    models = sorted({trained_model(c.split(" - ")[0]) for c in ablated["comparison"]})
    others = sorted({m for m in values["model"] if not is_variant(m)} - set(models))
    out = [f"Uniform attention at test time: {', '.join(models)} {'is' if len(models) == 1 else 'are'} scored a "
           "second time with every attention row replaced by the uniform average over all T tokens (1/T each, prefix "
           "tokens included; no retraining), as <model>@uniform. The cost is the top-1 the run loses, paired by seed "
           "and Holm-adjusted across fractions; a negative cost means uniform attention scores higher."
           + (f" {', '.join(others)} {'has' if len(others) == 1 else 'have'} no such variant (a ConViT's gated "
              "positional attention is not switched; a CNN has no attention)." if others else "")]
    shown = ablated[ablated["probe"].isin(["clean", "rearrangement"])]
    for (comparison, fraction), g in shown.groupby(["comparison", "fraction"], sort=True):
        model = trained_model(comparison.split(" - ")[0])
        parts = "; ".join(f"{'clean' if r.probe == 'clean' else 'under the ' + r.condition}, {wording.cost(r)}"
                          for r in g.sort_values("order").itertuples())
        out.append(f"Uniform attention in {model} at {images(g['train_images'].iloc[0])}: {parts}.")
    return out


def _trained(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without test-time variants: its model rows, or its comparisons whose first model is one."""
    column = "model" if "model" in table else "comparison"
    return table[~table[column].map(lambda name: is_variant(str(name).split(" - ")[0]))]


def robustness_findings(tables: dict[str, pd.DataFrame], min_seeds: int = MIN_SEEDS,
                        planned: pd.DataFrame | None = None) -> list[str]:
    """The bullets of "Where the ViT wins", from the stage's tables (:func:`read_robustness`): the model comparisons,
    then what uniform attention costs where the stage scored it; a contrast the plan tests (``planned``, the plan's
    tests table) is marked exploratory beside the plan's."""
    model_tables = {name: _trained(table) if ("model" in table or "comparison" in table) else table
                    for name, table in tables.items()}
    accuracy = model_tables[robustness.CONTRASTS_ACCURACY]
    out = [setup_sentence(model_tables[robustness.PROBE_SET], accuracy)]
    out += headline_sentences(model_tables[robustness.HEADLINE], min_seeds)
    out += headline_contrast_sentences(model_tables[robustness.HEADLINE_CONTRASTS], planned)
    out += win_sentences(accuracy, "top-1")
    out += win_sentences(model_tables[robustness.CONTRASTS_RETAINED], "retained accuracy (probe / clean)")
    out += flip_sentences(model_tables[robustness.WINNER_FLIPS])
    out += consistency_sentences(model_tables[robustness.CONSISTENCY], model_tables[robustness.CONTRASTS_CONSISTENCY],
                                 min_seeds)
    out += mce_sentences(model_tables[robustness.MCE])
    out += attention_sentences(tables[robustness.HEADLINE_CONTRASTS], tables[robustness.HEADLINE])
    return out


def headline_table(values: pd.DataFrame, min_seeds: int = MIN_SEEDS) -> str:
    """Top-1 at the headline conditions, one row per model and fraction, one column per condition:
    "mean (low–high)" in percent, the mean alone with fewer than ``min_seeds`` seeds."""
    def cell(r) -> str:
        low, high = 100 * r.top1_ci_low, 100 * r.top1_ci_high
        return f"{100 * r.top1_mean:.1f}" + (f" ({low:.1f}–{high:.1f})" if r.seeds >= min_seeds else "")

    conditions = list(dict.fromkeys(values.sort_values("order")["condition"]))
    rows = []
    for (model, fraction), g in values.groupby(["model", "fraction"], sort=True):
        by = {r.condition: cell(r) for r in g.itertuples()}
        rows.append({"model": model, "fraction": fraction, "train_images": int(g["train_images"].iloc[0]),
                     "seeds": int(g["seeds"].min()), **{c: by.get(c, "–") for c in conditions}})
    return markdown_table(pd.DataFrame(rows))


def _section(sources: Sources) -> list[str]:
    tables = read_robustness(sources.tables / robustness.FOLDER)
    lines = ["## Robustness probes", "",
             "Top-1 at the headline conditions, mean and t-interval over seeds (%):", "",
             headline_table(tables[robustness.HEADLINE]), ""]
    for stem, caption in _CAPTIONS:
        lines += [sources.figure(robustness.FOLDER, stem, caption), ""]
    mce = tables[robustness.MCE]
    if not mce.empty:
        lines += ["Mean corruption error against the reference CNN of the same fraction and seed (1: as robust); "
                  "`adj_*`: Holm-adjusted across fractions:", "",
                  markdown_table(mce[["model", "measure", "train_images", "seeds", "mean", "ci_low", "ci_high",
                                      "adj_ci_low", "adj_ci_high", "significant"]], 3), ""]
    lines += [f"Every condition's means, contrasts, trends and flips: `reports/tables/{robustness.FOLDER}/` (CSV and "
              "LaTeX).", ""]
    return lines


_CAPTIONS = (
    (robustness.OCCLUSION, "Top-1 against the share of grid cells set to black: the ViT's patch grid (solid) and the "
                           "same grid offset by half a cell (dashed); bands: t-intervals over seeds."),
    (robustness.REARRANGEMENT, "Top-1 when the cells of a grid are permuted per image (patch shuffle; solid), and "
                               "the cells of the same grid moved by half a cell, where scored (offset; dashed)."),
    (robustness.TRANSLATION, "Top-1 against a shift with zero fill along x (solid), y (dashed) and the diagonal "
                             "(dotted)."),
    (robustness.CORRUPTION_ERRORS, "Each corruption's error relative to the reference CNN (summed over severities; "
                                   "1: as robust, below 1: more robust); bars: t-intervals over seeds."),
    (robustness.CONTRASTS_FIGURE, "Top-1 differences from the reference CNN at the headline conditions against "
                                  "training images; bars: Holm-adjusted intervals, filled where they exclude 0."))
_NEEDS = tuple((robustness.FOLDER, name) for name in TABLES)
FINDINGS = Part(lambda sources: robustness_findings(read_robustness(sources.tables / robustness.FOLDER),
                                                  planned=sources.table_if_written("plan", "tests")),
                needs=_NEEDS)
SECTION = Part(_section, needs=_NEEDS)
