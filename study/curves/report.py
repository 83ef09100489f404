"""The report's sentences about accuracy against training-set size and about convergence, each derived from
a table by a rule, and the data-efficiency section with the ``curves`` stage's figures and tables.

The rules, those of findings a reviewer would accept:

- With fewer than ``MIN_SEEDS`` seeds nothing is inferred: sentences give measured means and say why.
- "±x points, A ahead" (always A − B, so negative when B leads) only when the Holm-adjusted interval across
  the comparison's fractions excludes 0; otherwise "no detectable difference", with the interval and the
  differences it excludes (the equivalence bound of the table).
- Trends with data likewise, from their interval Holm-adjusted across the comparisons of a scale.
- A power-law fit is quoted only when the data identify it (the table's ``identified``); otherwise the
  sentence says which parameter the data left undetermined.
- A crossing only when the gap is significantly negative at one size and significantly positive at a
  larger one (or the reverse); every sign change of the mean gap is listed either way.
- Comparisons involving runs still improving at the end carry that flag; step-bound runs are out of fits.

Every sentence function takes data frames (the tables of the ``curves`` stage, the run table, the training-fit
table of :mod:`study.report.setup`, by the names in :mod:`study.writing`) and returns a list of sentences; none computes a statistic. The report's parts
(:data:`ACCURACY`, :data:`CONVERGENCE`, :data:`SECTION`) read those tables by the names :mod:`study.curves`
defines; :func:`headline_metrics` chooses the rows ``dvc metrics show`` lists.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from study.stats.resampling import MIN_BOOTSTRAP_SEEDS

from study import curves
from study.outputs.tables import markdown_table
from study import writing
from study.writing.format import images, interval, no_detectable, percent, plural, points, share
from study.writing.section import Part, Sources
from study.stats.intervals import MIN_SEEDS


def seeds_statement(summary: pd.DataFrame) -> list[str]:
    """Whether inference is possible at all, and why not."""
    fewest, most = int(summary["seeds"].min()), int(summary["seeds"].max())
    if fewest >= MIN_SEEDS:
        counted = f"{fewest}" if fewest == most else f"{fewest}–{most}"
        return [f"Every point averages {counted} seeds; intervals are Student-t over seeds."]
    return [f"With {plural(fewest, 'seed')} per point no inference is drawn (a t-interval from "
            f"{plural(fewest, 'seed')} has {plural(max(fewest - 1, 0), 'degree')} of freedom; at least "
            f"{MIN_SEEDS} are needed): the sentences below describe measured means only."]


def ranking(summary: pd.DataFrame) -> list[str]:
    """Mean test top-1 at the smallest and the full training set (descriptive)."""
    out = []
    largest = summary["fraction"].max()
    for fraction, word in ((summary["fraction"].min(), "smallest"), (largest, "full" if largest >= 1.0 else "largest")):
        at = summary[summary["fraction"] == fraction].sort_values("top1_mean", ascending=False)
        listed = ", ".join(f"{r.model} {share(r.top1_mean)}" for r in at.itertuples())
        out.append(f"Mean test top-1 with the {word} training set ({images(at['train_images'].iloc[0])}): {listed}.")
    return out


def _flag(row) -> str:
    flagged = row.under_trained_a + row.under_trained_b
    if not flagged:
        return ""
    return f" [{flagged} of {2 * row.seeds} runs still improving at the end]"


def gap_sentences(gaps: pd.DataFrame) -> list[str]:
    """One sentence per comparison: which fractions show a difference, and the others' intervals."""
    out = []
    for comparison, g in gaps.groupby("comparison", sort=False):
        a, b = comparison.split(" - ")
        g = g.sort_values("train_images")
        if not g["inference"].all():
            parts = "; ".join(f"{points(r.gap_mean)} points at {images(r.train_images)}{_flag(r)}"
                              for r in g.itertuples())
            out.append(f"Mean gap {a} − {b} (descriptive, {int(g['seeds'].min())} seeds): {parts}.")
            continue
        parts = []
        for r in g.itertuples():
            ci = interval(r.adj_ci_low, r.adj_ci_high, 1, scale=100.0, signed=True, label="adjusted CI")
            if r.significant:
                winner = a if r.gap_mean > 0 else b  # the sign convention stays a − b: negative when b leads
                parts.append(f"at {images(r.train_images)} {points(r.gap_mean)} points, {winner} ahead "
                             f"({ci}){_flag(r)}")
            else:
                null = no_detectable("difference", f"{points(r.gap_mean)} points", ci, r.equivalence_bound, 1,
                                     scale=100.0, unit=" points")
                parts.append(f"at {images(r.train_images)} {null}{_flag(r)}")
        out.append(f"{a} − {b}: " + "; ".join(parts) + ". Intervals are Holm-adjusted across the "
                   f"{plural(len(g), 'fraction')}.")
    return out


