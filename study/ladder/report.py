"""The report's part on the ladder: each step's verdict (the plan's, each seed's mean over the fractions) with the
power it had, the per-fraction steps and each rung's cost, the two figures, and the findings table's rows the
ladder decides: which step carries the clean gap, which one ends the patch-shuffle invariance, and whether
learned attention beats fixed global mixing.

Read from the ``ladder`` stage's tables (:mod:`study.ladder`), the ``plan`` stage's (the ladder's claims are the
plan's) and the report stage's model table (parameters, FLOPs); nothing is computed here beyond choosing and
joining rows. A step is matched to its claim by its comparison (``arm - against``) and condition words, which both
stages write alike (:func:`study.plan.claims.condition_words`).
"""

from __future__ import annotations

import math

import pandas as pd

from study import ladder as L
from study import plan as P
from study.outputs.tables import markdown_table
from study.plan.report import interval_text as _ci
from study.stats.verdicts import LARGER, ONLY
from study.writing import MODELS
from study.writing.section import Part, Rows, Sources

_MIXER_TO_MEAN = "token_mixer: - -> mean"  # the step from learned attention to a fixed global mean of the tokens


def judged_steps(steps: pd.DataFrame, claims: pd.DataFrame, tests: pd.DataFrame) -> pd.DataFrame:
    """One row per step and condition, in ladder order (rung steps, then side pairs): what it changes, and its
    claim's pooled contrast, verdict, scope and the power its contrast test had (the plan's tables). Steps the plan
    did not judge are left out."""
    order = steps.drop_duplicates(["step", "condition"])[["step", "kind", "change", "condition"]]
    contrast = tests[tests["test"] == P.CONTRAST][["claim", "power", "seeds_needed"]]
    judged = claims.drop(columns=["seeds_needed"], errors="ignore").merge(contrast, on="claim", how="left")
    return order.merge(judged, left_on=["step", "condition"], right_on=["comparison", "condition"], how="inner")


def _verdict(row: pd.Series) -> str:
    words = row["verdict_words"]
    if isinstance(row.get("scope_words"), str) and row["scope_words"]:
        words += f"; {row['scope_words']}"
    return words


def _step(row: pd.Series, interaction: bool = False) -> str:
    text = f"{row['step']} ({row['change'] or 'as listed'}): {_ci(row['mean'], row['adj_low'], row['adj_high'])}"
    if interaction:
        both = _ci(row["interaction_mean"], row["interaction_adj_low"], row["interaction_adj_high"])
        text += f", interaction {both}"
    return text


def _none_shown(at: pd.DataFrame, interaction: bool = False) -> tuple[str, str]:
    """Evidence and verdict where no step is shown: the largest step, and how the steps were judged."""
    largest = at.loc[at["mean"].abs().idxmax()]
    counts = at["verdict"].value_counts()
    return (f"largest step {_step(largest, interaction)}",
            "no single step shown: " + ", ".join(f"{int(n)} {v}" for v, n in counts.items()))


def clean_gap_row(judged: pd.DataFrame, condition: str) -> dict | None:
    """Which rung steps (side pairs aside) change clean accuracy: those the plan supports."""
    at = judged[(judged["condition"] == condition) & (judged["kind"] == "rung")]
    if at.empty:
        return None
    shown = at[at["verdict"] == "supported"]
    if len(shown):
        evidence = "; ".join(_step(r) for _, r in shown.iterrows())
        verdict = f"supported for {', '.join(shown['step'])}; the other {len(at) - len(shown)} steps not"
    else:
        evidence, verdict = _none_shown(at)
    return {"claim": f"Which steps of the ladder move clean accuracy ({condition})", "evidence": evidence,
            "control": "each rung against the one below: same images, seeds and budget; one Holm family",
            "verdict": verdict, "comparison": "ladder", "condition": condition}


def invariance_row(judged: pd.DataFrame, condition: str) -> dict | None:
    """Which rung steps change accuracy under ``condition`` more than under its off-grid control: those whose
    interaction excludes 0 in the direction of their contrast (the plan's scope: only or larger on the condition).
    A step that moves both alike (an accuracy change, not an invariance change) is not one."""
    at = judged[(judged["condition"] == condition) & (judged["kind"] == "rung")]
    if at.empty or "scope" not in at:
        return None
    shown = at[at["scope"].isin([ONLY, LARGER])]
    if len(shown):
        evidence = "; ".join(_step(r, interaction=True) for _, r in shown.iterrows())
        verdict = (f"shown for {', '.join(shown['step'])} (the interaction excludes 0); the other "
                   f"{len(at) - len(shown)} steps not")
    else:
        evidence, verdict = _none_shown(at, interaction=True)
    control = at["control"].dropna().iloc[0] if at["control"].notna().any() else "no control"
    return {"claim": f"Which steps change accuracy under the {condition} beyond its off-grid control",
            "evidence": evidence,
            "control": f"each step's interaction with the {control} (per seed, Holm-adjusted)", "verdict": verdict,
            "comparison": "ladder", "condition": condition}


