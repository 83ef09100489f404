"""The report's part on the analysis plan: the plan as declared and when, its claims' verdicts, the interaction
behind every "only on its condition", and the seeds each claim would need; and the plan's rows of the findings
table, the only rows with a verdict.

Read from the ``plan`` stage's tables (:mod:`study.plan`); the verdicts and their words are
:mod:`study.stats.verdicts`'; nothing is computed here beyond choosing rows.
"""

from __future__ import annotations

import math

import pandas as pd

from study import plan
from study.outputs.tables import markdown_table
from study.plan.compact import compact_tests
from study.plan.one_family import one_family_section, one_family_sentence
from study.writing.section import Part, Rows, Sources


def interval_text(mean: float, low: float, high: float) -> str:
    """A contrast and its interval as the findings table writes it: "+1.2 (-0.4 to +2.8)"."""
    if not math.isfinite(mean):
        return "not measured"
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{mean:+.1f} (no interval)"
    return f"{mean:+.1f} ({low:+.1f} to {high:+.1f})"


def _one_family(tests: pd.DataFrame) -> bool:
    """Whether the tests table predates the primary and secondary families (:mod:`study.plan.one_family`)."""
    return "family" not in tests


def declared_sentence(declared: pd.DataFrame, tests: pd.DataFrame, history: str) -> str:
    """When the plan was written and what git history shows, its families and its smallest effects."""
    if _one_family(tests):
        return one_family_sentence(declared, tests, history)
    first = declared.iloc[0]
    if first["declared"] == "before_runs":
        when = "before the runs it judges"
        status = first.get("registration", "")
        if isinstance(first.get("plan_commit"), str) and first["plan_commit"]:
            runs = (f"its runs were first committed in `{first['runs_commit'][:7]}` ({first['runs_date']})"
                    if isinstance(first.get("runs_commit"), str) and first["runs_commit"] else
                    "its runs were not yet committed when this report was written")
            when += (f"; git history shows it {status}: the declared fields (digest `{str(first['digest'])[:12]}`) "
                     f"were committed in `{first['plan_commit'][:7]}` ({first['plan_date']}), and {runs}")
        elif status:
            when += f" ({status})"
    else:
        when = "after some of the runs it judges, so its verdicts are not confirmatory where those runs were seen"
    sizes = {f: int(((tests["family"] == f) & tests["p"].notna()).sum()) for f in ("primary", "secondary")}
    effects = ", ".join(f"{e:g} points for {'clean' if c == 'clean' else 'probe'} contrasts"
                        for c, e in declared.assign(kind=declared["condition"].eq("clean").map(
                            {True: "clean", False: "probe"}))[["kind", "smallest_effect"]].drop_duplicates()
                        .itertuples(index=False))
    facts = int((tests["family"] == "fact").sum())
    return (f"The analysis plan (`analysis.plan` in the parameters) declares {len(declared)} claims, written "
                f"{when}. {history.strip()} Its {sizes['primary']} tests form one Holm family at α = "
                f"{first['alpha']:g}, each interval at the level Holm tests it; the smallest effects of interest are "
                f"{effects}. Every other interval in this report is exploratory.")
    return (f"The analysis plan (`analysis.plan` in the parameters) declares {len(declared)} claims, written {when}. "
            f"{history.strip()} Its {sizes['primary']} primary tests form one Holm family at α = {first['alpha']:g}; "
            f"its {sizes['secondary']} secondary tests form a second, tested only once every primary test is "
            "rejected (serial gatekeeping), so the two hold the familywise error at α together. Holm's adjusted "
            "p-values decide; the intervals shown are simultaneous (Bonferroni at each family's size). "
            f"The smallest effects of interest are {effects}"
            + (f"; {facts} test(s) fixed by construction are stated as facts, outside the families" if facts else "")
            + ". Every other interval in this report is exploratory.")


