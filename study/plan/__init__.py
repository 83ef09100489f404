"""The analysis plan: the study's primary claims, declared in ``analysis.plan`` before the runs they judge (or
marked as written after them), each tested on the test images the plan names and judged together as one Holm
family (stage ``plan``); and its part of the report. Every other interval in the report is exploratory.

A claim is ``arm − against`` in test top-1 under one probe condition, each seed's contrast averaged over the
fractions (the seed is the unit of replication: :mod:`study.stats.trend`). A claim with a matched control adds two
tests: the contrast under the control, and the interaction (per seed, the contrast under the condition minus the
contrast under the control), so that "only on the ViT's patch grid" is tested, not inferred
(:func:`study.stats.verdicts.scope`).

The names the stage writes and the report reads, defined here once.
"""

FOLDER = "plan"
DECLARED = "plan"  # the plan as declared: one row per claim, with its smallest effect and control
TESTS = "tests"  # every test of the family: contrast, control, interaction, with power and the seeds needed
CLAIMS = "claims"  # one row per claim: its verdict and, with a control, its scope
FRACTIONS = "fractions"  # each test's contrast per fraction (exploratory: no family, no verdict)
FIGURE = "plan"
# The tests of a claim.
CONTRAST, CONTROL, INTERACTION = "contrast", "control", "interaction"
