"""Robustness: every run under occlusion, patch shuffle, shifts and corruptions (stage ``robustness``), and its part
of the report.

The names the stage writes and the report reads, defined here once: ``FOLDER``, the stage's folder under the
tables and the figures (where dvc.yaml's ``robustness`` stage writes), then each table's and figure's stem; then the
probes' names as the tables key a condition ``(probe, variant, level)``. Plain data, so that a reader of the tables
(the controls stage, :mod:`study.robustness.contrasts`) imports no torch, model or probe code.
"""

FOLDER = "robustness"
PROBE_SET = "probe_set"  # the images probed, the runs and the conditions scored (a row per scoring: exploratory, plan)
PROBE_IMAGES = "probe_images"
RUNS = "robustness_runs"
PLAN_RUNS = "plan_runs"  # the analysis plan's conditions (analysis.plan), per run, on analysis.plan.images images
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
CONTRASTS_FIGURE = "contrasts"

# The probes, as the tables name them; the probes with curves also name their figures.
CLEAN, OCCLUSION, REARRANGEMENT, TRANSLATION = "clean", "occlusion", "rearrangement", "translation"
CORRUPTION = "corruption"
PROBES = (CLEAN, OCCLUSION, REARRANGEMENT, TRANSLATION, CORRUPTION)
# Variants: occlusion on the patch grid (aligned) or on it moved by half a cell (offset); the patch shuffle on the
# grid (shuffle) or on it moved by half a cell, cyclically (offset).
ALIGNED, OFFSET, SHUFFLE = "aligned", "offset", "shuffle"
# Shift directions, as (dx, dy) per pixel of shift: right, down, and both.
DIRECTIONS: dict[str, tuple[int, int]] = {"x": (1, 0), "y": (0, 1), "diagonal": (1, 1)}
# The level names, per probe, for tables and figures.
LEVEL_NAMES = {CLEAN: "none", OCCLUSION: "share of cells", REARRANGEMENT: "cells per side",
               TRANSLATION: "px", CORRUPTION: "severity"}
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


def condition_label(probe: str, variant: str, level: float) -> str:
    """A condition ``(probe, variant, level)`` as tables, figures and sentences name it: "clean", "7x7 shuffle",
    "7x7 shuffle (offset)", "75% occluded (aligned)", "4-px shift (x)", "fog 3"."""
    if probe == CLEAN:
        return "clean"
    if probe == REARRANGEMENT:
        return f"{level:g}x{level:g} shuffle" + (f" ({variant})" if variant != SHUFFLE else "")
    if probe == OCCLUSION:
        return f"{100 * level:g}% occluded ({variant})"
    if probe == TRANSLATION:
        return f"{level:g}-px shift ({variant})"
    return f"{variant.replace('_', ' ')} {level:g}"
