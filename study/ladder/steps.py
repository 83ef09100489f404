"""Each step of the ladder (rung k+1 − rung k) per fraction and condition, with Holm-adjusted intervals.

The plan stage judges every step pooled over the fractions (the seed's mean, one Holm family with every claim). This
module gives the same contrasts per fraction, as exploratory intervals for the ladder's figure and table: per seed,
``arm − against`` in points of top-1 from the runs' table (:func:`study.plan.claims.paired`: the plan's images
where it scored them, else the exploratory ones), a t-interval over the seeds, Holm-adjusted across the steps of one
condition at one fraction (the comparisons a reader scans together in one panel of the figure).
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from study.plan.claims import condition_words, paired
from study.stats.intervals import holm_intervals

Condition = tuple[str, str, float]
STEP_COLUMNS = ["step", "kind", "arm", "against", "change", "condition", "fraction", "train_images", "seeds", "images", "mean",
                "adj_low", "adj_high", "adj_confidence", "p_holm", "flagged_pairs"]


# Model entries that say how a run was chosen or what data it sees, not what the model is: left out of a step's change.
_NOT_THE_MODEL = ("selected_on_validation",)
# The ladder's model with no keyword is the ViT (study.models.ladder, tested): vit -> ladder alone is no change.
_SAME_ARCH = {"vit", "ladder"}


def step_changes(pairs: list[tuple[str, str]], models: dict) -> dict[tuple[str, str], str]:
    """What each step changes, read from the two models' parameters (``models``: name -> ModelParams): every entry
    of the model or its ``arch_args`` that differs, as ``key: before -> after`` ("-" where one leaves it at its
    default), "; "-separated. The preset's header says why; this column says what, from the parameters run."""
    def flat(model) -> dict:
        entry = {k: v for k, v in dataclasses.asdict(model).items() if k not in _NOT_THE_MODEL and k != "arch_args"}
        return {**entry, **{k: v for k, v in model.arch_args.items()}}

    out = {}
    for arm, against in pairs:
        after, before = flat(models[arm]), flat(models[against])
        keys = [k for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k)]
        if {before.get("arch"), after.get("arch")} <= _SAME_ARCH:
            keys = [k for k in keys if k != "arch"]
        elif "arch" in keys:  # another architecture: its own arguments are not a change of the other's
            own = {*models[arm].arch_args, *models[against].arch_args}
            keys = [k for k in keys if k not in own]
        out[(arm, against)] = "; ".join(f"{k}: {_value(before.get(k))} -> {_value(after.get(k))}" for k in keys)
    return out


def _value(v) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def step_table(tables: list[pd.DataFrame], pairs: list[tuple[str, str]], conditions: list[Condition],
               confidence: float, changes: dict[tuple[str, str], str] | None = None,
               side: frozenset[tuple[str, str]] = frozenset()) -> pd.DataFrame:
    """One row per step (``pairs``: ``(arm, against)``, in ladder order), condition and fraction
    (:data:`STEP_COLUMNS`): the mean over seeds of ``arm − against`` (points), its interval Holm-adjusted across the
    steps at that condition and fraction, and how many of its seeds' pairs hold a run still improving or on the step
    floor; ``change``: :func:`step_changes`' words, where given; ``kind``: "side" for the pairs in ``side``, else
    "rung". A step whose models were not scored under a
    condition has no rows there."""
    changes = changes or {}
    rows = []
    for condition in conditions:
        diffs = {(arm, against): paired(tables, arm, against, condition) for arm, against in pairs}
        fractions = sorted({f for d in diffs.values() for f in d["fraction"]})
        for fraction in fractions:
            at = {pair: d[d["fraction"] == fraction] for pair, d in diffs.items()}
            at = {pair: d for pair, d in at.items() if len(d)}
            adjusted = holm_intervals([d["diff"].to_numpy() for d in at.values()], confidence)
            for (arm, against), d, adj in zip(at, at.values(), adjusted):
                rows.append({"step": f"{arm} - {against}",
                             "kind": "side" if (arm, against) in side else "rung", "arm": arm, "against": against,
                             "change": changes.get((arm, against), ""), "condition": condition_words(condition), "fraction": fraction,
                             "train_images": int(d["train_images"].iloc[0]), "seeds": len(d),
                             "images": int(d["images"].min()), "mean": adj.mean, "adj_low": adj.low,
                             "adj_high": adj.high, "adj_confidence": adj.confidence, "p_holm": adj.p_holm,
                             "flagged_pairs": int(d["flagged"].sum())})
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


def rung_accuracy(tables: list[pd.DataFrame], rungs: list[str], conditions: list[Condition]) -> pd.DataFrame:
    """Each rung's mean test top-1 (points) and its seeds, per condition and fraction, from the first table that
    scored it there: what the ladder's first figure draws."""
    rows = []
    for condition in conditions:
        probe, variant, level = condition
        for rung in rungs:
            for table in tables:
                at = table[(table["model"] == rung) & (table["probe"] == probe) & (table["variant"] == variant)
                           & (table["level"] == float(level))]
                if at.empty:
                    continue
                for fraction, by in at.groupby("fraction"):
                    rows.append({"rung": rung, "position": rungs.index(rung), "condition": condition_words(condition),
                                 "fraction": fraction, "train_images": int(by["train_images"].iloc[0]),
                                 "seeds": len(by), "top1": 100 * by["top1"].mean(),
                                 "top1_sd": 100 * by["top1"].std(ddof=1) if len(by) > 1 else math.nan})
                break
    return pd.DataFrame(rows, columns=["rung", "position", "condition", "fraction", "train_images", "seeds", "top1",
                                       "top1_sd"])
