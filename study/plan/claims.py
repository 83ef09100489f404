"""The plan's statistics: every claim's tests from the per-run robustness tables, one Holm family across all of
them, a verdict per test and per claim, and what the seeds could detect.

Input: tables of one row per run and condition (``model``, ``fraction``, ``seed``, ``probe``, ``variant``, ``level``,
``top1`` a share, ``images``, ``train_images`` and the run's convergence flags: the robustness stage's
``plan_runs`` scored on the plan's images, then its exploratory ``robustness_runs``). A test takes its rows from
the first table that scored both of its models under its condition, and records how many images that was.

Each claim gives one test, or three with a control (:mod:`study.plan`):

- ``contrast``: ``arm − against`` under the claim's condition;
- ``control``: the same under the control;
- ``interaction``: per fraction and seed, the contrast under the condition minus the one under the control.

Every test is one value per seed (its mean over the fractions, :func:`study.stats.trend.trend_fit`), tested with
``seeds − 1`` degrees of freedom. The family is every test of every claim, adjusted by Holm at ``plan.alpha``
(:func:`study.stats.intervals.holm_levels`); power is that of the first-ranked test (``α / K``, conservative) to
detect the claim's smallest effect of interest at the seed-level SD, with the seeds that 80% power would need.
Everything is in points of top-1.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from study.plan.params import ClaimParams, PlanParams
from study.plan import CONTRAST, CONTROL, INTERACTION
from study.robustness import condition_label
from study.stats.intervals import MIN_SEEDS, holm_p, t_bounds
from study.stats.power import paired_power, seeds_for_power
from study.stats.trend import trend_fit
from study.stats.verdicts import (EXPLORATORY as EXPLORATORY_VERDICT, FACT as FACT_VERDICT, NOT_TESTED, UNDEFINED,
                                  Verdict, classify, scope, scope_words, words)

Condition = tuple[str, str, float]
KEYS = ["probe", "variant", "level"]
_DIFF = ["fraction", "train_images", "seed", "diff", "flagged", "images"]


def _rows(table: pd.DataFrame, model: str, condition: Condition) -> pd.DataFrame:
    probe, variant, level = condition
    at = (table["model"] == model) & (table["probe"] == probe) & (table["variant"] == variant) & \
         (table["level"] == float(level))
    return table[at]


def paired(tables: list[pd.DataFrame], arm: str, against: str, condition: Condition) -> pd.DataFrame:
    """``arm − against`` in points of top-1 per fraction and seed under ``condition``, from the first of ``tables``
    that scored both models there (same images, same seed's runs); ``flagged``: either run still improving at its
    end or on the step floor; ``images``: how many test images the condition was scored on. Empty where no table
    has both."""
    for table in tables:
        a, b = _rows(table, arm, condition), _rows(table, against, condition)
        if a.empty or b.empty:
            continue
        keys = ["fraction", "seed"]
        both = a.merge(b, on=keys, suffixes=("_a", "_b"), validate="one_to_one")
        flags = [f"{flag}_{side}" for flag in ("under_trained", "step_bound") for side in "ab"]
        return pd.DataFrame({
            "fraction": both["fraction"], "train_images": both["train_images_a"].astype(int), "seed": both["seed"],
            "diff": 100 * (both["top1_a"] - both["top1_b"]), "flagged": both[flags].astype(bool).any(axis=1),
            "images": both["images_a"].astype(int)})
    return pd.DataFrame(columns=_DIFF)


def interaction(on: pd.DataFrame, off: pd.DataFrame) -> pd.DataFrame:
    """Per fraction and seed, the contrast under the condition minus the one under the control (points)."""
    both = on.merge(off, on=["fraction", "seed"], suffixes=("", "_off"), validate="one_to_one")
    return both.assign(diff=both["diff"] - both["diff_off"], flagged=both["flagged"] | both["flagged_off"],
                       images=np.minimum(both["images"], both["images_off"]))[_DIFF]


def condition_words(condition: Condition | None) -> str:
    """A condition as the tables print it (:func:`study.robustness.condition_label`); "" for none."""
    return "" if condition is None else condition_label(*condition)


def smallest_effect(plan: PlanParams, claim: ClaimParams) -> float:
    """The claim's smallest effect of interest in points: the clean one on the clean images, else the
    robustness one (an interaction under a probe is a robustness effect too)."""
    share = plan.effects.clean if claim.condition[0] == "clean" else plan.effects.robustness
    return 100 * share


def _tests(tables: list[pd.DataFrame], claim: ClaimParams) -> list[tuple[str, Condition | None, pd.DataFrame]]:
    on = paired(tables, claim.arm, claim.against, claim.condition)
    if claim.control is None:
        return [(CONTRAST, claim.condition, on)]
    off = paired(tables, claim.arm, claim.against, claim.control)
    return [(CONTRAST, claim.condition, on), (CONTROL, claim.control, off),
            (INTERACTION, None, interaction(on, off) if len(on) and len(off) else pd.DataFrame(columns=_DIFF))]


TEST_COLUMNS = ["claim", "test", "family", "comparison", "condition", "fractions_declared", "images", "seeds",
                "fractions", "mean", "se", "ci_low", "ci_high", "adj_low", "adj_high", "adj_confidence", "p", "p_holm",
                "df", "seed_sd", "seed_variance_share", "slope_per_decade", "slope_ci_low", "slope_ci_high",
                "smallest_effect", "direction", "verdict", "bound", "pilot_seeds", "pilot_sd", "power",
                "seeds_needed", "observed_power", "flagged_pairs"]
PRIMARY, SECONDARY, EXPLORATORY, FACT = "primary", "secondary", "exploratory", "fact"


def _family(claim: ClaimParams, test: str) -> str:
    """The family a test of ``claim`` belongs to: a primary claim's own test (the interaction where it has a control,
    else its contrast) is primary and its other tests secondary; a secondary or exploratory claim's every test."""
    if claim.role == "primary":
        return PRIMARY if test == claim.primary_test() else SECONDARY
    return claim.role


