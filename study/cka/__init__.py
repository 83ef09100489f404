"""Representations: CKA within and across models, against another seed and initialisation (stage ``cka``), and
its part of the report.

The names the stage writes and the report reads, defined here once: ``FOLDER``, the stage's folder under the
tables and the figures (where dvc.yaml's ``cka`` stage writes), then each table's and figure's stem.
"""

FOLDER = "cka"
LAYERS = "cka_layers"
TO_FULL = "cka_to_full"  # per model and fraction, against the ceiling and chance
TO_FULL_LAYERS = "cka_to_full_layers"
CEILING = "cka_ceiling"
READINGS = "cka_readings"  # cka_to_full's summary for each reading of the layers (study.cka.measures)
ACROSS_DEPTH_SEEDS = "cka_across_depth_seeds"
ACROSS_DEPTH = "cka_across_depth"
WITHIN_FIGURE = "cka_within"
ACROSS_FIGURE = "cka_across"
TO_FULL_FIGURE = "cka_to_full"
ACROSS_DEPTH_FIGURE = "cka_across_depth"
ACROSS_DEPTH_MEAN = "cka_across_depth_mean"  # the report stage's depth average, beside its setup tables
