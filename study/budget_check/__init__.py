"""The budget check: the study's runs trained again with a longer budget (stage ``budget_check``), and its part of
the report.

The names the stage writes and the report reads, defined here once: ``FOLDER``, the stage's folder under the
tables and the figures (where dvc.yaml's ``budget_check`` stage writes), then each table's and figure's stem.
"""

FOLDER = "budget_check"
RUNS = "runs"  # every run pair
CELLS = "budget_check"  # per model and checked fraction: the verdicts
FIGURE = "budget_check"
