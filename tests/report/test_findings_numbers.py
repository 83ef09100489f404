"""docs/findings.md's numbers, written again from the committed tables they come from.

docs/findings.md is the page papers cite for the numbers behind the README's verdicts, and it is typed by hand:
when a report is recomputed its tables change and the page does not. This test writes each number the page quotes
in the sections below again from its table, in the page's style (:mod:`tests.report.typed_numbers`), and looks for
the text anywhere in the page:

- the analysis plan and its verdicts for the default study, and the presets judged by it post hoc;
- the default study's budget check and the one with 10 seeds (check_4pct);
- small_data's budget check;
- the controls preset's exploratory section;
- the ladder;
- the run over the whole data range on the H200.

Each entry of ``NUMBERS`` reads top to bottom as the page does: where the number stands, the page's text as a
format string, the table and the rows it comes from. Each carries enough of the words around its numbers to find
the one place it stands. The "Verdicts that changed with the plan" subsection quotes old versions of the tables
(old → new) and is history: none of its numbers has an entry. The tests after ``NUMBERS`` check the words that
carry a table's result without a number beside them.
"""

from __future__ import annotations

import pandas as pd
import pytest

from study.stats.confidence import confidence
from tests.report.typed_numbers import (CHECK_4PCT, CHECK_4PCT_RUNS, CONTROLS, CONTROLS_BUDGET, CONTROLS_CLAIMS,
                                        CONTROLS_FRACTIONS, CONTROLS_GRID, CONTROLS_POWER, DEFAULT_BUDGET,
                                        DEFAULT_CLAIMS, DEFAULT_GAP_TRENDS, DEFAULT_TESTS, GPU_BUDGET, GPU_GAP_TRENDS,
                                        GPU_GAPS, LADDER_CLAIMS, LADDER_CONTROLS, LADDER_INCONCLUSIVE, LADDER_RUNGS,
                                        LADDER_RUNS, LADDER_STEPS, LADDER_STEPS_TABLE, LADDER_TESTS, POSITION,
                                        SMALL_BUDGET, SMALL_CLAIMS, SMALL_GAPS, ReadmeStyle, assert_quoted,
                                        document_text, number, read_table)

FINDINGS = "docs/findings.md"

# The plan's six claims under a probe (all but the clean gap), whose smallest effect is 5 points.
PROBE_CLAIMS = ("shuffle_7", "occlusion_50", "occlusion_75", "occlusion_90", "shift_x_4", "shift_y_4")
# The controls preset's 12 configured comparisons, one Holm family per condition (the uniform-attention rows are
# their own family); test_the_controls_pairs_are_the_tables_family keeps the list equal to the table's.
CONTROLS_PAIRS = ("vit - resnet", "convmixer - vit", "swin - vit", "vit_nopos - vit", "vit_gap - vit", "mlp - vit",
                  "mlp - resnet", "resnet_adamw - resnet", "vit_sgd - vit", "vit - resnet_adamw", "vit_sgd - resnet",
                  "convmixer - resnet")
# The controls preset's budget check at 1%: the arms other than the MLP, and those of them that are ViTs.
CONTROLS_NOT_MLP = ("resnet", "vit", "convmixer", "swin", "vit_nopos", "vit_gap", "resnet_adamw", "vit_sgd")
CONTROLS_VITS = ("vit", "vit_nopos", "vit_gap", "vit_sgd")
# The ladder's steps at 1,140 images whose flagged pairs the page counts: the rungs' steps and the MLP's side pair,
# without the conv stem's step and the ConvMixer's pair, which the page names as the exceptions.
LADDER_FLAGGED = tuple(step for step in LADDER_STEPS if step != "lad_stem - lad_bn") + ("mlp - vit",)
# The ladder's models in its plan: every rung and side pair, not the twin matched in FLOPs (outside the plan).
LADDER_PLAN_MODELS = ("vit", "lad_avg", "lad_nopos", "lad_mean", "lad_mean_wide", "lad_pool", "lad_dwconv",
                      "lad_bn", "lad_stem", "resnet_adamw", "resnet", "convmixer", "mlp")
# A rung's top-1 at the ladder's two fractions, as "51.9 / 73.9".
AT_BOTH = "{top1[train_images == 140]:.1f} / {top1[train_images == 1140]:.1f}"
# The H200 run's gaps, in points: a gap with its Holm-adjusted interval.
GAP = "{100 * gap_mean} ({100 * adj_ci_low} to {100 * adj_ci_high})"