def declared_at(diffs: pd.DataFrame, claim: ClaimParams, study: tuple[float, ...] = ()) -> pd.DataFrame:
    """The rows of the fractions the claim is declared at; where it names none, of ``study``'s fractions (all rows
    where that is empty too)."""
    fractions = claim.fractions or study
    if not fractions or diffs.empty:
        return diffs
    keep = np.isclose(diffs["fraction"].to_numpy(float)[:, None], np.asarray(fractions, float)[None, :]).any(1)
    return diffs[keep]


def _fit(diffs: pd.DataFrame) -> dict:
    if diffs.empty:
        return {}
    fit = trend_fit(diffs, size="train_images")
    return {"seeds": fit.seeds, "fractions": fit.fractions, "mean": fit.mean, "se": fit.mean_se, "df": fit.mean_df,
            "p": fit.p_mean, "seed_sd": fit.seed_sd, "seed_variance_share": fit.seed_variance_share,
            "slope_per_decade": fit.slope, "_slope": (fit.slope, fit.slope_se, fit.slope_df)}


def _fixed(row: dict) -> bool:
    """A test whose per-seed values are all the same (SD exactly 0 over 2 or more seeds): the value is fixed by
    construction (a model exactly invariant to the probe), stated as a fact and kept out of every family."""
    return row.get("seeds", 0) >= 2 and row.get("seed_sd") == 0.0


