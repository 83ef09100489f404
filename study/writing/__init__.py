"""The writing kit every question's part of the report is made with, below the questions: how numbers and recurring
phrases are written (:mod:`~study.writing.format`), what a part reads and the Markdown pieces it is made of
(:mod:`~study.writing.section`: sources, parts, findings rows), and the names of the setup tables the report stage
derives from the run table, which parts read by these names. The assembler above the questions is
:mod:`study.report`: it orders the parts, lays out the report and records its provenance.
"""

# The stems the report stage writes its setup tables under (its --setup-tables folder; study.report.setup computes
# them) and the questions' parts read them by (Sources.setup_table).
MODELS, BUDGETS, COMPUTE, DEIT_HEADS, TRAINING_FIT = "models", "budgets", "compute", "deit_heads", "training_fit"
