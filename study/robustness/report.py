"""The report's sentences on robustness: where the ViT (and the DeiT) beats the ResNet when the test images are
occluded, rearranged, shifted or corrupted, at which fractions, and whether that grows or shrinks with data.

Read from the ``robustness`` stage's tables (``reports/tables/robustness``); nothing is computed here beyond
choosing rows. The rules, as for clean accuracy:

- a difference is claimed only when its Holm-adjusted interval (the stage's, across the fractions of one
  comparison, probe and level) excludes zero; otherwise the sentence says "no detectable difference" and gives
  the equivalence bound, the largest difference the adjusted interval leaves possible;
- a flip of the winner along a probe's levels only where the stage's adjusted intervals support it;
- with fewer than ``MIN_SEEDS`` seeds nothing is inferred: the sentences give means and say why.
"""

from __future__ import annotations

import pandas as pd

from study.stats.intervals import MIN_SEEDS
from study.report.format import images, interval, no_detectable, no_inference, percent, plural, share
from study.outputs.tables import markdown_table, read_table

TABLES = ("probe_set", "headline", "headline_contrasts", "contrasts_accuracy", "contrasts_retained", "consistency",
          "contrasts_consistency", "winner_flips", "mce")
PROBE_WORDS = {"occlusion": "occlusion", "rearrangement": "patch shuffle", "translation": "shift",
               "corruption": "corruption", "consistency": "1-px consistency"}
VARIANT_WORDS = {"aligned": "patch grid", "offset": "offset grid", "shuffle": "", "x": "along x", "y": "along y",
                 "diagonal": "diagonally"}


def read_robustness(folder) -> dict[str, pd.DataFrame | None] | None:
    """The stage's tables by name, or ``None`` when the stage has not written them (a study run before it)."""
    tables = {name: read_table(folder / f"{name}.csv") for name in TABLES}
    return None if tables["probe_set"] is None else tables


def _minus(comparison: str) -> str:
    """"vit - resnet" as the report's sentences write it: "vit − resnet"."""
    return comparison.replace(" - ", " − ")


def _level(probe: str, level: float) -> str:
    if probe == "occlusion":
        return f"{100 * level:g}%"
    if probe == "rearrangement":
        return f"{level:g}x{level:g}"
    if probe == "translation":
        return f"{level:g} px"
    return f"severity {level:g}"


def _condition(probe: str, variant: str) -> str:
    if probe == "corruption":
        return str(variant).replace("_", " ")
    words = VARIANT_WORDS.get(str(variant), str(variant))
    return f"{PROBE_WORDS.get(probe, probe)} ({words})" if words else PROBE_WORDS.get(probe, probe)


def _sizes(rows: pd.DataFrame, every: int) -> str:
    sizes = sorted(rows["train_images"].unique())
    if len(sizes) == every and every > 1:
        return "every fraction"
    return ", ".join(f"{int(n):,}" for n in sizes) + " images"


def _clause(r, a: str, b: str, scale: float = 100.0, unit: str = " points") -> str:
    """One contrast: who is ahead and by how much with the adjusted interval, or no detectable difference with the
    equivalence bound, or (too few seeds) the mean only."""
    mean = f"{scale * r.diff_mean:+.1f}{unit}"
    if not r.inference:
        return f"{mean} (descriptive, {plural(int(r.seeds), 'seed')})"
    ci = interval(r.adj_ci_low, r.adj_ci_high, 1, scale=scale, signed=True, label="Holm-adjusted CI")
    if r.significant:
        winner = a if r.diff_mean > 0 else b  # the difference keeps its sign (a − b), as everywhere in the report
        return f"{mean}, {winner} ahead ({ci})"
    return no_detectable("difference", mean, ci, r.equivalence_bound, 1, scale=scale, unit=unit)