def judge_tests(tables: list[pd.DataFrame], plan: PlanParams, pilot: list[pd.DataFrame] | None = None
                ) -> pd.DataFrame:
    """One row per test of the plan (:data:`TEST_COLUMNS`, points of top-1), each on the claim's fractions: the
    mean over seeds of each seed's contrast, its raw ``1 − alpha`` interval, and within its family
    (:func:`_family`) Holm's adjusted p-value, which decides, beside the Bonferroni-simultaneous interval at
    ``alpha / size`` (the intervals shown: they hold together, which Holm's step-down levels do not). The secondary
    family is tested only once every primary test is rejected (serial gatekeeping, Dmitrienko & Tamhane 2007), so
    the two families together hold the familywise error at ``alpha``. Exploratory tests get their raw interval and
    no verdict; a test fixed by construction (:func:`_fixed`) is a fact.

    Power is prospective where ``pilot`` (the pilot's per-run tables) is given: the SD of the pilot's per-seed
    values of the same test at the same fractions, at the plan's seeds and its family's level ``alpha / size``
    (Bonferroni's, conservative for Holm), with the seeds ``plan.power`` needs; ``observed_power`` is the same at
    the SD these runs found (descriptive). A test whose models or condition the study lacks is in the table with
    NaN values and verdict "undefined", outside the families."""
    rows = []
    study = tuple(sorted({float(f) for t in tables for f in t["fraction"]}))
    for claim in plan.claims:
        effect = smallest_effect(plan, claim)
        for test, condition, diffs in _tests(tables, claim):
            diffs = declared_at(diffs, claim)
            label = condition_words(condition) if condition else \
                f"{condition_words(claim.condition)} − {condition_words(claim.control)}"
            row = {"claim": claim.name, "test": test, "family": _family(claim, test),
                   "comparison": f"{claim.arm} - {claim.against}", "condition": label,
                   "fractions_declared": " ".join(f"{f:g}" for f in claim.fractions) or "all",
                   "smallest_effect": effect, "direction": 0 if test == CONTROL else claim.direction,
                   "images": int(diffs["images"].min()) if len(diffs) else 0,
                   "flagged_pairs": int(diffs["flagged"].sum()) if len(diffs) else 0, **_fit(diffs)}
            if pilot:
                before = _fit(declared_at({t: d for t, _, d in _tests(pilot, claim)}[test], claim, study))
                row.update({"pilot_seeds": before.get("seeds", math.nan), "pilot_sd": before.get("seed_sd", math.nan)})
            if _fixed(row):
                row["family"] = FACT
            rows.append(row)
    table = pd.DataFrame(rows)
    for column in ("seeds", "fractions", "mean", "se", "df", "p", "seed_sd", "seed_variance_share",
                   "slope_per_decade", "pilot_seeds", "pilot_sd"):
        if column not in table:
            table[column] = math.nan
    table.loc[table["seeds"] < MIN_SEEDS, "p"] = math.nan  # described, never inferred: outside the families
    alpha = plan.alpha
    table["p_holm"], table["adj_confidence"] = math.nan, math.nan
    sizes = {}
    for family in (PRIMARY, SECONDARY):
        at = (table["family"] == family) & table["p"].notna()
        sizes[family] = int(at.sum())
        if sizes[family]:
            table.loc[at, "p_holm"] = holm_p(table.loc[at, "p"])
            table.loc[at, "adj_confidence"] = 1 - alpha / sizes[family]
    primaries = table[(table["family"] == PRIMARY) & table["p"].notna()]
    gate_open = bool(len(primaries)) and bool((primaries["p_holm"] < alpha).all())
    out = []
    for row in table.to_dict("records"):
        ci = t_bounds(row["mean"], row["se"], row["df"], alpha)
        family, level = row["family"], 1 - row["adj_confidence"]
        adj = t_bounds(row["mean"], row["se"], row["df"], level) if math.isfinite(level) else ci
        slope = row.get("_slope")
        slope_ci = t_bounds(*slope, alpha) if isinstance(slope, tuple) else (math.nan, math.nan)
        if family == FACT:
            verdict = Verdict(FACT_VERDICT, math.nan)
        elif family == EXPLORATORY:
            verdict = Verdict(EXPLORATORY_VERDICT, math.nan)
        elif family == SECONDARY and not gate_open and math.isfinite(row["p"]):
            verdict = Verdict(NOT_TESTED, math.nan)
        else:
            verdict = classify(*adj, row["smallest_effect"], row["direction"], _seeds(row["seeds"]),
                               rejected=bool(row["p_holm"] < alpha))
        size = sizes.get(family, 0)
        sd_pilot, sd_here, seeds = row["pilot_sd"], row["seed_sd"], row["seeds"]
        level_family = alpha / size if size else alpha

        def power_at(sd):
            ok = size and isinstance(sd, float) and math.isfinite(sd) and sd > 0
            return paired_power(int(plan.seeds), row["smallest_effect"], sd, level_family) if ok else math.nan

        sizing = sd_pilot if isinstance(sd_pilot, float) and math.isfinite(sd_pilot) else sd_here
        out.append({**row, "ci_low": ci[0], "ci_high": ci[1], "adj_low": adj[0], "adj_high": adj[1],
                    "slope_ci_low": slope_ci[0], "slope_ci_high": slope_ci[1],
                    "verdict": verdict.label, "bound": verdict.bound, "power": power_at(sizing),
                    "observed_power": power_at(sd_here) if math.isfinite(seeds) else math.nan,
                    "seeds_needed": seeds_for_power(row["smallest_effect"], sizing, plan.power, level_family)
                    if size and isinstance(sizing, float) and math.isfinite(sizing) and sizing > 0 else None})
    return pd.DataFrame(out, columns=TEST_COLUMNS)


