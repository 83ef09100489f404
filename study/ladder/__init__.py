"""The ladder: from the ViT to the ResNet one change at a time (ConvNeXt's design, Liu et al. 2022, run backwards;
the rungs are :mod:`study.models.ladder`'s), and its part of the report.

Stage ``ladder`` reads the robustness stage's per-run tables and writes each step (rung k+1 − rung k, then the side
pairs) per condition and fraction, with what the step changes, and each rung's accuracy. The steps' verdicts are the
plan's (``analysis.plan.ladder`` is written out as claims of the plan, stage ``plan``); the report's ladder part
reads both.

The names the stage writes and the report reads, defined here once.
"""

FOLDER = "ladder"
STEPS = "steps"  # each step per condition and fraction, Holm-adjusted across the steps of one panel (exploratory)
RUNGS = "rungs"  # each rung's test top-1 per condition and fraction