def crossing_sentences(crossings: pd.DataFrame) -> list[str]:
    out = []
    for r in crossings.itertuples():
        a, b = r.comparison.split(" - ")
        # ";"-joined sizes in the CSV; pandas reads a single one back as a number, none as NaN.
        listed = [] if pd.isna(r.sign_change_train_images) else str(r.sign_change_train_images).split(";")
        changes = (f"the mean gap changes sign {plural(r.sign_changes, 'time')} "
                   f"(near {', '.join(f'{int(float(n)):,}' for n in listed)} images)"
                   if r.sign_changes else "the mean gap keeps one sign")
        if r.crossing_claimed:
            out.append(f"Crossing: {r.direction} — significantly behind at {images(r.significant_from_images)}, "
                       f"significantly ahead at {images(r.significant_to_images)}; {changes}.")
        else:
            out.append(f"No crossing of {a} and {b} is supported by the adjusted intervals; {changes}.")
    return out


def trend_sentences(trends: pd.DataFrame) -> list[str]:
    """Slope of each comparison's gap per tenfold more data, on the accuracy and the error-ratio scale, with the
    interval Holm-adjusted across the comparisons of the scale."""
    out = []
    compared = trends["comparison"].nunique()
    for comparison, g in trends.groupby("comparison", sort=False):
        parts = [_trend(r) for r in g[g["seeds"] > 0].itertuples()]
        if parts:
            used = int(g["fractions_used"].iloc[0])
            out.append(f"Trend of {comparison} with data over {used} fractions — " + "; ".join(parts) + ". "
                       f"Intervals are Holm-adjusted across the {plural(compared, 'comparison')} of each scale.")
    return out


def _trend(r) -> str:
    """One scale of a trend sentence: the slope with its adjusted interval, no detectable trend with the trends
    it excludes, or (too few seeds) the slope only."""
    unit, digits = (" points", 1) if r.scale.startswith("gap") else ("", 3)
    value = f"{r.slope_per_decade:+.{digits}f}{unit} per tenfold data"
    if not r.inference:
        return f"{r.scale}: {value} (descriptive, {plural(int(r.seeds), 'seed')})"
    ci = interval(r.adj_ci_low, r.adj_ci_high, digits, signed=True,
                  label=f"Holm-adjusted {share(r.adj_confidence)} CI")
    if r.significant:
        return f"{r.scale}: {value} ({ci})"
    return f"{r.scale}: " + no_detectable("trend", value, ci, r.equivalence_bound, digits,
                                          unit=f"{unit} per tenfold data")


# How each power-law parameter is printed: a scale factor, an exponent, an error rate.
_FORMAT = {"a": ".3g", "b": ".2f", "c": ".3f"}


def power_law_sentences(fits: pd.DataFrame) -> list[str]:
    """Per model, the power-law fit with its bootstrap intervals where the table marks it ``identified``, and
    otherwise one sentence on why it is not quoted."""
    out = []
    for r in fits.itertuples():
        left_out = f"; {plural(int(r.runs_step_bound), 'step-bound run')} left out" if r.runs_step_bound else ""
        if not math.isfinite(r.b):
            out.append(f"{r.model}: no power-law fit (fewer than 3 training-set sizes without step-bound runs).")
        elif r.identified:
            cis = ", ".join(f"{k} {getattr(r, f'{k}_ci_low'):{f}} to {getattr(r, f'{k}_ci_high'):{f}}"
                            for k, f in _FORMAT.items())
            out.append(f"{r.model}: error ≈ {r.a:{_FORMAT['a']}}·n^(−{r.b:{_FORMAT['b']}}) + {r.c:{_FORMAT['c']}} "
                       f"(bootstrap CIs over seeds: {cis}){left_out}.")
        else:
            out.append(f"{r.model}: no power law is quoted, as the data do not identify error ≈ a·n^(−b) + c: "
                       f"{_undetermined(r)}{left_out}.")
    return out