def claim_sentence(row: pd.Series) -> str:
    """One claim: its contrast, its verdict, and with a control the interaction and the scope."""
    text = (f"{row['text']} ({row['comparison']}, {row['condition']}, {int(row['images']):,} test images, "
            f"{int(row['seeds']) if math.isfinite(row['seeds']) else 0} seeds): "
            f"{interval_text(row['mean'], row['adj_low'], row['adj_high'])} points, {row['verdict_words']}")
    if isinstance(row.get("control"), str) and row["control"]:
        text += (f"; with {row['control']}: {interval_text(row['control_mean'], row['control_adj_low'], row['control_adj_high'])}"
                 f", interaction {interval_text(row['interaction_mean'], row['interaction_adj_low'], row['interaction_adj_high'])}"
                 f": {row['scope_words']}")
    needed = row.get("seeds_needed")
    if needed is not None and math.isfinite(needed):
        text += (f"; {int(needed)} seeds would detect its smallest effect ({row['smallest_effect']:g} points) in "
                 f"each of its tests with {row['power_target']:.0%} power")
    return text + "."


def _findings(sources: Sources) -> list[str]:
    declared = sources.table(plan.FOLDER, plan.DECLARED)
    tests = sources.table(plan.FOLDER, plan.TESTS)
    claims = sources.table(plan.FOLDER, plan.CLAIMS)
    return [declared_sentence(declared, tests, sources.setup.get("plan_history", "")),
            *(claim_sentence(row) for _, row in claims.iterrows())]


def _section(sources: Sources) -> list[str]:
    declared = sources.table(plan.FOLDER, plan.DECLARED)
    tests = sources.table(plan.FOLDER, plan.TESTS)
    if _one_family(tests):
        return one_family_section(sources)
    lines = ["## The analysis plan and its verdicts", "",
             declared_sentence(declared, tests, sources.setup.get("plan_history", "")), "",
             markdown_table(declared[["claim", "role", "fractions", "comparison", "condition", "control", "direction",
                                      "smallest_effect"]], 1), ""]
    fig = sources.figure(plan.FOLDER, plan.FIGURE,
                         "Each claim's contrast under its condition (vermillion), under its matched control (blue) "
                         "and their interaction (black), in points of test top-1 with simultaneous intervals "
                         "(Bonferroni at each family's size); filled: the interval excludes 0; grey band: the "
                         "smallest effect of interest.")
    if fig:
        lines += [fig, ""]
    lines += ["Every test, in points of test top-1 (`family`: primary, secondary, or a fact fixed by construction; "
              "`fractions`: where the test is declared; `images`: test images per run; `seed SD`: SD of the seeds' "
              "mean contrasts over its fractions; `pilot SD`: the same in the pilot's runs, which sized the plan; "
              "`power`: at the plan's seeds and its family's level α / size, by the pilot's SD; `seeds needed`: for "
              "the plan's power by it; `flagged pairs`: pairs of runs with a run still improving at its end or on "
              "the step floor):", "",
              markdown_table(compact_tests(tests)), ""]
    return lines


def _rows(sources: Sources) -> list[dict]:
    """The findings table's rows of the plan: evidence, the control with the interaction, and the verdict."""
    claims = sources.table(plan.FOLDER, plan.CLAIMS)
    rows = []
    for _, row in claims.iterrows():
        evidence = f"{row['comparison']}, {row['condition']}: {interval_text(row['mean'], row['adj_low'], row['adj_high'])}"
        control = "same images, seeds and budget"
        verdict = row["verdict_words"]
        if isinstance(row.get("control"), str) and row["control"]:
            control = (f"{row['control']}: {interval_text(row['control_mean'], row['control_adj_low'], row['control_adj_high'])}"
                       f"; interaction {interval_text(row['interaction_mean'], row['interaction_adj_low'], row['interaction_adj_high'])}")
            verdict += f"; {row['scope_words']}"
        needed = row.get("seeds_needed")
        if row["verdict"] != "supported" and needed is not None and math.isfinite(needed):
            verdict += f" ({int(needed)} seeds needed)"
        rows.append({"claim": row["text"], "evidence": evidence, "control": control, "verdict": verdict,
                     "comparison": row["comparison"], "condition": row["condition"]})
    return rows


_NEEDS = ((plan.FOLDER, plan.DECLARED), (plan.FOLDER, plan.TESTS), (plan.FOLDER, plan.CLAIMS))
FINDINGS = Part(_findings, needs=_NEEDS)
SECTION = Part(_section, needs=_NEEDS)
ROWS = Rows(_rows, needs=_NEEDS)
