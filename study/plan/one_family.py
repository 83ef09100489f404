"""The plan's report part for tables written with one Holm family across every test, each interval at the level
Holm tests it (the presets' committed reports, whose runs and tables predate the primary and secondary families):
their sections are written as they were, so that a committed report re-renders from its tables unchanged.
:mod:`study.plan.report` chooses this module where a tests table has no ``family`` column.
"""

from __future__ import annotations

import math

import pandas as pd

from study import plan
from study.outputs.tables import markdown_table
from study.writing.section import Sources


def one_family_sentence(declared: pd.DataFrame, tests: pd.DataFrame, history: str) -> str:
    """When the plan was written, its family and its smallest effects."""
    first = declared.iloc[0]
    when = ("before the runs it judges" if first["declared"] == "before_runs"
            else "after some of the runs it judges, so its verdicts are not confirmatory where those runs were seen")
    family = int(tests["p"].notna().sum())
    effects = ", ".join(f"{e:g} points for {'clean' if c == 'clean' else 'probe'} contrasts"
                        for c, e in declared.assign(kind=declared["condition"].eq("clean").map(
                            {True: "clean", False: "probe"}))[["kind", "smallest_effect"]].drop_duplicates()
                        .itertuples(index=False))
    return (f"The analysis plan (`analysis.plan` in the parameters) declares {len(declared)} claims, written {when}: "
            f"{history.strip()} Its {family} tests form one Holm family at α = {first['alpha']:g}; the smallest "
            f"effects of interest are {effects}. Every other interval in this report is exploratory.")


def one_family_tests(tests: pd.DataFrame) -> pd.DataFrame:
    """The tests as a paper cites them: intervals written as ranges, the adjusted one with its level, counts as
    integers (the report's table and ``tests.tex``)."""
    def span(low, high):
        return "–" if not (math.isfinite(low) and math.isfinite(high)) else f"{low:+.1f} to {high:+.1f}"

    def number(value, digits):
        return f"{value:.{digits}f}" if isinstance(value, (int, float)) and math.isfinite(value) else "–"

    return pd.DataFrame({
        "claim": tests["claim"], "test": tests["test"], "condition": tests["condition"], "images": tests["images"],
        "seeds": [number(n, 0) for n in tests["seeds"]],
        "mean": [f"{m:+.1f}" if math.isfinite(m) else "–" for m in tests["mean"]],
        "95% CI": [span(lo, hi) for lo, hi in zip(tests["ci_low"], tests["ci_high"])],
        "Holm-adjusted CI": [span(lo, hi) + (f" ({100 * c:.2f}%)" if math.isfinite(c) else "")
                             for lo, hi, c in zip(tests["adj_low"], tests["adj_high"], tests["adj_confidence"])],
        "seed SD": [number(v, 2) for v in tests["seed_sd"]], "verdict": tests["verdict"],
        "power": [number(v, 2) for v in tests["power"]],
        "seeds needed": [number(v, 0) for v in tests["seeds_needed"]], "flagged pairs": tests["flagged_pairs"]})


def one_family_section(sources: Sources) -> list[str]:
    declared = sources.table(plan.FOLDER, plan.DECLARED)
    tests = sources.table(plan.FOLDER, plan.TESTS)
    lines = ["## The analysis plan and its verdicts", "",
             one_family_sentence(declared, tests, sources.setup.get("plan_history", "")), "",
             markdown_table(declared[["claim", "comparison", "condition", "control", "direction",
                                      "smallest_effect"]], 1), ""]
    fig = sources.figure(plan.FOLDER, plan.FIGURE,
                         "Each claim's contrast under its condition (vermillion), under its matched control (blue) "
                         "and their interaction (black), in points of test top-1 with intervals Holm-adjusted across "
                         "the plan; filled: the interval excludes 0; grey band: the smallest effect of interest.")
    if fig:
        lines += [fig, ""]
    lines += ["Every test, in points of test top-1 (`images`: test images per run; `seed SD`: SD of the seeds' "
              "mean contrasts over the fractions, what the power depends on; `power`: of the family's first-ranked "
              "test at the smallest effect; `seeds needed`: for that power to reach the plan's; `flagged pairs`: "
              "pairs of runs with a run still improving at its end or on the step floor):", "",
              markdown_table(one_family_tests(tests)), ""]
    return lines
