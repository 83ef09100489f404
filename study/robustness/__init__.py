"""Robustness: every run under occlusion, patch shuffle, shifts and corruptions (stage ``robustness``), and its part
of the report.

The names the stage writes and the report reads, defined here once: ``FOLDER``, the stage's folder under the
tables and the figures (where dvc.yaml's ``robustness`` stage writes), then each table's and figure's stem.
"""

FOLDER = "robustness"
PROBE_SET = "probe_set"  # the images probed, the runs and the conditions scored
PROBE_IMAGES = "probe_images"
RUNS = "robustness_runs"
SUMMARY = "robustness"
CONTRASTS_ACCURACY = "contrasts_accuracy"
CONTRASTS_RETAINED = "contrasts_retained"
CONSISTENCY_RUNS = "consistency_runs"
CONSISTENCY = "consistency"
CONTRASTS_CONSISTENCY = "contrasts_consistency"
CONTRAST_TRENDS = "contrast_trends"
WINNER_FLIPS = "winner_flips"
MCE = "mce"
CORRUPTION_ERRORS = "corruption_errors"  # a table and a figure
HEADLINE = "headline"
HEADLINE_CONTRASTS = "headline_contrasts"
COST = "cost"
# The figures of the probes with curves, each named by its probe, and of the headline contrasts.
OCCLUSION, REARRANGEMENT, TRANSLATION = "occlusion", "rearrangement", "translation"
CONTRASTS_FIGURE = "contrasts"
# Test-time variants of a trained model, scored beside it and named "<model><suffix>" in every table (the run's own
# rows keep the plain name): "@uniform", every attention row uniform (study.models.ablations.uniform_attention).
VARIANT_MARK = "@"
UNIFORM = VARIANT_MARK + "uniform"


def is_variant(model: str) -> bool:
    """Whether a table's model name is a test-time variant of a trained model, not a trained model itself."""
    return VARIANT_MARK in str(model)


def trained_model(model: str) -> str:
    """The trained model a name stands for: "vit@uniform" -> "vit", "vit" -> "vit"."""
    return str(model).split(VARIANT_MARK)[0]
