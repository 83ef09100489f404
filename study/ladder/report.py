"""The report's part on the ladder: each step's verdict (the plan's, each seed's mean over the fractions) with the
power it had, the per-fraction steps and each rung's cost, the two figures, and the findings table's rows the
ladder decides: which step carries the clean gap, which one ends the patch-shuffle invariance, and whether
learned attention beats fixed global mixing.

Read from the ``ladder`` stage's tables (:mod:`study.ladder`), the ``plan`` stage's (the ladder's claims are the
plan's), the report stage's model table (parameters, FLOPs) and, for the twins matched in cost, the ``controls``
stage's pooled contrasts (exploratory); nothing is computed here beyond choosing, joining and dividing rows. A step is matched to its claim by its comparison (``arm - against``) and condition words, which both
stages write alike (:func:`study.plan.claims.condition_words`).
"""

from __future__ import annotations

import math

import pandas as pd

from study import controls
from study import ladder
from study import plan
from study.outputs.tables import markdown_table
from study.plan.report import interval_text as _ci
from study.stats.verdicts import LARGER, ONLY
from study.writing import MODELS
from study.writing.section import Part, Rows, Sources

_MIXER_TO_MEAN = "token_mixer: - -> mean"  # the step from learned attention to a fixed global mean of the tokens
# A step that moves parameters or FLOPs by more than this (percent of the rung below) is read beside a twin matched in
# cost to the rung below: the change's effect could otherwise be its cost's (ConvNeXt's ladder, Liu et al. 2022,
# keeps FLOPs within a few percent for the same reason).
COST_LIMIT_PCT = 25.0


def judged_steps(steps: pd.DataFrame, claims: pd.DataFrame, tests: pd.DataFrame) -> pd.DataFrame:
    """One row per step and condition, in ladder order (rung steps, then side pairs): what it changes, and its
    claim's pooled contrast, verdict, scope and the power its contrast test had (the plan's tables). Steps the plan
    did not judge are left out."""
    order = steps.drop_duplicates(["step", "condition"])[["step", "kind", "change", "condition"]]
    contrast = tests[tests["test"] == plan.CONTRAST][["claim", "power", "seeds_needed"]]
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
    steps = sources.table(ladder.FOLDER, ladder.STEPS)
    if steps.empty:
        return []
    judged = judged_steps(steps, sources.table(plan.FOLDER, plan.CLAIMS), sources.table(plan.FOLDER, plan.TESTS))
    conditions = list(dict.fromkeys(judged["condition"]))
    rows = [clean_gap_row(judged, conditions[0])] if conditions else []
    rows += [invariance_row(judged, condition) for condition in conditions[1:]]
    mixing = judged[judged["change"].str.contains(_MIXER_TO_MEAN, regex=False, na=False)]
    contrasts = _twin_contrasts(sources)
    for _, r in mixing.iterrows():
        control = ("same embedding width, depth and recipe, no position embedding in either; the mean has no mixing "
                   "weights (parameters: the costs table)")
        against = r["step"].split(" - ")[1]
        comparisons = [] if contrasts is None else list(dict.fromkeys(contrasts["comparison"]))
        twins = pd.DataFrame({"step": r["step"], "twin": twins_of(r["step"], against, comparisons)})
        for _, t in _twin_effects(twins, contrasts, [r["condition"]]).iterrows():
            control += f"; its twin matched in cost, {t['twin']} (exploratory): {t['twin effect']}"
        rows.append({"claim": f"Learned attention differs from a fixed global mean of the tokens, trained as such "
                              f"({r['condition']})",
                     "evidence": f"{r['step']}: {_ci(r['mean'], r['adj_low'], r['adj_high'])}",
                     "control": control, "verdict": _verdict(r), "comparison": r["step"], "condition": r["condition"]})
    return [r for r in rows if r is not None]