NUMBERS = [
    # ----- The analysis plan: the default study (3 seeds) -----
    number("plan: claims", "declares {rows} claims of ViT − ResNet in test top-1", DEFAULT_CLAIMS),
    number("plan: fractions", "each seed's mean over the {fractions} fractions", DEFAULT_TESTS),
    number("plan: tests", "their interaction ({rows} tests, one Holm family, α = 0.05)", DEFAULT_TESTS),
    number("plan: smallest effect, clean", "smallest effects {smallest_effect:.0f} points on clean images",
           DEFAULT_CLAIMS, claim="clean"),
    number("plan: smallest effect, probes", "and {smallest_effect:.0f} under a probe.", DEFAULT_CLAIMS,
           claim=PROBE_CLAIMS),
    number("plan: seeds, images, Holm levels", "Default study, {seeds} seeds, all {images:,} test images (points, "
           "Holm-adjusted at {100 * min(adj_confidence):.2f}% or {100 * max(adj_confidence):.2f}%)", DEFAULT_TESTS),

    number("plan table: clean", "| the ResNet beats the ViT on clean images | {mean} ({adj_low} to {adj_high}) | – | "
           "– | {verdict} | {seeds_needed} |", DEFAULT_CLAIMS, claim="clean"),
    number("plan table: 7x7 shuffle", "| the ViT keeps more under its 7×7 shuffle | {mean} ({adj_low} to {adj_high}) "
           "| offset by half a cell {control_mean} ({control_adj_low} to {control_adj_high}) |", DEFAULT_CLAIMS,
           claim="shuffle_7"),
    number("plan table: 7x7 shuffle interaction", "({control_adj_low} to {control_adj_high}) | {interaction_mean} "
           "({interaction_adj_low} to {interaction_adj_high}) | {verdict} | {seeds_needed} |", DEFAULT_CLAIMS,
           claim="shuffle_7"),
    number("plan table: 50% occluded", "| … with 50% of its patches occluded | {mean} ({adj_low} to {adj_high}) | "
           "offset grid {control_mean} ({control_adj_low} to {control_adj_high}) |", DEFAULT_CLAIMS,
           claim="occlusion_50"),
    number("plan table: 50% occluded interaction", "({control_adj_low} to {control_adj_high}) | {interaction_mean} "
           "({interaction_adj_low} to {interaction_adj_high}) | {verdict} | {seeds_needed} |", DEFAULT_CLAIMS,
           claim="occlusion_50"),
    number("plan table: 75% occluded", "| … with 75% occluded | {mean} ({adj_low} to {adj_high}) | offset grid "
           "{control_mean} ({control_adj_low} to {control_adj_high}) |", DEFAULT_CLAIMS, claim="occlusion_75"),
    number("plan table: 75% occluded interaction", "({control_adj_low} to {control_adj_high}) | **{interaction_mean} "
           "({interaction_adj_low} to {interaction_adj_high})** | {verdict}; {scope} on the grid | {seeds_needed} |",
           DEFAULT_CLAIMS, claim="occlusion_75"),
    number("plan table: 90% occluded", "| … with 90% occluded | {mean} ({adj_low} to {adj_high}) | offset grid "
           "{control_mean} ({control_adj_low} to {control_adj_high}) |", DEFAULT_CLAIMS, claim="occlusion_90"),
    number("plan table: 90% occluded interaction", "({control_adj_low} to {control_adj_high}) | {interaction_mean} "
           "({interaction_adj_low} to {interaction_adj_high}) | {verdict} | {seeds_needed} |", DEFAULT_CLAIMS,
           claim="occlusion_90"),
    number("plan table: 4-px x shift", "| … under a 4-px shift along x | {mean} ({adj_low} to {adj_high}) | 8-px "
           "shift {control_mean} ({control_adj_low} to {control_adj_high}) |", DEFAULT_CLAIMS, claim="shift_x_4"),
    number("plan table: 4-px x shift interaction", "({control_adj_low} to {control_adj_high}) | {interaction_mean} "
           "({interaction_adj_low} to {interaction_adj_high}) | {verdict} | {seeds_needed} |", DEFAULT_CLAIMS,
           claim="shift_x_4"),
    number("plan table: 4-px y shift", "| … under a 4-px shift along y | {mean} ({adj_low} to {adj_high}) | 8-px "
           "shift {control_mean} ({control_adj_low} to {control_adj_high}) |", DEFAULT_CLAIMS, claim="shift_y_4"),
    number("plan table: 4-px y shift interaction", "({control_adj_low} to {control_adj_high}) | {interaction_mean} "
           "({interaction_adj_low} to {interaction_adj_high}) | {verdict} | {seeds_needed} |", DEFAULT_CLAIMS,
           claim="shift_y_4"),

    number("plan: raw intervals' df", "The raw 95% intervals of the same tests (df = {df:.0f})", DEFAULT_TESTS),
    number("plan: raw interval, 7x7 shuffle", "are far narrower (the 7×7 shuffle {ci_low} to {ci_high},",
           DEFAULT_TESTS, claim="shuffle_7", test="contrast"),
    number("plan: raw interval, 4-px x shift", "the 4-px x shift {ci_low} to {ci_high},", DEFAULT_TESTS,
           claim="shift_x_4", test="contrast"),
    number("plan: raw interval, clean", "the clean gap {ci_low} to {ci_high}): what makes them inconclusive",
           DEFAULT_TESTS, claim="clean", test="contrast"),
    number("plan: the family", "is the family of {rows} tests on {seeds} seeds", DEFAULT_TESTS),
    number("plan: seed SDs and power", "The seed-level SDs ({min(seed_sd):.2f} to {max(seed_sd):.1f} points) give "
           "each test {100 * min(power):.0f}% to {max(power):.0%} power at its smallest effect", DEFAULT_TESTS),

    # ----- The analysis plan: the presets judged post hoc -----
    number("post hoc: small_data probe images", "(their runs predate the plan; {images:,} and", SMALL_CLAIMS,
           claim="clean"),
    number("post hoc: controls probe images", "and {images} probe images;", CONTROLS_CLAIMS, claim="clean"),
    number("post hoc small_data: clean", "`small_data` ({seeds:.0f} seeds, 140 and 290 images): the clean gap {mean} "
           "({adj_low} to {adj_high}), {verdict};", SMALL_CLAIMS, claim="clean"),
    number("post hoc small_data: 7x7 shuffle", "the 7×7 shuffle {mean} ({adj_low} to {adj_high}), {verdict}; 50% "
           "occlusion", SMALL_CLAIMS, claim="shuffle_7"),
    number("post hoc small_data: 50% occluded", "50% occlusion {mean} ({adj_low} to {adj_high}), {verdict}, "
           "interaction {interaction_mean} ({interaction_adj_low} to {interaction_adj_high});", SMALL_CLAIMS,
           claim="occlusion_50"),
    number("post hoc small_data: 75% occluded", "75% {mean} ({adj_low} to {adj_high}), {verdict}, interaction "
           "{interaction_mean} ({interaction_adj_low} to {interaction_adj_high}), offset {control_mean} "
           "({control_adj_low} to {control_adj_high}): {scope} on the grid;", SMALL_CLAIMS, claim="occlusion_75"),
    number("post hoc small_data: 90% occluded", "90% {mean} ({adj_low} to {adj_high}), {verdict}, offset "
           "{control_mean} ({control_adj_low} to {control_adj_high}) inside ±{smallest_effect:.0f}, interaction "
           "{interaction_mean} ({interaction_adj_low} to {interaction_adj_high}): **on the grid {scope}**;",
           SMALL_CLAIMS, claim="occlusion_90"),
    number("post hoc small_data: 4-px x shift", "the 4-px x shift {mean} ({adj_low} to {adj_high}), {verdict};",
           SMALL_CLAIMS, claim="shift_x_4"),
    number("post hoc small_data: 4-px y shift", "the 4-px y shift {mean} ({adj_low} to {adj_high}): {verdict}.",
           SMALL_CLAIMS, claim="shift_y_4"),
    number("post hoc controls: clean", "`controls` ({seeds:.0f} seeds, 140 and 570 images): the clean gap {mean} "
           "({adj_low} to {adj_high}),", CONTROLS_CLAIMS, claim="clean", verdict="supported"),
    number("post hoc controls: 7x7 shuffle", "the 7×7 shuffle {mean} ({adj_low} to {adj_high}), 75% occlusion",
           CONTROLS_CLAIMS, claim="shuffle_7", verdict="supported"),
    number("post hoc controls: 75% occluded", "75% occlusion {mean} ({adj_low} to {adj_high}; interaction "
           "{interaction_mean}, {interaction_adj_low} to {interaction_adj_high}: {scope} on the grid)",
           CONTROLS_CLAIMS, claim="occlusion_75", verdict="supported"),
    number("post hoc controls: 4-px x shift", "and the 4-px x shift {mean} ({adj_low} to {adj_high}) {verdict};",
           CONTROLS_CLAIMS, claim="shift_x_4"),
    number("post hoc controls: the inconclusive two", "50% occlusion and the y shift {verdict}.", CONTROLS_CLAIMS,
           claim=("occlusion_50", "shift_y_4")),

    # ----- The default study: the budget check (3 seeds) -----
    number("budget check: design", "(every model and seed at {fraction:.0%} trained again with twice the epochs, "
           "{steps_2x:,} steps;", DEFAULT_BUDGET),
    number("budget check: ResNet", "is {100 * delta_mean} points for the ResNet (adjusted CI {100 * adj_ci_low} to "
           "{100 * adj_ci_high}),", DEFAULT_BUDGET, model="resnet"),
    number("budget check: ViT", "{100 * delta_mean} for the ViT (CI {100 * adj_ci_low} to {100 * adj_ci_high}) and",
           DEFAULT_BUDGET, model="vit"),
    number("budget check: DeiT", "and {100 * delta_mean} for the DeiT (CI {100 * adj_ci_low} to "
           "{100 * adj_ci_high}).", DEFAULT_BUDGET, model="deit"),
    number("budget check: tolerance", "None is budget-bound (no interval above +{100 * tolerance:.0f} point)",
           DEFAULT_BUDGET),
    number("budget check: DeiT verdict", "the DeiT is **{verdict}** by the one-sided rule", DEFAULT_BUDGET,
           model="deit"),
    number("budget check: seeds", "{seeds} seeds leave the intervals too wide", DEFAULT_BUDGET),
    number("budget check: projection, ResNet", "SD held: {seeds_to_converge:.0f} (ResNet),", DEFAULT_BUDGET,
           model="resnet"),
    number("budget check: projection, ViT", "{seeds_to_converge:.0f} (ViT) and", DEFAULT_BUDGET, model="vit"),
    number("budget check: projection, DeiT", "and {seeds_to_converge:.0f} (DeiT).", DEFAULT_BUDGET, model="deit"),

    # ----- The default study: the budget check with 10 seeds (check_4pct) -----
    number("check_4pct: seeds", "**With {seeds} seeds**", CHECK_4PCT),
    number("check_4pct: ResNet", "the ResNet is **{verdict}** ({100 * delta_mean:+.2f} points, adjusted CI "
           "{100 * adj_ci_low:+.2f} to {100 * adj_ci_high:+.2f});", CHECK_4PCT, model="resnet"),
    number("check_4pct: ViT", "the ViT ({100 * delta_mean:+.2f}, CI {100 * adj_ci_low:+.2f} to "
           "{100 * adj_ci_high:+.2f}) and", CHECK_4PCT, model="vit"),
    number("check_4pct: DeiT", "the DeiT ({100 * delta_mean:+.2f}, CI {100 * adj_ci_low:+.2f} to "
           "{100 * adj_ci_high:+.2f}) are detectably **worse** at twice the budget", CHECK_4PCT, model="deit"),
    number("check_4pct: ViT and DeiT, the table's verdict", "(the committed table, written before the one-sided rule, "
           "says {verdict})", CHECK_4PCT, model=("vit", "deit")),
    number("check_4pct: projection's seeds", "The projection from the {seeds} seeds:", CHECK_4PCT),
    number("check_4pct: SD, ResNet", "the SD of the per-seed changes was {100 * std(delta):.2f} (ResNet),",
           CHECK_4PCT_RUNS, model="resnet"),
    number("check_4pct: SD, ViT", "{100 * std(delta):.2f} (ViT) and", CHECK_4PCT_RUNS, model="vit"),
    number("check_4pct: SD, DeiT", "and {100 * std(delta):.2f} (DeiT) points", CHECK_4PCT_RUNS, model="deit"),

    # ----- Small data, 8 seeds: the budget check at 290 images -----
    number("small_data budget check: ResNet", "Budget check at {train_images} images (every model and seed at "
           "{steps_2x} steps instead of {steps_1x}): ResNet {100 * delta_mean} points (adjusted CI "
           "{100 * adj_ci_low} to {100 * adj_ci_high}),", SMALL_BUDGET, model="resnet"),
    number("small_data budget check: ViT", "ViT {100 * delta_mean} (CI {100 * adj_ci_low} to {100 * adj_ci_high}), "
           "DeiT", SMALL_BUDGET, model="vit"),
    number("small_data budget check: DeiT", "DeiT {100 * delta_mean} (CI {100 * adj_ci_low} to "
           "{100 * adj_ci_high}). All three", SMALL_BUDGET, model="deit"),
    number("small_data budget check: verdicts", "All three {verdict} by the ±{100 * tolerance:.0f}-point criterion",
           SMALL_BUDGET),
    number("small_data budget check: the gap beside it", "against a ViT − ResNet gap of {-100 * gap_mean:.1f} points",
           SMALL_GAPS, comparison="vit - resnet", train_images=290),
    number("small_data budget check: screen", "The cheap screen flagged {sum(still_improving_1x)} of these "
           "{sum(seeds)} runs.", SMALL_BUDGET),

    # ----- Controls (4 seeds, 140 and 570 images; exploratory) -----
    number("controls: seeds", "(140 and 570 images) × {seeds} seeds (0–3)", CONTROLS, comparison="vit - resnet",
           condition="clean"),
    number("controls: family", "Holm-adjusted across the {rows} configured comparisons of a condition, no verdicts",
           CONTROLS, family="controls", condition="clean"),
    number("controls 7x7 shuffle: ViT - ResNet", "(the ViT's own patches permuted): ViT − ResNet {mean} "
           "({mean_adj_low} to {mean_adj_high});", CONTROLS, comparison="vit - resnet", condition="7x7 shuffle"),
    number("controls 7x7 shuffle: ConvMixer - ViT", "ConvMixer − ViT {mean} ({mean_adj_low} to {mean_adj_high}) and "
           "Swin", CONTROLS, comparison="convmixer - vit", condition="7x7 shuffle"),
    number("controls 7x7 shuffle: Swin - ViT", "Swin − ViT {mean} ({mean_adj_low} to {mean_adj_high}), yet",
           CONTROLS, comparison="swin - vit", condition="7x7 shuffle"),
    number("controls 7x7 shuffle: ConvMixer - ResNet", "yet ConvMixer − ResNet {mean} ({mean_adj_low} to "
           "{mean_adj_high}): the ConvMixer", CONTROLS, comparison="convmixer - resnet", condition="7x7 shuffle"),
    number("controls 7x7 shuffle: MLP - ResNet", "MLP − ResNet {mean} ({mean_adj_low} to {mean_adj_high}). The ViT",
           CONTROLS, comparison="mlp - resnet", condition="7x7 shuffle"),
    number("controls 7x7 shuffle: no position - ViT", "The ViT without position embedding − ViT {mean} "
           "({mean_adj_low} to {mean_adj_high}); with average pooling", CONTROLS, comparison="vit_nopos - vit",
           condition="7x7 shuffle"),
    number("controls 7x7 shuffle: average pooling - ViT", "with average pooling {mean} ({mean_adj_low} to "
           "{mean_adj_high}). Every", CONTROLS, comparison="vit_gap - vit", condition="7x7 shuffle"),
    number("controls 7x7 shuffle: on - off grid, ViT - ResNet", "for ViT − ResNet ({interaction}, "
           "{interaction_ci_low} to {interaction_ci_high})", CONTROLS_GRID, comparison="vit - resnet",
           off_grid="4x4 shuffle"),

    number("controls position: 7x7 shuffle, 140", "keeps {100 * diff_mean} points more than the ViT under the 7×7 "
           "shuffle at {train_images} images ({100 * adj_ci_low} to {100 * adj_ci_high})", POSITION, level=7.0,
           train_images=140),
    number("controls position: 7x7 shuffle, 570", "and {100 * diff_mean} at {train_images} ({100 * adj_ci_low} to "
           "{100 * adj_ci_high}); under a 2×2 shuffle", POSITION, level=7.0, train_images=570),
    number("controls position: 2x2 shuffle, 140", "under a 2×2 shuffle {100 * diff_mean} and", POSITION, level=2.0,
           train_images=140),
    number("controls position: 2x2 shuffle, 570", "and {100 * diff_mean}. The mean is larger", POSITION, level=2.0,
           train_images=570),

    number("controls off the grid: ViT - ResNet", "offset occlusion of 75%, ViT − ResNet {mean} ({mean_adj_low} to "
           "{mean_adj_high}),", CONTROLS, comparison="vit - resnet", condition="75% occluded (offset)"),
    number("controls off the grid: ConvMixer - ViT", "ConvMixer − ViT {mean} ({mean_adj_low} to {mean_adj_high}), "
           "ViT without position embedding", CONTROLS, comparison="convmixer - vit",
           condition="75% occluded (offset)"),
    number("controls off the grid: no position - ViT", "ViT without position embedding − ViT {mean} ({mean_adj_low} "
           "to {mean_adj_high}). On the grid", CONTROLS, comparison="vit_nopos - vit",
           condition="75% occluded (offset)"),
    number("controls on the grid: ViT - ResNet, 75%", "On the grid (aligned 75%) ViT − ResNet {mean} ({mean_adj_low} "
           "to {mean_adj_high}) here", CONTROLS, comparison="vit - resnet", condition="75% occluded (aligned)"),

    number("controls uniform attention: clean, 140", "(uniform attention at test time, the same weights, not "
           "retrained): {100 * diff_mean} points ({100 * adj_ci_low} to {100 * adj_ci_high}) at {train_images} "
           "images", CONTROLS_FRACTIONS, comparison="vit@uniform - vit", metric="accuracy", probe="clean",
           train_images=140),
    number("controls uniform attention: clean, 570", "and {100 * diff_mean} ({100 * adj_ci_low} to "
           "{100 * adj_ci_high}) at {train_images} on clean images,", CONTROLS_FRACTIONS,
           comparison="vit@uniform - vit", metric="accuracy", probe="clean", train_images=570),
    number("controls uniform attention: 7x7 shuffle, 140", "on clean images, {100 * diff_mean} ({100 * adj_ci_low} "
           "to {100 * adj_ci_high}) and", CONTROLS_FRACTIONS, comparison="vit@uniform - vit", metric="accuracy",
           probe="rearrangement", level=7.0, train_images=140),
    number("controls uniform attention: 7x7 shuffle, 570", "and {100 * diff_mean} ({100 * adj_ci_low} to "
           "{100 * adj_ci_high}) under the 7×7 shuffle (per fraction, Holm across the two)", CONTROLS_FRACTIONS,
           comparison="vit@uniform - vit", metric="accuracy", probe="rearrangement", level=7.0, train_images=570),

    number("controls clean: ConvMixer - ViT", "**Clean images**: ConvMixer − ViT {mean} ({mean_adj_low} to "
           "{mean_adj_high}),", CONTROLS, comparison="convmixer - vit", condition="clean"),
    number("controls clean: MLP - ViT", "MLP − ViT {mean} ({mean_adj_low} to {mean_adj_high}), Swin", CONTROLS,
           comparison="mlp - vit", condition="clean"),
    number("controls clean: Swin - ViT", "Swin − ViT {mean} ({mean_adj_low} to {mean_adj_high}); ConvMixer − ResNet",
           CONTROLS, comparison="swin - vit", condition="clean"),
    number("controls clean: ConvMixer - ResNet", "ConvMixer − ResNet {mean} ({mean_adj_low} to {mean_adj_high}) and "
           "MLP − ResNet", CONTROLS, comparison="convmixer - resnet", condition="clean"),
    number("controls clean: MLP - ResNet", "and MLP − ResNet {mean} ({mean_adj_low} to {mean_adj_high}). At 140–570",
           CONTROLS, comparison="mlp - resnet", condition="clean"),
    number("controls recipes: ResNet+AdamW - ResNet", "ResNet+AdamW − ResNet {mean} ({mean_adj_low} to "
           "{mean_adj_high}); ViT+SGD", CONTROLS, comparison="resnet_adamw - resnet", condition="clean"),
    number("controls recipes: ViT+SGD - ViT", "ViT+SGD − ViT {mean} ({mean_adj_low} to {mean_adj_high}). With both",
           CONTROLS, comparison="vit_sgd - vit", condition="clean"),
    number("controls recipes: both on AdamW", "With both on AdamW, ViT − ResNet {mean} ({mean_adj_low} to "
           "{mean_adj_high});", CONTROLS, comparison="vit - resnet_adamw", condition="clean"),
    number("controls recipes: both on SGD", "both on SGD {mean} ({mean_adj_low} to {mean_adj_high}). The "
           "architecture gap", CONTROLS, comparison="vit_sgd - resnet", condition="clean"),

    number("controls power", "for the {family} pairs on clean images and under the 7×7 shuffle, the SDs of the "
           "seeds' mean contrasts ({min(seed_sd_points):.1f} to {max(seed_sd_points):.1f} points) give a t-test on "
           "{seeds} seeds {100 * min(power):.0f}% to {max(power):.0%} power for {effect_points:.0f} points over a "
           "family of {family}", CONTROLS_POWER, comparison=CONTROLS_PAIRS, condition=("clean", "7x7 shuffle")),
    number("controls power: seeds needed", "{min(seeds_needed)} to {max(seeds_needed)} seeds would give 80%.",
           CONTROLS_POWER, comparison=CONTROLS_PAIRS, condition=("clean", "7x7 shuffle")),
    number("controls budget check: MLP", "Budget check at {fraction:.0%}: the MLP {verdict},", CONTROLS_BUDGET,
           model="mlp"),
    number("controls budget check: the other arms", "the other {rows} arms {verdict} ({seeds} seeds;",
           CONTROLS_BUDGET, model=CONTROLS_NOT_MLP),
    number("controls budget check: the ViTs' changes", "the ViTs' mean changes {min(100 * delta_mean)} to "
           "{max(100 * delta_mean)} points at twice the steps", CONTROLS_BUDGET, model=CONTROLS_VITS),

    # ----- The ladder (5 seeds, 140 and 1,140 images, its own plan) -----
    number("ladder: seeds", "both on the 300-step floor) × {seeds} seeds (0–4);", LADDER_CLAIMS),
    number("ladder: claims", "two-sided, {rows} claims and", LADDER_CLAIMS),
    number("ladder: tests", "and {rows} tests in one Holm family, scored on {images:,} test images", LADDER_TESTS),
    number("ladder: df", "the seed's mean over the two fractions (df = {df:.0f})", LADDER_TESTS),
    number("ladder twins: images and family", "the controls stage's contrast on the {images} probe images, each "
           "seed's mean over the fractions, Holm-adjusted across the preset's {rows} control comparisons of a "
           "condition", LADDER_CONTROLS, condition="clean"),
    number("ladder: plan runs still improving", "{sum(under_trained)} of its {rows} plan runs", LADDER_RUNS,
           model=LADDER_PLAN_MODELS),
    number("ladder: runs still improving with the twin's", "({sum(under_trained)} of {rows} with the twin's) were "
           "still improving at their end", LADDER_RUNS),
    number("ladder: flagged pairs at 1,140 images", "every step at 1,140 images holds {min(flagged_pairs)}–"
           "{max(flagged_pairs)} flagged seed pairs out of {seeds}, except the conv stem's and the ConvMixer's",
           LADDER_STEPS_TABLE, step=LADDER_FLAGGED, condition="clean", train_images=1140),
    number("ladder: Holm family of the clean verdicts", "Clean images, the plan's verdicts (Holm-adjusted over the "
           "{rows} tests):", LADDER_TESTS),

    number("ladder clean: 3x3 pooling - mean", "instead of a fixed global mean: **{mean} ({adj_low} to {adj_high})**;",
           LADDER_CLAIMS, claim="lad_pool_vs_lad_mean_wide_clean"),
    number("ladder clean: depthwise - pooling", "a learned depthwise 3×3 convolution instead of the pooling: **{mean} "
           "({adj_low} to {adj_high})**.", LADDER_CLAIMS, claim="lad_dwconv_vs_lad_pool_clean"),
    number("ladder clean: 3x3 pooling - mean per fraction", "Per fraction (exploratory): {mean[train_images == 140]} "
           "and {mean[train_images == 1140]};", LADDER_STEPS_TABLE, step="lad_pool - lad_mean_wide",
           condition="clean"),
    number("ladder clean: depthwise - pooling per fraction", "; {mean[train_images == 140]} and "
           "{mean[train_images == 1140]} at 140 and 1,140 images.", LADDER_STEPS_TABLE, step="lad_dwconv - lad_pool",
           condition="clean"),
    number("ladder clean: mean - attention", "mean − attention **{mean} ({adj_low} to {adj_high})**.", LADDER_CLAIMS,
           claim="lad_mean_vs_lad_nopos_clean"),
    number("ladder clean: MLP ratio 4", "(MLP ratio 4): {mean} ({adj_low} to {adj_high}), {verdict}.", LADDER_CLAIMS,
           claim="lad_mean_wide_vs_lad_mean_clean"),
    number("ladder clean: matched parameters", "the mean is still behind: {mean} ({mean_adj_low} to "
           "{mean_adj_high}),", LADDER_CONTROLS, comparison="lad_mean_wide - lad_nopos", condition="clean"),
    number("ladder clean: average pooling", "average pooling for the class token {mean} (±{bound:.1f}); no position",
           LADDER_CLAIMS, claim="lad_avg_vs_vit_clean"),
    number("ladder clean: no position", "no position embedding {mean} (±{bound:.1f});", LADDER_CLAIMS,
           claim="lad_nopos_vs_lad_avg_clean"),
    number("ladder clean: BatchNorm", "BatchNorm for LayerNorm {mean} (±{bound:.1f});", LADDER_CLAIMS,
           claim="lad_bn_vs_lad_dwconv_clean"),
    number("ladder clean: conv stem", "the conv stem {mean} (±{bound:.1f});", LADDER_CLAIMS,
           claim="lad_stem_vs_lad_bn_clean"),
    number("ladder clean: hierarchy", "against the conv-stem rung) {mean} (±{bound:.1f}),", LADDER_CLAIMS,
           claim="resnet_adamw_vs_lad_stem_clean"),
    number("ladder clean: hierarchy at matched FLOPs", "at the conv-stem rung's FLOPs (the twin, exploratory, {images} "
           "images) {mean} ({mean_adj_low} to {mean_adj_high}),", LADDER_CONTROLS,
           comparison="resnet_adamw_w28 - lad_stem", condition="clean"),
    number("ladder clean: SGD - AdamW on the ResNet", "SGD for AdamW on the ResNet {mean}, **{verdict} beyond "
           "±{bound:.1f}** (the plan's \"{verdict}\").", LADDER_CLAIMS, claim="resnet_vs_resnet_adamw_clean"),
    number("ladder clean: seeds needed", "The seeds needed for {power_target:.0%} power at {smallest_effect:.0f} "
           "points: {min(seeds_needed)} to {max(seeds_needed)} per step.", LADDER_CLAIMS, comparison=LADDER_STEPS,
           condition="clean"),
    number("ladder side pairs: ConvMixer - BatchNorm rung", "− the BatchNorm rung (depthwise 3×3) **{mean} "
           "({adj_low} to {adj_high})**;", LADDER_CLAIMS, claim="convmixer_vs_lad_bn_clean"),
    number("ladder side pairs: MLP - ViT", "the MLP on pixels − the ViT **{mean} ({adj_low} to {adj_high})**:",
           LADDER_CLAIMS, claim="mlp_vs_vit_clean"),
    number("ladder side pairs: MLP and ViT at 140", "ahead of the ViT ({top1[rung == 'mlp']:.1f}% against "
           "{top1[rung == 'vit']:.1f}% at 140 images,", LADDER_RUNGS, rung=("mlp", "vit"), condition="clean",
           train_images=140),
    number("ladder side pairs: MLP and ViT at 1,140", "{top1[rung == 'mlp']:.1f}% against {top1[rung == 'vit']:.1f}% "
           "at 1,140)", LADDER_RUNGS, rung=("mlp", "vit"), condition="clean", train_images=1140),
    number("ladder rungs: ViT", "Rung accuracy at 140 / 1,140 images: ViT " + AT_BOTH + ",", LADDER_RUNGS,
           rung="vit", condition="clean"),
    number("ladder rungs: global mean", "fixed global mean " + AT_BOTH + ",", LADDER_RUNGS, rung="lad_mean",
           condition="clean"),
    number("ladder rungs: 3x3 pooling", "3×3 pooling " + AT_BOTH + ", depthwise", LADDER_RUNGS, rung="lad_pool",
           condition="clean"),
    number("ladder rungs: depthwise", "depthwise 3×3 " + AT_BOTH + ", ResNet-8", LADDER_RUNGS, rung="lad_dwconv",
           condition="clean"),
    number("ladder rungs: ResNet-8", "ResNet-8 " + AT_BOTH + ".", LADDER_RUNGS, rung="resnet", condition="clean"),

    number("ladder shuffle: no position - position", "**Dropping position embedding makes the ViT "
           "shuffle-invariant**: {mean} ({adj_low} to {adj_high}), interaction **{interaction_mean} "
           "({interaction_adj_low} to {interaction_adj_high})**, offset contrast {control_mean} ({control_adj_low} "
           "to {control_adj_high}): {scope} on its grid.", LADDER_CLAIMS, claim="lad_nopos_vs_lad_avg_shuffle_7"),
    number("ladder shuffle: invariant rung", "({top1:.1f}% at 1,140 images, clean and shuffled)", LADDER_RUNGS,
           rung="lad_nopos", condition=("clean", "7x7 shuffle"), train_images=1140),
    number("ladder shuffle: 3x3 pooling - mean", "3×3 pooling − the global mean {mean} ({adj_low} to {adj_high}), "
           "interaction **{interaction_mean} ({interaction_adj_low} to {interaction_adj_high})**: {scope} on the "
           "grid than off it.", LADDER_CLAIMS, claim="lad_pool_vs_lad_mean_wide_shuffle_7"),
    number("ladder shuffle: MLP - ViT", "The MLP − the ViT: {mean} ({adj_low} to {adj_high}), interaction "
           "{interaction_mean} ({interaction_adj_low} to {interaction_adj_high}).", LADDER_CLAIMS,
           claim="mlp_vs_vit_shuffle_7"),

    number("ladder summary: attention - mean", "(attention to a fixed global mean {mean},", LADDER_CLAIMS,
           claim="lad_mean_vs_lad_nopos_clean"),
    number("ladder summary: mean - pooling", "the mean to fixed 3×3 pooling {mean},", LADDER_CLAIMS,
           claim="lad_pool_vs_lad_mean_wide_clean"),
    number("ladder summary: pooling - depthwise", "the pooling to a learned depthwise 3×3 {mean});", LADDER_CLAIMS,
           claim="lad_dwconv_vs_lad_pool_clean"),
    number("ladder summary: the steps not shown", "({verdict}: effects beyond ±{min(bound):.1f} to ±{max(bound):.1f} "
           "points excluded)", LADDER_CLAIMS, claim=LADDER_INCONCLUSIVE),
    number("ladder summary: the ResNet's optimiser", "the ResNet's optimiser has no effect beyond ±{bound:.1f}.",
           LADDER_CLAIMS, claim="resnet_vs_resnet_adamw_clean"),
    number("ladder summary: local mixing under the shuffle", "is where the robustness goes (interaction "
           "{interaction_mean}),", LADDER_CLAIMS, claim="lad_pool_vs_lad_mean_wide_shuffle_7"),
    number("ladder summary: position under the shuffle", "dropping position embedding adds to it "
           "({interaction_mean}).", LADDER_CLAIMS, claim="lad_nopos_vs_lad_avg_shuffle_7"),
    number("ladder literature: pooling step", "the two mixing steps are worth {mean:.0f} and", LADDER_CLAIMS,
           claim="lad_pool_vs_lad_mean_wide_clean"),
    number("ladder literature: depthwise step", "and {mean:.0f} points, a difference of setting", LADDER_CLAIMS,
           claim="lad_dwconv_vs_lad_pool_clean"),
    number("ladder literature: pooling over a mean", "here pooling is {mean:.0f} points above a global mean",
           LADDER_CLAIMS, claim="lad_pool_vs_lad_mean_wide_clean"),
    number("ladder literature: pooling rung", "pooling against attention with position (" + AT_BOTH + " against",
           LADDER_RUNGS, rung="lad_pool", condition="clean"),
    number("ladder literature: ViT rung", "against " + AT_BOTH + ") is not a step of the plan", LADDER_RUNGS,
           rung="vit", condition="clean"),

    # ----- The whole data range on the H200 (8 seeds, 10 epochs; exploratory) -----
    number("H200: seeds", "(0.25% to 100% of the training set), {seeds} seeds, 10 epochs", GPU_GAPS,
           comparison="vit - resnet"),
    number("H200: fractions", "Holm-adjusted across the {rows} fractions:", GPU_GAPS, comparison="vit - resnet"),
    number("H200: ViT - ResNet at 140", "fractions: " + GAP + " at {train_images} images,", GPU_GAPS,
           comparison="vit - resnet", train_images=140),
    number("H200: ViT - ResNet at 570", GAP + " at {train_images},", GPU_GAPS, comparison="vit - resnet",
           train_images=570),
    number("H200: ViT - ResNet at 2,280", GAP + " at {train_images:,},", GPU_GAPS, comparison="vit - resnet",
           train_images=2280),
    number("H200: ViT - ResNet at 11,400", GAP + " at {train_images:,},", GPU_GAPS, comparison="vit - resnet",
           train_images=11400),
    number("H200: ViT - ResNet at 57,000", "**" + GAP + " at {train_images:,}**: the ResNet leads at every fraction",
           GPU_GAPS, comparison="vit - resnet", train_images=57000),
    number("H200: trend of the gap", "by {slope_per_decade} points less per tenfold data ({adj_ci_low} to "
           "{adj_ci_high}, over 11,400 and 57,000 images", GPU_GAP_TRENDS, comparison="vit - resnet",
           scale="gap (accuracy points)"),
    number("H200 budget check: ResNet", "Convergence at {train_images:,} images (twice the budget, {seeds} seeds): "
           "ResNet {100 * delta_mean:+.2f} ({100 * adj_ci_low:+.2f} to {100 * adj_ci_high:+.2f}), {verdict};",
           GPU_BUDGET, model="resnet"),
    number("H200 budget check: ViT", "ViT {100 * delta_mean:+.2f} ({100 * adj_ci_low:+.2f} to "
           "{100 * adj_ci_high:+.2f}), {verdict} (it gains", GPU_BUDGET, model="vit"),
    number("H200 budget check: the gap there", "a sixth of the {100 * gap_mean} gap.", GPU_GAPS,
           comparison="vit - resnet", train_images=11400),
    number("H200: still improving at 57,000", "and {under_trained_a} of the ViT's {seeds} runs there were still "
           "improving: the {100 * gap_mean} is the gap at 10 epochs", GPU_GAPS, comparison="vit - resnet",
           train_images=57000),
    number("H200: DeiT - ViT at 140", "DeiT − ViT at 140, 570 and 2,280 images: " + GAP + ",", GPU_GAPS,
           comparison="deit - vit", train_images=140),
    number("H200: DeiT - ViT at 570", ", " + GAP + ", ", GPU_GAPS, comparison="deit - vit", train_images=570),
    number("H200: DeiT - ViT at 2,280", GAP + ": no difference detected", GPU_GAPS, comparison="deit - vit",
           train_images=2280),
    number("H200: DeiT - ViT bounds", "none beyond ±{100 * equivalence_bound[train_images == 140]:.1f}, "
           "±{100 * equivalence_bound[train_images == 570]:.1f} and "
           "±{100 * equivalence_bound[train_images == 2280]:.1f} points (Holm-adjusted, {seeds} seeds)", GPU_GAPS,
           comparison="deit - vit"),
    number("H200: the default's slope", "The default's slope of ViT − ResNet over 140 to 2,280 images "
           "({slope_per_decade} points per tenfold data, {adj_ci_low} to {adj_ci_high}, at 30 epochs)",
           DEFAULT_GAP_TRENDS, comparison="vit - resnet", scale="gap (accuracy points)"),
    number("H200: measured at 57,000", "Measured there, at 10 epochs, it is {-100 * gap_mean:.1f} behind.", GPU_GAPS,
           comparison="vit - resnet", train_images=57000),
]