def _undetermined(r) -> str:
    """Which parameters of a fit the data left undetermined, and how: on the fit's bound (the constraint, not
    the data, set the value), without a bootstrap interval, or with one too wide to pin it down."""
    reasons = []
    for name in "abc":
        low, high = getattr(r, f"{name}_ci_low"), getattr(r, f"{name}_ci_high")
        if getattr(r, f"{name}_on_bound"):
            reasons.append(f"{name} sits on the fit's bound ({name} = {getattr(r, name):{_FORMAT[name]}})")
        elif not (math.isfinite(low) and math.isfinite(high)):
            seeds = getattr(r, "bootstrap_seeds", None)
            few = f" ({int(seeds)} seed{'' if seeds == 1 else 's'}: too few to resample)" if seeds is not None and math.isfinite(seeds) \
                and seeds < MIN_BOOTSTRAP_SEEDS else ""
            reasons.append(f"{name} has no bootstrap interval{few}")
        elif getattr(r, f"{name}_too_wide"):
            reasons.append(f"{name}'s bootstrap interval ({low:{_FORMAT[name]}} to {high:{_FORMAT[name]}}) is too "
                           "wide to determine it")
    return "; ".join(reasons)


def convergence_sentences(runs: pd.DataFrame) -> list[str]:
    """How many runs were still improving at the end, where, and how many of them were step-bound."""
    flagged = runs[runs["under_trained"].astype(bool)]
    if flagged.empty:
        return [f"All {len(runs)} runs had settled: none lost more than 1% of its validation loss over its last "
                "quarter of steps."]
    where = (flagged.groupby(["model", "fraction"]).size().reset_index(name="n")
             .groupby("fraction")["n"].sum())
    listed = ", ".join(f"{n} at fraction {f:g}" for f, n in where.items())
    bound = int(runs["step_bound"].sum())
    return [f"{len(flagged)} of {len(runs)} runs were still improving at the end (validation loss fell more than 1% "
            f"over the last quarter of steps): {listed}. Their accuracies measure the budget as much as the data; "
            "comparisons that involve them are flagged."
            + (f" {bound} of them {'was' if bound == 1 else 'were'} on the min_steps floor (step-bound) and "
               f"{'is' if bound == 1 else 'are'} left out of the power-law fits and gap trends." if bound else "")]


def fit_sentences(fit_table: pd.DataFrame) -> list[str]:
    """Did every model fit its own training images (:func:`study.report.setup.training_fit`)? If all did and
    none was still improving, a gap between models at a fraction is one of generalisation from the same
    data, not of how far each was optimised."""
    if fit_table.empty:
        return []
    fit = float(fit_table["fit"].iloc[0])
    unfit = fit_table[fit_table["below_fit"] > 0]
    if unfit.empty:
        sentence = (f"Every run fit its own training images: train top-1 (unaugmented, on up to 2,000 of them) was "
                    f"at least {percent(fit)} in all {int(fit_table['runs'].sum())} runs")
        if not fit_table["still_improving"].any():
            return [sentence + "; with none still improving either, a gap between models at a fraction measures "
                    "generalisation from the same data, not how far the budget let each model optimise."]
        return [sentence + "."]
    listed = ", ".join(f"{r.model} at fraction {r.fraction:g} ({share(r.train_top1_mean)} mean, lowest "
                       f"{share(r.train_top1_min)})" for r in unfit.itertuples())
    sentence = f"Runs that did not fit their own training images (train top-1 below {percent(fit)}): {listed}."
    # Not fitting the training images is a budget problem only while held-out loss is still falling; once it has
    # stopped, more steps would fit more training images without a sign that test accuracy would follow.
    below, settled = int(unfit["below_fit"].sum()), int(unfit["below_fit_settled"].sum())
    if settled == 0:
        return [sentence + " Their test accuracy measures optimisation as much as generalisation."]
    if settled == below:
        return [sentence + f" The validation loss of all {below} of these runs had stopped falling (it rose or "
                "stayed within 1% over the last quarter of steps), so their shortfall is not the step budget: more "
                "steps would fit more training images with no sign on held-out data that accuracy would follow."]
    return [sentence + f" The validation loss of {settled} of these {below} runs had stopped falling, so for "
            "them the shortfall is not the step budget; the other runs' test accuracy measures optimisation as much "
            "as generalisation."]