def _findings(sources: Sources) -> list[str]:
    steps = sources.table(ladder.FOLDER, ladder.STEPS)
    if steps.empty:
        return []
    judged = judged_steps(steps, sources.table(plan.FOLDER, plan.CLAIMS), sources.table(plan.FOLDER, plan.TESTS))
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


def _cost_change(arms: pd.Series, against: pd.Series, cost: pd.DataFrame) -> pd.DataFrame:
    """Each arm's parameters and training GFLOPs at the largest fraction beside ``against``'s, in percent
    (``cost``: the report stage's model table, by model)."""
    out = pd.DataFrame(index=arms.index)
    for column, name in (("params", "params_change_pct"), ("train_GFLOPs_full", "GFLOPs_change_pct")):
        out[name] = (100 * (arms.map(cost[column]) / against.map(cost[column]) - 1)).round(1)
    return out


def step_costs(steps: pd.DataFrame, models: pd.DataFrame) -> pd.DataFrame:
    """Each step's arm: its parameters and training GFLOPs, and their change from the model it is compared with
    (``models``: the report stage's model table)."""
    pairs = steps.drop_duplicates("step")[["step", "kind", "arm", "against"]].reset_index(drop=True)
    cost = models.set_index("model")
    out = pairs.assign(params=pairs["arm"].map(cost["params"]),
                       train_GFLOPs_full=pairs["arm"].map(cost["train_GFLOPs_full"]))
    return pd.concat([out, _cost_change(pairs["arm"], pairs["against"], cost)], axis=1)


def twins_of(step: str, against: str, comparisons: list[str]) -> list[str]:
    """The ``comparisons`` of another model than ``step``'s arm against the same model ``against``."""
    return [c for c in comparisons if c.endswith(f" - {against}") and c != step]


def cost_twins(costs: pd.DataFrame, comparisons: list[str], models: pd.DataFrame) -> pd.DataFrame:
    """The steps that move parameters or FLOPs by more than :data:`COST_LIMIT_PCT`, each beside its twins: the
    ``comparisons`` (``"twin - against"``, the controls' pairs) of another model against the same model, with the
    twin's own change in cost. A step with no twin has ``twin`` empty; a step into a twin (the rung that restores
    the cost, as the MLP ratio 4 after the global mean) is left out."""
    moved = costs[(costs[["params_change_pct", "GFLOPs_change_pct"]].abs() > COST_LIMIT_PCT).any(axis=1)]
    twin_arms = {c.split(" - ")[0] for c in comparisons}
    moved = moved[~moved["arm"].isin(twin_arms)]  # a step into a twin changes the cost on purpose: it restores it
    rows = []
    for _, step in moved.iterrows():
        twins = twins_of(step["step"], step["against"], comparisons)
        rows += [{"step": step["step"], "params_change_pct": step["params_change_pct"],
                  "GFLOPs_change_pct": step["GFLOPs_change_pct"], "twin": twin} for twin in twins or [""]]
    out = pd.DataFrame(rows, columns=["step", "params_change_pct", "GFLOPs_change_pct", "twin"])
    arm_against = out["twin"].str.split(" - ", expand=True).reindex(columns=[0, 1])
    change = _cost_change(arm_against[0], arm_against[1], models.set_index("model"))
    return pd.concat([out, change.add_prefix("twin_")], axis=1)


def _twin_contrasts(sources: Sources) -> pd.DataFrame | None:
    """The controls stage's pooled contrasts (exploratory), where that stage ran."""
    return sources.table_if_written(controls.FOLDER, controls.POOLED)