def findings_text() -> str:
    """The whole of docs/findings.md, white space collapsed."""
    return document_text(FINDINGS)


@pytest.mark.parametrize(("text", "table", "rows"), NUMBERS)
def test_findings_number_is_its_tables(text, table, rows):
    assert_quoted("docs/findings.md", findings_text(), text, table, rows)


def test_the_controls_pairs_are_the_tables_family():
    contrasts = read_table(CONTROLS)
    assert tuple(contrasts.loc[contrasts["family"] == "controls", "comparison"].drop_duplicates()) == CONTROLS_PAIRS


def test_the_4pct_checks_projection_and_rule_are_its_runs():
    """The committed check_4pct table predates the projection and the one-sided rule: "28 (ViT) and 19 (DeiT)
    seeds" and "so not budget-bound" are what study.budget_check makes of the committed runs today. The table
    rebuilt from those runs must give the committed intervals, so that both come from the same runs."""
    from study.budget_check.check import budget_check_table
    from tests.conftest import load_study

    params = load_study("check_4pct.yaml")
    committed = read_table(CHECK_4PCT)
    rebuilt = budget_check_table(read_table(CHECK_4PCT_RUNS), confidence=confidence(params),
                                 tolerance=params.budget_check.tolerance)
    columns = ["delta_mean", "adj_ci_low", "adj_ci_high"]
    pd.testing.assert_frame_equal(rebuilt[["model", *columns]], committed[["model", *columns]], check_exact=False)
    vit, deit = (rebuilt[rebuilt["model"] == model] for model in ("vit", "deit"))
    expected = (f"{ReadmeStyle(vit).format('{seeds_to_converge:.0f}')} (ViT) and "
                f"{ReadmeStyle(deit).format('{seeds_to_converge:.0f}')} (DeiT) seeds to show them converged")
    assert expected in findings_text(), f"docs/findings.md should read {expected!r}"
    assert set(rebuilt.loc[rebuilt["model"].isin(["vit", "deit"]), "verdict"]) == {"not budget-bound"}