def _table(sources: Sources, name: str) -> pd.DataFrame:
    return sources.table(curves.FOLDER, name)


def _accuracy(sources: Sources) -> list[str]:
    summary = _table(sources, curves.SUMMARY)
    return [*seeds_statement(summary), *ranking(summary), *gap_sentences(_table(sources, curves.GAPS)),
            *crossing_sentences(_table(sources, curves.CROSSINGS)),
            *trend_sentences(_table(sources, curves.TRENDS)),
            *power_law_sentences(_table(sources, curves.POWER_LAW))]


def _convergence(sources: Sources) -> list[str]:
    return [*convergence_sentences(_table(sources, curves.RUNS)),
            *fit_sentences(sources.setup_table(writing.TRAINING_FIT))]


def _section(sources: Sources) -> list[str]:
    """The curves and the gaps with their tables, the trends and the power-law fits, then the distilled model's
    heads (DeiT Table 3; a study without distillation has none)."""
    summary, gaps = _table(sources, curves.SUMMARY), _table(sources, curves.GAPS)
    fits, heads = _table(sources, curves.POWER_LAW), sources.setup_table(writing.DEIT_HEADS)
    lines = [
        "## Data efficiency", "",
        sources.figure(curves.FOLDER, curves.CURVES_FIGURE,
                       "Test accuracy against training images (log scale); bands: t-interval over seeds; ringed: runs "
                       "still improving at the end."), "",
        markdown_table(summary[["model", "fraction", "train_images", "seeds", "top1_mean", "top1_ci_low",
                                "top1_ci_high", "train_top1_mean", "under_trained"]]), "",
        sources.figure(curves.FOLDER, curves.GAPS_FIGURE,
                       "Paired gaps: thin bars raw t-intervals, thick bars Holm-adjusted; filled where a difference is "
                       "claimed."), "",
        "Paired gaps (same subset and seed); `adj_*`: Holm-adjusted across the comparison's fractions:", "",
        markdown_table(gaps[["comparison", "train_images", "seeds", "gap_mean", "gap_ci_low", "gap_ci_high",
                             "adj_ci_low", "adj_ci_high", "p_holm", "significant", "under_trained_a",
                             "under_trained_b"]]), "",
        "Gap trends per tenfold more training data:", "", markdown_table(_table(sources, curves.TRENDS)), "",
        "Power-law fits, error ≈ a·n^(−b) + c, runs that are not step-bound; bootstrap intervals over seeds:", "",
        markdown_table(fits[["model", "a", "b", "b_ci_low", "b_ci_high", "c", "c_ci_low", "c_ci_high", "c_on_bound",
                             "identified", "rmse", "runs_used", "runs_step_bound"]]), "",
    ]
    if not heads.empty:
        lines += ["Distilled ViT, each head alone and their average (DeiT Table 3):", "", markdown_table(heads), ""]
    return lines


_READS = tuple((curves.FOLDER, name) for name in (curves.SUMMARY, curves.GAPS, curves.CROSSINGS,
                                                       curves.TRENDS, curves.POWER_LAW))
ACCURACY = Part(_accuracy, needs=_READS)
CONVERGENCE = Part(_convergence, needs=((curves.FOLDER, curves.RUNS),))
SECTION = Part(_section, needs=_READS)


def headline_metrics(tables_dir: Path) -> dict:
    """The numbers `dvc metrics show` lists: top-1 per model at the smallest and full fraction, and gaps."""
    folder = tables_dir / curves.FOLDER
    summary = pd.read_csv(folder / f"{curves.SUMMARY}.csv")
    gaps = pd.read_csv(folder / f"{curves.GAPS}.csv")
    lo, hi = summary["fraction"].min(), summary["fraction"].max()
    out: dict = {}
    for r in summary[summary["fraction"].isin([lo, hi])].itertuples():
        key = "full" if r.fraction == hi else "smallest"
        out.setdefault(r.model, {})[f"top1_{key}"] = round(float(r.top1_mean), 4)
    for r in gaps[gaps["fraction"].isin([lo, hi])].itertuples():
        key = "full" if r.fraction == hi else "smallest"
        entry = out.setdefault("gaps", {}).setdefault(r.comparison.replace(" ", ""), {})
        entry[key] = round(float(r.gap_mean), 4)
        entry[f"{key}_significant"] = bool(r.significant and r.inference)
    return out
