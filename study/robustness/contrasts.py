"""When does the ViT win? Statistics of the robustness probes over seeds, as for clean accuracy.

From one row per run and condition (:func:`study.robustness.scoring.score_runs`) joined to the run
table (:func:`per_run`), with the conventions of :mod:`study.curves.efficiency` and
:mod:`study.stats.intervals`:

- :func:`summarise` — per model × fraction × probe × level: mean top-1 and retained accuracy (probe / clean,
  per run) with Student-t intervals over seeds; level 0 of every probe is the clean images.
- :func:`contrasts` — ``a − b`` (e.g. vit − resnet) of a per-run value, paired by seed (same subset, same
  images), per probe and level, with the raw t-interval and the interval Holm-adjusted across the fractions of
  that comparison, probe and level (one family per comparison × metric × probe × variant × level). Where the
  adjusted interval includes 0 the ``equivalence_bound`` is the largest |difference| it leaves possible; with
  fewer than ``MIN_SEEDS`` seeds ``inference`` is False and nothing may rest on ``significant``.
- :func:`winner_flips` — along a probe's levels at one fraction, a flip of the winner is claimed only when the
  adjusted accuracy contrast is significant with one sign at a level (the clean images count as level 0) and
  significant with the other at a higher one; every sign change of the mean is counted anyway.
- :func:`contrast_trends` — slope of the per-seed contrast per decade of training images, fitted per seed, with
  a t-interval over seeds; fractions with step-bound runs left out, as for the clean gaps.
- :func:`mce_tables` — corruption error per corruption and mean corruption error relative to the baseline (the
  ResNet of the same fraction and seed; Hendrycks & Dietterich 2019), plain and relative, per run, then over
  seeds, with the contrast to 1 Holm-adjusted across fractions.
- :func:`headline` — the conditions the report quotes: clean, occlusion of half the patch grid's cells, the
  patch-grid shuffle and a 2-px shift along x.
- :func:`with_variant_runs`, :func:`variant_pairs` — test-time variants of a run (``vit@uniform``: the ViT with
  uniform attention) carry their run's facts and are contrasted with their own run, ``vit@uniform − vit``.

One module although over 300 lines: every function reads the same per-run table (:func:`per_run`) with the same
keys, seed pairing and Holm families, so that the probes' statistics stay the clean accuracy's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from study.robustness import (ALIGNED, CLEAN, CORRUPTION, OCCLUSION, REARRANGEMENT, SHUFFLE, TRANSLATION,
                              is_variant, trained_model)
from study.robustness.corruption_error import corruption_errors, mce
from study.stats.intervals import MIN_SEEDS, equivalence_bound, holm_intervals, t_interval
from study.stats.trend import decade_slopes, slope_rows, step_free_pairs
from study.core.errors import StudyError

KEYS = ["probe", "variant", "level"]
RUN_KEYS = ["model", "fraction", "seed"]
CONSISTENCY = "consistency"  # the probe name of the 1-px shift consistency rows
# Metrics: the column of the per-run table each contrast is taken of, and its scale in the tables (points).
METRICS = {"accuracy": "top1", "retained": "retained", CONSISTENCY: CONSISTENCY}
CONTRAST_COLUMNS = ["comparison", "metric", *KEYS, "fraction", "train_images", "seeds", "images", "diff_mean", "ci_low",
                    "ci_high", "adj_ci_low", "adj_ci_high", "adj_confidence", "p", "p_holm", "significant", "inference",
                    "equivalence_bound", "under_trained", "step_bound"]


def per_run(scores: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The scores with each run's facts (training images, convergence flags), its clean top-1 on the same images
    and its retained accuracy ``top1 / clean_top1`` (NaN where the clean top-1 is 0)."""
    facts = runs[[*RUN_KEYS, "train_images", "under_trained", "step_bound"]]
    out = scores.merge(facts, on=RUN_KEYS, how="left", validate="many_to_one")
    if out["train_images"].isna().any():
        row = out[out["train_images"].isna()].iloc[0]
        raise StudyError(f"robustness: no run record for {row['model']} at fraction {row['fraction']} seed "
                         f"{row['seed']}; score the runs of the run table")
    clean = scores[scores["probe"] == CLEAN][[*RUN_KEYS, "top1"]].rename(columns={"top1": "clean_top1"})
    out = out.merge(clean, on=RUN_KEYS, how="left", validate="many_to_one")
    out["retained"] = out["top1"] / out["clean_top1"].where(out["clean_top1"] > 0)
    return out