def _seeds(value) -> int | None:
    """A seed count from a table cell, ``None`` where the test was not measured."""
    return int(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


CLAIM_COLUMNS = ["claim", "text", "role", "decided_by", "comparison", "condition", "control", "control_means", "direction",
                 "smallest_effect", "images", "seeds", "mean", "adj_low", "adj_high", "verdict", "bound",
                 "control_mean", "control_adj_low", "control_adj_high", "interaction_mean", "interaction_adj_low",
                 "interaction_adj_high", "scope", "verdict_words", "scope_words", "seeds_needed", "power_target",
                 "flagged_pairs"]


def claims_table(tests: pd.DataFrame, plan: PlanParams) -> pd.DataFrame:
    """One row per claim: its contrast's verdict, and with a control the control's contrast, the interaction and
    the scope they give (:func:`study.stats.verdicts.scope`), worded by :mod:`study.stats.verdicts`;
    ``seeds_needed``: the most any of its tests needs."""
    rows = []
    for claim in plan.claims:
        own = tests[tests["claim"] == claim.name].set_index("test")
        main = own.loc[CONTRAST]
        deciding = own.loc[claim.primary_test()]
        verdict = Verdict(deciding["verdict"], deciding["bound"])
        row = {"claim": claim.name, "text": claim.claim, "role": claim.role, "decided_by": claim.primary_test(),
               "comparison": main["comparison"],
               "condition": main["condition"], "control": condition_words(claim.control),
               "control_means": claim.control_means, "direction": claim.direction,
               "smallest_effect": main["smallest_effect"], "images": main["images"], "seeds": main["seeds"],
               "mean": main["mean"], "adj_low": main["adj_low"], "adj_high": main["adj_high"],
               "verdict": verdict.label, "bound": verdict.bound, "verdict_words": words(verdict),
               "power_target": plan.power, "flagged_pairs": int(own["flagged_pairs"].sum())}
        needed = [n for n in own["seeds_needed"] if n is not None and not (isinstance(n, float) and math.isnan(n))]
        row["seeds_needed"] = max(needed) if len(needed) == len(own) else None
        if claim.control is not None:
            off, both = own.loc[CONTROL], own.loc[INTERACTION]
            # A two-sided claim (direction 0) asks "only on its condition?" in the direction its contrast came out.
            toward = claim.direction or (int(math.copysign(1, main["mean"])) if main["mean"] else 0)
            found = scope((both["adj_low"], both["adj_high"]), (off["adj_low"], off["adj_high"]),
                          main["smallest_effect"], toward) if toward and math.isfinite(main["mean"]) else UNDEFINED
            if NOT_TESTED in (off["verdict"], both["verdict"]):  # the gate to the secondary family stayed closed
                found = NOT_TESTED
            row.update({"control_mean": off["mean"], "control_adj_low": off["adj_low"],
                        "control_adj_high": off["adj_high"], "interaction_mean": both["mean"],
                        "interaction_adj_low": both["adj_low"], "interaction_adj_high": both["adj_high"],
                        "scope": found, "scope_words": scope_words(found, claim.control_means or row["control"])})
        rows.append(row)
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


FRACTION_COLUMNS = ["claim", "test", "condition", "fraction", "train_images", "seeds", "mean", "ci_low", "ci_high"]


def fractions_table(tables: list[pd.DataFrame], plan: PlanParams, confidence: float) -> pd.DataFrame:
    """Each test's contrast per fraction (points), mean over seeds with its raw t-interval: exploratory, the
    curves behind a pooled test, neither adjusted nor judged."""
    from study.stats.intervals import t_interval

    rows = []
    for claim in plan.claims:
        for test, condition, diffs in _tests(tables, claim):
            for (fraction, images), g in diffs.groupby(["fraction", "train_images"], sort=True):
                mean, _, half = t_interval(g["diff"].to_numpy(float), confidence)
                rows.append({"claim": claim.name, "test": test,
                             "condition": condition_words(condition) if condition else "interaction",
                             "fraction": fraction, "train_images": int(images), "seeds": len(g), "mean": mean,
                             "ci_low": mean - half, "ci_high": mean + half})
    return pd.DataFrame(rows, columns=FRACTION_COLUMNS)


def declared_table(plan: PlanParams, record=None) -> pd.DataFrame:
    """The plan as declared: one row per claim, with its role, the fractions it is declared at, the condition, its
    control, the direction claimed and the smallest effect of interest (points), when the plan was written and,
    for a ``before_runs`` plan, what git history shows (:mod:`study.plan.registration`: its status, the plan's
    commit and date, the runs' first commit and date, the plan's digest)."""
    found = {"registration": record.status, "plan_commit": record.plan_commit, "plan_date": record.plan_date,
             "runs_commit": record.runs_commit, "runs_date": record.runs_date, "digest": record.digest} \
        if record is not None else {"registration": "not checked (declared after the runs)"}
    return pd.DataFrame([{"claim": c.name, "text": c.claim, "role": c.role,
                          "fractions": " ".join(f"{f:g}" for f in c.fractions) or "all",
                          "comparison": f"{c.arm} - {c.against}",
                          "condition": condition_words(c.condition), "control": condition_words(c.control),
                          "control_means": c.control_means, "direction": c.direction,
                          "smallest_effect": smallest_effect(plan, c), "declared": plan.declared,
                          "seeds": plan.seeds, "images": plan.images, "alpha": plan.alpha, "power": plan.power,
                          **found}
                         for c in plan.claims])
