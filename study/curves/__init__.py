"""Data efficiency: accuracy against training-set size (stage ``curves``) and its part of the report.

The names the stage writes and the report reads, defined here once: ``FOLDER``, the stage's folder under the
tables and the figures (where dvc.yaml's ``curves`` stage writes), then each table's and figure's stem.
"""

FOLDER = "curves"
RUNS = "runs"  # every run, one row each
SUMMARY = "data_efficiency"  # per model and fraction
GAPS = "gaps"  # paired gaps between models
CROSSINGS = "crossings"
TRENDS = "gap_trends"
POWER_LAW = "power_law"
CURVES_FIGURE = "data_efficiency"
GAPS_FIGURE = "gaps"