def setup_sentence(probe_set: pd.DataFrame, accuracy: pd.DataFrame) -> str:
    s = probe_set.iloc[0]
    whole = " (the whole test set)" if int(s["images"]) == int(s["test_images"]) else f" of {int(s['test_images']):,}"
    fractions = accuracy["fraction"].nunique() if not accuracy.empty else 0
    probed = accuracy[accuracy["probe"] != "clean"]
    kinds = []
    for probe in [p for p in PROBE_WORDS if p in set(probed["probe"])]:  # the stage's order of probes
        rows = probed[probed["probe"] == probe]
        levels = ", ".join(_level(probe, v) for v in sorted(rows["level"].unique()))
        found = list(dict.fromkeys(rows["variant"].astype(str)))
        ordered = [v for v in VARIANT_WORDS if v in found] + [v for v in found if v not in VARIANT_WORDS]
        variants = ", ".join(v.replace("_", " ") if probe == "corruption" else VARIANT_WORDS[v] for v in ordered)
        kinds.append(f"{PROBE_WORDS.get(probe, probe)} ({variants + ': ' if variants else ''}{levels})")
    return (f"All {int(s['runs'])} runs are probed on the same {int(s['images']):,} test images{whole}, drawn with "
            f"seed {int(s['image_seed'])}, under {int(s['conditions'])} conditions: the clean images, "
            + "; ".join(kinds) + " (docs/robustness.md). "
            f"Each model is compared with {s['reference']}, paired by seed (the same subset and images), with "
            f"intervals Holm-adjusted across the {plural(fractions, 'fraction')} of each comparison, probe and level.")


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


def headline_contrast_sentences(contrasts: pd.DataFrame) -> list[str]:
    """Per comparison and headline condition: the contrast at every fraction and its trend with data."""
    out = []
    for (comparison, _, condition), g in contrasts.groupby(["comparison", "order", "condition"], sort=True):
        a, b = comparison.split(" - ")
        g = g.sort_values("train_images")
        parts = "; ".join(f"at {images(r.train_images)} {_clause(r, a, b)}" for r in g.itertuples())
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
        out.append(f"{_minus(comparison)}, {condition}: {parts}; {change}.")
    return out


def win_sentences(contrasts: pd.DataFrame, what: str) -> list[str]:
    """Per comparison: in how many probed cells (condition × fraction) each model is detectably ahead on ``what``
    (top-1 or retained accuracy), and where the first model is."""
    out = []
    probed = contrasts[contrasts["probe"] != "clean"]
    for comparison, g in probed.groupby("comparison", sort=False):
        a, b = comparison.split(" - ")
        if not g["inference"].all():
            out.append(f"{_minus(comparison)}, {what}: {plural(int(g['seeds'].min()), 'seed')}, so no difference is "
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
                levels = "; ".join(f"{_level(probe, level)} at {_sizes(at, every)}"
                                   for level, at in rows.groupby("level", sort=True))
                groups.append(f"{_condition(probe, variant)}: {levels}")
            where = f"{a} is ahead under " + " | ".join(groups)
        per_probe = ", ".join(f"{PROBE_WORDS.get(p, p)} {len(rows)} of {len(g[g['probe'] == p])}"
                              for p, rows in behind.groupby("probe", sort=False))
        against = f"; {b} is ahead in {per_probe}" if per_probe else ""
        out.append(f"{_minus(comparison)}, {what} (Holm-adjusted): {counts}. {where}{against}.")
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
        f"{r.direction} at {images(r.train_images)} under {_condition(r.probe, r.variant)}: behind "
        + ("on the clean images" if r.significant_from_level == 0 else f"at {_level(r.probe, r.significant_from_level)}")
        + f", ahead at {_level(r.probe, r.significant_to_level)}"
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
        clauses = "; ".join(f"{VARIANT_WORDS.get(d, d)} at {images(r.train_images)} {_clause(r, a, b)}"
                            for d, rows in g.groupby("variant", sort=False)
                            for r in rows.sort_values("train_images").itertuples()
                            if r.fraction in ends)
        out.append(f"1-px consistency (1 − that share), {_minus(comparison)}: {clauses}.")
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


def robustness_findings(tables: dict[str, pd.DataFrame | None] | None, min_seeds: int = MIN_SEEDS) -> list[str]:
    """The bullets of "Where the ViT wins", from the stage's tables (``None``: the stage did not run)."""
    if tables is None:
        return []
    accuracy = tables["contrasts_accuracy"]
    out = [setup_sentence(tables["probe_set"], accuracy)]
    out += headline_sentences(tables["headline"], min_seeds)
    out += headline_contrast_sentences(tables["headline_contrasts"])
    out += win_sentences(accuracy, "top-1")
    out += win_sentences(tables["contrasts_retained"], "retained accuracy (probe / clean)")
    out += flip_sentences(tables["winner_flips"])
    out += consistency_sentences(tables["consistency"], tables["contrasts_consistency"], min_seeds)
    out += mce_sentences(tables["mce"])
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