def _rows(sources: Sources) -> list[dict]:
    steps = sources.table(L.FOLDER, L.STEPS)
    if steps.empty:
        return []
    judged = judged_steps(steps, sources.table(P.FOLDER, P.CLAIMS), sources.table(P.FOLDER, P.TESTS))
    conditions = list(dict.fromkeys(judged["condition"]))
    rows = [clean_gap_row(judged, conditions[0])] if conditions else []
    rows += [invariance_row(judged, condition) for condition in conditions[1:]]
    mixing = judged[judged["change"].str.contains(_MIXER_TO_MEAN, regex=False, na=False)]
    for _, r in mixing.iterrows():
        rows.append({"claim": f"Learned attention differs from a fixed global mean of the tokens, trained as such "
                              f"({r['condition']})",
                     "evidence": f"{r['step']}: {_ci(r['mean'], r['adj_low'], r['adj_high'])}",
                     "control": "same embedding width, depth and recipe, no position embedding in either; the mean has "
                                "no mixing weights (parameters: the costs table)",
                     "verdict": _verdict(r), "comparison": r["step"], "condition": r["condition"]})
    return [r for r in rows if r is not None]


def _findings(sources: Sources) -> list[str]:
    steps = sources.table(L.FOLDER, L.STEPS)
    if steps.empty:
        return []
    judged = judged_steps(steps, sources.table(P.FOLDER, P.CLAIMS), sources.table(P.FOLDER, P.TESTS))
    out = []
    for condition, at in judged.groupby("condition", sort=False):
        supported = at[at["verdict"] == "supported"]
        low, high = at["power"].min(), at["power"].max()
        out.append(f"The ladder {condition}, each step's mean over the fractions ({int(at['seeds'].max())} seeds): "
                   + ("steps supported: " + "; ".join(f"{r['step']} {_ci(r['mean'], r['adj_low'], r['adj_high'])}"
                                                      for _, r in supported.iterrows())
                      if len(supported) else "no step supported")
                   + f" of {len(at)}; power at the smallest effect {100 * low:.0f}% to {100 * high:.0f}%.")
    return out


def _costs(sources: Sources, rungs: pd.DataFrame) -> pd.DataFrame:
    """Each rung's parameters and training GFLOPs (the report stage's model table) beside the one below it."""
    order = rungs.sort_values("position")["rung"].drop_duplicates().tolist()
    models = sources.setup_table(MODELS).set_index("model")
    out = models.reindex(order)[["arch", "params", "train_GFLOPs_full"]].reset_index(names="rung")
    out["params_vs_previous_pct"] = (100 * out["params"].pct_change()).round(1)
    out["GFLOPs_vs_previous_pct"] = (100 * out["train_GFLOPs_full"].pct_change()).round(1)
    return out


def _section(sources: Sources) -> list[str]:
    steps = sources.table(L.FOLDER, L.STEPS)
    if steps.empty:
        return []
    rungs = sources.table(L.FOLDER, L.RUNGS)
    judged = judged_steps(steps, sources.table(P.FOLDER, P.CLAIMS), sources.table(P.FOLDER, P.TESTS))
    lines = ["## The ladder: from the ViT to the ResNet, one change at a time", "",
             "Each rung is the one before with one change (the parameters file's header says why; `change` below "
             "says what, from the parameters run); side pairs follow the rungs. The verdicts are the plan's: each "
             "seed's step averaged over the fractions, Holm-adjusted across the plan.", ""]
    for stem, caption in ((L.RUNGS, "Each rung's test top-1 against training images, per condition; rungs coloured "
                                    "from the ViT (light) to the ResNet (dark); mean over seeds."),
                          (L.STEPS, "Each step (rung k+1 − rung k) in points of test top-1 per fraction, with "
                                    "intervals Holm-adjusted across the steps of one condition at one fraction "
                                    "(exploratory); filled: the interval excludes 0; grey band: the smallest effect "
                                    "of interest.")):
        fig = sources.figure(L.FOLDER, stem, caption)
        if fig:
            lines += [fig, ""]
    if not judged.empty:
        shown = judged.assign(effect=[_ci(m, lo, hi) for m, lo, hi in zip(judged["mean"], judged["adj_low"],
                                                                             judged["adj_high"])],
                              verdict=[_verdict(r) for _, r in judged.iterrows()],
                              power=[f"{100 * p:.0f}" if math.isfinite(p) else "–" for p in judged["power"]])
        lines += ["Each step as the plan judged it (`effect`: points, Holm-adjusted interval; `power`: % at the "
                  "smallest effect; `seeds needed`: for the plan's power):", "",
                  markdown_table(shown[["step", "condition", "change", "effect", "verdict", "power",
                                        "seeds_needed"]].rename(columns={"seeds_needed": "seeds needed"})), ""]
    per_fraction = steps.assign(effect=[_ci(m, lo, hi) for m, lo, hi in zip(steps["mean"], steps["adj_low"],
                                                                             steps["adj_high"])])
    lines += ["Each step per fraction (exploratory; Holm-adjusted across the steps of one condition at one "
              "fraction; `flagged pairs`: pairs of runs with a run still improving or on the step floor):", "",
              markdown_table(per_fraction[["step", "condition", "train_images", "seeds", "effect", "flagged_pairs"]]
                             .rename(columns={"train_images": "train images", "flagged_pairs": "flagged pairs"})), ""]
    if sources.setup_table_if_written(MODELS) is not None and not rungs.empty:
        lines += ["Each rung's cost (parameters; training GFLOPs at the largest fraction) and its change from the "
                  "rung above:", "", markdown_table(_costs(sources, rungs), 1), ""]
    return lines


_NEEDS = ((L.FOLDER, L.STEPS), (L.FOLDER, L.RUNGS), (P.FOLDER, P.CLAIMS), (P.FOLDER, P.TESTS))
FINDINGS = Part(_findings, needs=_NEEDS)
SECTION = Part(_section, needs=_NEEDS)
ROWS = Rows(_rows, needs=_NEEDS)