def test_the_words_beside_the_numbers_are_the_tables():
    """The words that carry a table's result without its number beside them: each is what its table gives."""
    # "None is budget-bound ... and none is shown converged" (the default's check, 3 seeds)
    default = read_table(DEFAULT_BUDGET)
    assert not default["verdict"].isin(["budget-bound", "converged"]).any()
    # "Every on-grid − off-grid interaction against the 4×4 shuffle excludes 0 for ViT − ResNet, ConvMixer − ViT,
    # Swin − ViT, MLP − ViT and ConvMixer − ResNet"
    grid = read_table(CONTROLS_GRID).set_index("comparison")
    grid = grid[grid["off_grid"] == "4x4 shuffle"].loc[
        ["vit - resnet", "convmixer - vit", "swin - vit", "mlp - vit", "convmixer - resnet"]]
    assert ((grid["interaction_ci_low"] > 0) | (grid["interaction_ci_high"] < 0)).all()
    # "no interval excludes 0 with 4 seeds" (the position contrasts)
    position = read_table(POSITION)
    assert ((position["adj_ci_low"] < 0) & (position["adj_ci_high"] > 0)).all()
    # "the three shown to move clean accuracy all change the token mixer" and, under the shuffle, "No later step
    # changes the shuffle beyond its control": after the step to 3x3 pooling every interaction includes 0
    ladder = read_table(LADDER_CLAIMS).set_index("comparison")
    clean = ladder[ladder["condition"] == "clean"].loc[list(LADDER_STEPS)]
    assert set(clean.index[clean["verdict"] == "supported"]) == {
        "lad_mean - lad_nopos", "lad_pool - lad_mean_wide", "lad_dwconv - lad_pool"}
    later = ladder[ladder["condition"] == "7x7 shuffle"].loc[list(LADDER_STEPS[5:])]
    assert ((later["interaction_adj_low"] < 0) & (later["interaction_adj_high"] > 0)).all()
    # on the H200, "the ResNet leads at every fraction" and DeiT − ViT "no difference detected"
    gaps = read_table(GPU_GAPS)
    assert (gaps.loc[gaps["comparison"] == "vit - resnet", "adj_ci_high"] < 0).all()
    assert not gaps.loc[gaps["comparison"] == "deit - vit", "significant"].any()
