"""The report's limitations, generated from the parameters, the run records and the analysis tables so that
each one is true of the study it is printed in (a fixed list would go on saying "the validation split is
never used for selection" after recipes were picked on it).

:func:`limitations` covers the design (data, seeds, recipe selection, budget, scoring), the report's first
limitations (:data:`DESIGN`); the caveats the CKA and attention tables warrant follow, worded by those questions
(:data:`study.report.contents.LIMITATIONS`).
"""

from __future__ import annotations

import pandas as pd

from study import curves
from study.writing.format import plural
from study.writing.section import Part, Sources
from study.stats.intervals import MIN_SEEDS


def limitations(*, dataset: str, seeds: list[int], convention: str, min_steps: int, runs: pd.DataFrame,
                selection: dict[str, dict[str, list]]) -> list[str]:
    """``selection``: per model, the hyperparameters tuned on the validation split and the values compared."""
    largest = int(runs["params"].max())
    out = [f"One dataset ({dataset}) and small models (at most {largest:,} parameters), sized so that the study "
           "reruns on a CPU; absolute accuracies are below the state of the art and rankings at larger scale may differ."]
    if len(seeds) < MIN_SEEDS:
        out.append(f"{plural(len(seeds), 'seed')} per point: too few for inference, so every "
                   "comparison in this report is descriptive.")
    else:
        out.append(f"{len(seeds)} seeds per point: intervals are Student-t over seeds and remain wide for small gaps.")
    tuned = {m: s for m, s in selection.items() if s}
    if tuned:
        listed = "; ".join(f"{m}: " + ", ".join(f"{k} among {', '.join(map(str, v))}" for k, v in s.items())
                           for m, s in tuned.items())
        out.append(f"Recipe settings were compared on the validation split ({listed}) and kept for every fraction; "
                   "validation accuracy is therefore optimistic. Which criterion decided each choice (validation "
                   "top-1, or convergence where the parameters file's header says so) and which test numbers were "
                   "seen before are in the Setup section.")
    else:
        out.append("No recipe tuning is recorded in the parameters: hyperparameters were set a priori and kept for every fraction.")
    floor = int((runs["budget_source"] == "floor").sum())
    text = {"epochs": f"each fraction trains the same epochs of its own data, at least {min_steps} steps",
            "images": "each fraction sees as many images as the full-data run"}[convention]
    out.append(f"Budget convention `{convention}` ({text}); {floor} of {len(runs)} runs had their steps set by the "
               "floor. Another convention changes the small-data results.")
    improving = int(runs["under_trained"].sum())
    if improving:
        out.append(f"{improving} of {len(runs)} runs were still improving when their budget ended, so their "
                   "accuracies understate what the model reaches on that data.")
    out.append("Each run's final model is scored once on the test set (no best-epoch selection), as the study reports "
               "it; published numbers are often best-epoch.")
    return out


def _design(sources: Sources) -> list[str]:
    s = sources.setup
    return limitations(dataset=s["dataset"], seeds=s["seeds"], convention=s["convention"], min_steps=s["min_steps"],
                       runs=sources.table(curves.FOLDER, curves.RUNS), selection=s["selection"])


DESIGN = Part(_design, needs=((curves.FOLDER, curves.RUNS),))
