"""The report's table of contents: which question writes each part, in the order the report prints them.

The renderer (:mod:`study.report.render`) iterates these lists and nothing else; a question's parts, the tables
they read and their wording are its own (``study/<question>/report.py``, :class:`study.writing.section.Part`).

- :data:`FINDINGS`: the subsections of "Findings", each a heading and the parts whose sentences it lists as
  bullets (representations and attention share one); a subsection with no sentence is left out, heading and all
  (a study without priors, or whose stages wrote none of its tables).
- :data:`SECTIONS`: the detailed sections after "Setup", each left out where its tables are absent (a study
  without a budget check, without distillation, without ConViT).
- :data:`LIMITATIONS`: the design's caveats, then those of the CKA and attention analyses.
- :data:`FINDINGS_ROWS`: the rows of the findings table that opens the report, the analysis plan's (the only ones
  with verdicts) first (:mod:`study.report.glance`).
"""

from __future__ import annotations

from study.attention import report as attention
from study.budget_check import report as budget_check
from study.cka import report as cka_report
from study.controls import report as controls
from study.curves import report as curves_report
from study.distillation import report as distillation
from study.ladder import report as ladder
from study.plan import report as plan
from study.priors import report as priors
from study.report import limitations
from study.writing.section import Part, Rows
from study.robustness import report as robustness

FINDINGS: tuple[tuple[str, tuple[Part, ...]], ...] = (
    ("### The plan's claims", (plan.FINDINGS,)),
    ("### The ladder: one change at a time", (ladder.FINDINGS,)),
    ("### Accuracy against training-set size", (curves_report.ACCURACY,)),
    ("### Convergence", (curves_report.CONVERGENCE,)),
    ("#### Budget check", (budget_check.FINDINGS,)),  # under Convergence: what training longer showed
    ("### Distillation", (distillation.FINDINGS,)),
    ("### Priors: what each buys, and what it costs on scrambled images", (priors.FINDINGS,)),
    ("### Representations and attention", (cka_report.FINDINGS, attention.FINDINGS)),
    ("### Where the ViT wins", (robustness.FINDINGS,)),
    ("### Controls: the patch grid, attention and the recipe (exploratory)", (controls.FINDINGS,)),
)

SECTIONS: tuple[Part, ...] = (
    plan.SECTION,  # the plan first: its claims are the report's verdicts
    ladder.SECTION,  # the plan's ladder claims, step by step
    curves_report.SECTION,  # "Data efficiency", closed by the distilled model's heads
    budget_check.SECTION,  # below the curves whose runs it trains again
    distillation.SECTION,
    cka_report.SECTION,
    attention.SECTION,
    priors.SECTION,  # ConViT's gates, a subsection of "Attention"
    robustness.SECTION,
    controls.SECTION,
)

LIMITATIONS: tuple[Part, ...] = (limitations.DESIGN, cka_report.LIMITATIONS, attention.LIMITATIONS)

FINDINGS_ROWS: tuple[Rows, ...] = (plan.ROWS, ladder.ROWS, controls.ROWS, distillation.ROWS, budget_check.ROWS)