def with_variant_runs(runs: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """The run table with, for every test-time variant in ``scores`` ("vit@uniform"), a copy of its trained model's
    rows under the variant's name: the same trained weights, so the same training images and convergence flags,
    and :func:`per_run` and the contrasts then read a variant like a run."""
    variants = [name for name in dict.fromkeys(scores["model"]) if is_variant(name)]
    copies = [runs[runs["model"] == trained_model(name)].assign(model=name) for name in variants]
    return pd.concat([runs, *copies], ignore_index=True) if copies else runs


def variant_pairs(table: pd.DataFrame) -> list[tuple[str, str]]:
    """``(variant, its trained model)`` for every variant in ``table``, e.g. ("vit@uniform", "vit"): the contrast
    ``vit@uniform − vit``, paired by seed, is what the switched-off part (attention) is worth. A variant is not
    compared with the reference CNN: its own model is the question's baseline."""
    return [(name, trained_model(name)) for name in sorted(set(table["model"])) if is_variant(name)]


def trained_only(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the rows of test-time variants: what the figures and the corruption errors against the
    reference CNN show."""
    return table[~table["model"].map(is_variant)]


def consistency_rows(consistency: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The 1-px consistency per run and direction in the layout of :func:`per_run` (probe ``consistency``,
    variant the direction, level 1), so that the same summaries and contrasts apply."""
    facts = runs[[*RUN_KEYS, "train_images", "under_trained", "step_bound"]]
    out = consistency.assign(probe=CONSISTENCY, variant=consistency["direction"], level=1.0)
    return out.drop(columns="direction").merge(facts, on=RUN_KEYS, how="left", validate="many_to_one")


def with_level_zero(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (per run) with the clean rows repeated as level 0 of every other probe and variant, so that
    curves and summaries start from the clean images."""
    clean = table[table["probe"] == CLEAN]
    probed = table[(table["probe"] != CLEAN) & (table["probe"] != CONSISTENCY)]
    zeros = [clean.assign(probe=probe, variant=variant, level=0.0, detail="clean test images")
             for probe, variant in probed[["probe", "variant"]].drop_duplicates().itertuples(index=False)]
    return pd.concat([table, *zeros], ignore_index=True)


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return np.nan, np.nan, np.nan
    mean, _, half = t_interval(values, confidence)
    return mean, mean - half, mean + half


def summarise(table: pd.DataFrame, confidence: float, values: tuple[str, ...] = ("top1", "retained")
              ) -> pd.DataFrame:
    """Per model × fraction × probe × variant × level: seeds, the images scored and, for each of ``values``, the
    mean over seeds and its Student-t interval (``<value>_mean``, ``_ci_low``, ``_ci_high``)."""
    rows = []
    for (model, fraction, probe, variant, level), g in table.groupby(["model", "fraction", *KEYS], sort=True):
        row = {"model": model, "fraction": fraction, "train_images": int(g["train_images"].median()),
               "probe": probe, "variant": variant, "level": level,
               "detail": g["detail"].iloc[0] if "detail" in g else "", "seeds": len(g),
               "images": int(g["images"].iloc[0])}
        for value in values:
            mean, low, high = _interval(g[value].to_numpy(float), confidence)
            row.update({f"{value}_mean": mean, f"{value}_ci_low": low, f"{value}_ci_high": high})
        rows.append(row)
    columns = ["model", "fraction", "train_images", *KEYS, "detail", "seeds", "images",
               *(f"{v}_{s}" for v in values for s in ("mean", "ci_low", "ci_high"))]
    return pd.DataFrame(rows, columns=columns)


def contrasts(table: pd.DataFrame, pairs: list[tuple[str, str]], metric: str, confidence: float) -> pd.DataFrame:
    """``a − b`` of ``metric`` (a key of :data:`METRICS`) per probe, variant, level and fraction, paired by seed,
    with raw and Holm-adjusted intervals (the family: one comparison × probe × variant × level, across its
    fractions) and the equivalence bound where no difference is detected. ``under_trained``/``step_bound`` count
    the flagged runs of the pair."""
    value = METRICS[metric]
    data = table if metric != "retained" else table[table["probe"] != CLEAN]  # clean retains 1 by definition
    index = [*KEYS, "fraction", "seed"]
    wide = data.pivot_table(index=index, columns="model", values=value)
    flags = data.pivot_table(index=index, columns="model", values="under_trained", aggfunc="max")
    bound = data.pivot_table(index=index, columns="model", values="step_bound", aggfunc="max")
    sizes = table.groupby("fraction")["train_images"].median()
    scored = data.groupby(KEYS)["images"].min()  # test images per run at each condition: n beside every contrast
    rows = []
    for a, b in pairs:
        if a not in wide or b not in wide:
            continue
        diff = (wide[a] - wide[b]).dropna()
        for key, family in diff.groupby(level=KEYS, sort=True):
            groups = list(family.groupby(level="fraction", sort=True))
            adjusted = holm_intervals([d.to_numpy() for _, d in groups], confidence)
            for (fraction, d), adj in zip(groups, adjusted):
                mean, _, half = t_interval(d.to_numpy(), confidence)
                inference = d.size >= MIN_SEEDS
                rows.append({
                    "comparison": f"{a} - {b}", "metric": metric, **dict(zip(KEYS, key)), "fraction": fraction,
                    "train_images": int(sizes[fraction]), "seeds": d.size, "images": int(scored[key]),
                    "diff_mean": mean,
                    "ci_low": mean - half, "ci_high": mean + half, "adj_ci_low": adj.low, "adj_ci_high": adj.high,
                    "adj_confidence": adj.confidence, "p": adj.p, "p_holm": adj.p_holm,
                    "significant": bool(adj.significant), "inference": inference,
                    "equivalence_bound": equivalence_bound(adj.low, adj.high, adj.significant, d.size),
                    "under_trained": int(flags[a].loc[d.index].sum() + flags[b].loc[d.index].sum()),
                    "step_bound": int(bound[a].loc[d.index].sum() + bound[b].loc[d.index].sum()),
                })
    return pd.DataFrame(rows, columns=CONTRAST_COLUMNS)


FLIP_COLUMNS = ["comparison", "probe", "variant", "fraction", "train_images", "levels", "clean_diff",
                "clean_significant", "sign_changes", "first_sign_change_level", "flip_claimed", "direction",
                "significant_from_level", "significant_to_level"]


def winner_flips(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Per comparison × probe × variant × fraction, along the levels (the clean contrast as level 0): how often
    the mean contrast changes sign, and whether a flip of the winner is claimed — significant (adjusted, with
    enough seeds) with one sign at a level and with the other at a higher one. ``direction`` names who overtakes
    whom; ``significant_from_level``/``_to_level``: the lowest level significant one way and the first higher level
    significant the other way."""
    accuracy = accuracy[accuracy["metric"] == "accuracy"]
    clean = accuracy[accuracy["probe"] == CLEAN]
    rows = []
    probed = accuracy[(accuracy["probe"] != CLEAN) & (accuracy["probe"] != CONSISTENCY)]
    for (comparison, probe, variant, fraction), g in probed.groupby(["comparison", "probe", "variant", "fraction"],
                                                                     sort=True):
        base = clean[(clean["comparison"] == comparison) & (clean["fraction"] == fraction)]
        g = pd.concat([base.assign(probe=probe, variant=variant, level=0.0), g]).sort_values("level")
        levels, means = g["level"].to_numpy(float), g["diff_mean"].to_numpy(float)
        changes = [levels[i + 1] for i in range(len(means) - 1) if means[i] * means[i + 1] < 0]
        usable = (g["significant"] & g["inference"]).to_numpy(bool)
        signs = np.sign(means) * usable
        claim = None
        for j in range(len(levels)):
            earlier = [i for i in range(j) if signs[i] != 0 and signs[i] == -signs[j] and signs[j] != 0]
            if earlier:
                claim = (earlier[0], j)
                break
        a, b = comparison.split(" - ")
        row = {"comparison": comparison, "probe": probe, "variant": variant, "fraction": fraction,
               "train_images": int(g["train_images"].iloc[0]), "levels": len(levels) - (1 if len(base) else 0),
               "clean_diff": means[0] if len(base) else np.nan,
               "clean_significant": bool(usable[0]) if len(base) else False, "sign_changes": len(changes),
               "first_sign_change_level": changes[0] if changes else np.nan, "flip_claimed": claim is not None,
               "direction": "", "significant_from_level": np.nan, "significant_to_level": np.nan}
        if claim is not None:
            i, j = claim
            row.update({"direction": f"{a} overtakes {b}" if signs[j] > 0 else f"{b} overtakes {a}",
                        "significant_from_level": levels[i], "significant_to_level": levels[j]})
        rows.append(row)
    return pd.DataFrame(rows, columns=FLIP_COLUMNS)


TREND_COLUMNS = ["comparison", "metric", *KEYS, "slope_per_decade", "ci_low", "ci_high", "adj_ci_low", "adj_ci_high",
                 "adj_confidence", "p_holm", "seeds", "fractions_used", "inference", "significant", "equivalence_bound"]


def contrast_trends(table: pd.DataFrame, pairs: list[tuple[str, str]], metric: str, confidence: float
                    ) -> pd.DataFrame:
    """Slope per decade of training images of the per-seed contrast ``a − b`` of ``metric`` (in points: × 100),
    fitted per seed against log₁₀(training images) and summarised over seeds (Student-t); fractions with a
    step-bound run of either model are left out, as in :func:`study.curves.efficiency.gap_trends` (both fitted by
    :mod:`study.stats.trend`).
    ``ci_*``: the raw t-interval. As there, the Holm family is the comparisons asked the same question, "does the
    contrast change with data?", here at one metric and condition (ViT − ResNet and DeiT − ResNet): ``adj_*``,
    ``significant`` (at least ``MIN_SEEDS`` seeds) and, where no trend is detected, ``equivalence_bound``."""
    value = METRICS[metric]
    data = table if metric != "retained" else table[table["probe"] != CLEAN]
    wide = data.pivot_table(index=[*KEYS, "fraction", "seed"], columns="model", values=value)
    bound = table.pivot_table(index=["fraction", "seed"], columns="model", values="step_bound", aggfunc="max")
    sizes = table.groupby("fraction")["train_images"].median()
    rows, slopes = [], []
    for a, b, fractions in step_free_pairs(pairs, wide.columns, bound):
        diff = 100 * (wide[a] - wide[b])
        for key, contrast in diff.groupby(level=KEYS, sort=True):
            slopes.append(decade_slopes(contrast.droplevel(KEYS), fractions, sizes))
            rows.append({"comparison": f"{a} - {b}", "metric": metric, **dict(zip(KEYS, key)),
                         "fractions_used": len(fractions)})
    families = [tuple(row[k] for k in KEYS) for row in rows]  # one Holm family per condition
    for row, statistics in zip(rows, slope_rows(slopes, families, confidence, inferred_only=True)):
        row.update(statistics)
    return pd.DataFrame(rows, columns=TREND_COLUMNS)


def _errors(table: pd.DataFrame) -> pd.DataFrame:
    """The corruption rows as :func:`study.robustness.probes.mce` reads them, with one severity-0 (clean) row per
    run."""
    corrupted = table[(table["probe"] == CORRUPTION) & (table["level"] > 0)]  # level 0: the clean rows, below
    if corrupted.empty:
        return pd.DataFrame(columns=[*RUN_KEYS, "corruption", "severity", "error"])
    rows = corrupted[RUN_KEYS].assign(corruption=corrupted["variant"], severity=corrupted["level"].astype(int),
                                      error=1.0 - corrupted["top1"])
    clean = table[table["probe"] == CLEAN]
    zero = clean[RUN_KEYS].assign(corruption=rows["corruption"].iloc[0], severity=0, error=1.0 - clean["top1"])
    return pd.concat([rows, zero], ignore_index=True)


CE_COLUMNS = ["model", "baseline", "fraction", "train_images", "corruption", "seeds", "ce_mean", "ce_ci_low",
              "ce_ci_high"]
MCE_COLUMNS = ["model", "baseline", "measure", "fraction", "train_images", "seeds", "mean", "ci_low", "ci_high",
               "adj_ci_low", "adj_ci_high", "adj_confidence", "p_holm", "significant", "inference",
               "equivalence_bound"]


def mce_tables(table: pd.DataFrame, baseline: str, confidence: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(mce, ce)``: the mean corruption error of every other model against ``baseline`` (the model of the same
    fraction and seed), plain (``mce``) and relative to each model's clean error (``relative_mce``), per run, then
    the mean over seeds with its t-interval and the contrast to 1 (as robust as the baseline) Holm-adjusted across
    fractions; and per corruption the corruption error's mean and t-interval over seeds. Empty without
    corruptions or without the baseline."""
    errors = _errors(table)
    if errors.empty or baseline not in set(errors["model"]):
        return pd.DataFrame(columns=MCE_COLUMNS), pd.DataFrame(columns=CE_COLUMNS)
    by = ("fraction", "seed")
    sizes = table.groupby("fraction")["train_images"].median()
    per_run = mce(errors, baseline, by).merge(mce(errors, baseline, by, relative=True), on=[*by, "model"])
    rows = []
    for measure in ("mce", "relative_mce"):
        for model, g in per_run[per_run["model"] != baseline].groupby("model", sort=True):
            groups = list(g.groupby("fraction", sort=True))
            adjusted = holm_intervals([d[measure].to_numpy(float) - 1.0 for _, d in groups], confidence)
            for (fraction, d), adj in zip(groups, adjusted):
                mean, low, high = _interval(d[measure].to_numpy(float), confidence)
                inference = len(d) >= MIN_SEEDS
                rows.append({"model": model, "baseline": baseline, "measure": measure, "fraction": fraction,
                             "train_images": int(sizes[fraction]), "seeds": len(d), "mean": mean, "ci_low": low,
                             "ci_high": high, "adj_ci_low": 1.0 + adj.low, "adj_ci_high": 1.0 + adj.high,
                             "adj_confidence": adj.confidence, "p_holm": adj.p_holm,
                             "significant": bool(adj.significant), "inference": inference,
                             "equivalence_bound": equivalence_bound(adj.low, adj.high, adj.significant, len(d))})
    per_corruption = corruption_errors(errors, baseline, by)
    ce_rows = []
    for (model, fraction, corruption), g in per_corruption.groupby(["model", "fraction", "corruption"], sort=True):
        mean, low, high = _interval(g["ce"].to_numpy(float), confidence)
        ce_rows.append({"model": model, "baseline": baseline, "fraction": fraction,
                        "train_images": int(sizes[fraction]), "corruption": corruption, "seeds": len(g),
                        "ce_mean": mean, "ce_ci_low": low, "ce_ci_high": high})
    return pd.DataFrame(rows, columns=MCE_COLUMNS), pd.DataFrame(ce_rows, columns=CE_COLUMNS)


def _nearest(levels: pd.Series, target: float) -> float | None:
    values = levels[levels > 0].unique()
    return float(values[np.argmin(np.abs(values - target))]) if len(values) else None


def headline_conditions(summary: pd.DataFrame, patch_grid: int, share: float = 0.5, shift: float = 2.0
                        ) -> list[tuple[str, str, str, float]]:
    """``(label, probe, variant, level)`` of the conditions the report quotes: the clean images, the occlusion
    share nearest ``share`` of the aligned grid, the shuffle of the ``patch_grid`` grid, the shift nearest
    ``shift`` px along x — each where the summary has it."""
    out = [("clean", CLEAN, CLEAN, 0.0)]
    aligned = summary[(summary["probe"] == OCCLUSION) & (summary["variant"] == ALIGNED)]["level"]
    if (level := _nearest(aligned, share)) is not None:
        out.append((f"{100 * level:g}% occluded", OCCLUSION, ALIGNED, level))
    grids = summary[(summary["probe"] == REARRANGEMENT) & (summary["variant"] == SHUFFLE)]["level"]
    if (grids == patch_grid).any():
        out.append((f"{patch_grid}x{patch_grid} shuffle", REARRANGEMENT, SHUFFLE, float(patch_grid)))
    shifts = summary[(summary["probe"] == TRANSLATION) & (summary["variant"] == "x")]["level"]
    if (level := _nearest(shifts, shift)) is not None:
        out.append((f"{level:g}-px shift", TRANSLATION, "x", level))
    return out


def headline(summary: pd.DataFrame, accuracy: pd.DataFrame, trends: pd.DataFrame, patch_grid: int
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(values, contrasts)`` at the headline conditions (:func:`headline_conditions`): each model's top-1 per
    fraction with its interval, and the accuracy contrasts with their adjusted intervals and trend with data."""
    values, contrast_rows = [], []
    for order, (label, probe, variant, level) in enumerate(headline_conditions(summary, patch_grid)):
        at = (summary["probe"] == probe) & (summary["variant"] == variant) & (summary["level"] == level)
        values.append(summary[at].assign(condition=label, order=order))
        at = (accuracy["probe"] == probe) & (accuracy["variant"] == variant) & (accuracy["level"] == level)
        trend = trends[(trends["probe"] == probe) & (trends["variant"] == variant) & (trends["level"] == level)]
        trend = trend[["comparison", "metric", "slope_per_decade", "adj_ci_low", "adj_ci_high", "fractions_used",
                       "significant"]].rename(columns={"adj_ci_low": "slope_ci_low", "adj_ci_high": "slope_ci_high",
                                                       "significant": "slope_significant"})
        contrast_rows.append(accuracy[at].merge(trend, on=["comparison", "metric"], how="left")
                             .assign(condition=label, order=order))
    value_columns = ["order", "condition", "model", "fraction", "train_images", "seeds", "probe", "variant", "level",
                     "top1_mean", "top1_ci_low", "top1_ci_high", "retained_mean"]
    contrast_columns = ["order", "condition", "comparison", "fraction", "train_images", "seeds", "probe", "variant",
                        "level", "diff_mean", "adj_ci_low", "adj_ci_high", "significant", "inference",
                        "equivalence_bound", "slope_per_decade", "slope_ci_low", "slope_ci_high", "fractions_used",
                        "slope_significant"]
    return (pd.concat(values, ignore_index=True)[value_columns],
            pd.concat(contrast_rows, ignore_index=True)[contrast_columns])