def _twin_effects(twins: pd.DataFrame, contrasts: pd.DataFrame | None, conditions: list[str]) -> pd.DataFrame:
    """Each twin's contrast at each of ``conditions`` (points, Holm-adjusted across the controls' comparisons of that
    condition), beside the step it stands in for."""
    named = twins[twins["twin"] != ""]
    if contrasts is None or named.empty:
        return pd.DataFrame(columns=["step", "twin", "condition", "images", "twin effect"])
    at = contrasts[contrasts["comparison"].isin(named["twin"]) & contrasts["condition"].isin(conditions)]
    joined = named.merge(at, left_on="twin", right_on="comparison")
    joined["twin effect"] = [_ci(m, lo, hi) for m, lo, hi in
                             zip(joined["mean"], joined["mean_adj_low"], joined["mean_adj_high"])]
    return joined[["step", "twin", "condition", "images", "twin effect"]]


def _section(sources: Sources) -> list[str]:
    steps = sources.table(ladder.FOLDER, ladder.STEPS)
    if steps.empty:
        return []
    judged = judged_steps(steps, sources.table(plan.FOLDER, plan.CLAIMS), sources.table(plan.FOLDER, plan.TESTS))
    lines = ["## The ladder: from the ViT to the ResNet, one change at a time", "",
             "Each rung is the one before with one change (the parameters file's header says why; `change` below "
             "says what, from the parameters run); side pairs follow the rungs. The verdicts are the plan's: each "
             "seed's step averaged over the fractions, Holm-adjusted across the plan.", ""]
    for stem, caption in ((ladder.RUNGS, "Each rung's test top-1 against training images, per condition; rungs "
                                    "coloured from the ViT (light) to the ResNet (dark); mean over seeds."),
                          (ladder.STEPS, "Each step (rung k+1 − rung k) in points of test top-1 per fraction, with "
                                    "intervals Holm-adjusted across the steps of one condition at one fraction "
                                    "(exploratory); filled: the interval excludes 0; grey band: the smallest effect "
                                    "of interest.")):
        fig = sources.figure(ladder.FOLDER, stem, caption)
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
    models = sources.setup_table_if_written(MODELS)
    if models is not None:
        costs = step_costs(steps, models)
        lines += ["Each step's cost: the arm's parameters and training GFLOPs (at the largest fraction), and their "
                  "change from the model it is compared with:", "",
                  markdown_table(costs.drop(columns=["arm", "against"]).rename(columns={"params_change_pct": "params change %",
                                                                             "GFLOPs_change_pct": "GFLOPs change %"}),
                                 1), ""]
        lines += _twin_lines(sources, costs, list(dict.fromkeys(steps["condition"])))
    return lines


def _twin_lines(sources: Sources, costs: pd.DataFrame, conditions: list[str]) -> list[str]:
    """The steps that move cost by more than the limit, each beside its twin matched in cost, if the study has one."""
    contrasts = _twin_contrasts(sources)
    models = sources.setup_table(MODELS)
    twins = cost_twins(costs, [] if contrasts is None else list(dict.fromkeys(contrasts["comparison"])), models)
    if twins.empty:
        return []
    shown = twins.assign(twin=twins["twin"].replace("", "none"))
    lines = [f"Steps that move parameters or FLOPs by more than {COST_LIMIT_PCT:g}%, each beside its twin: another "
             "model against the same rung, matched in what the step moved (the parameters file's header says how):", "",
             markdown_table(shown.rename(columns={c: c.replace("_pct", " %").replace("_", " ") for c in shown}), 1),
             ""]
    effects = _twin_effects(twins, contrasts, conditions)
    if len(effects):
        lines += ["Each twin's contrast (exploratory: the controls stage's, each seed's mean over the fractions on "
                  "its probe images, Holm-adjusted across the controls' comparisons of one condition), beside the "
                  "plan's verdict on the step above:", "", markdown_table(effects), ""]
    return lines


_NEEDS = ((ladder.FOLDER, ladder.STEPS), (ladder.FOLDER, ladder.RUNGS), (plan.FOLDER, plan.CLAIMS),
          (plan.FOLDER, plan.TESTS))
FINDINGS = Part(_findings, needs=_NEEDS)
SECTION = Part(_section, needs=_NEEDS)
ROWS = Rows(_rows, needs=_NEEDS)
