"""Controls: what separates the ViT's patch grid from its attention, and its recipe from its architecture (stage
``controls``), and its part of the report.

Each arm of ``analysis.controls.pairs`` changes one thing of the model it is compared with (a patchify CNN mixes
the ViT's patch tokens with convolutions instead of attention; a ViT without position embedding; the ResNet with
the ViT's optimiser), and every ViT is also scored with uniform attention (``<model>@uniform``, stage
``robustness``). The stage reads the robustness stage's per-run table, so every arm is judged on the same images
and probes, and writes one row per comparison and condition: the contrast averaged over the fractions with the
seed as the unit, and its slope with data. Exploratory: intervals only; verdicts belong to the plan's claims
(stage ``plan``).

The names the stage writes and the report reads, defined here once.
"""

FOLDER = "controls"
POOLED = "control_contrasts"  # one model over fractions per comparison and condition
FRACTIONS = "control_fractions"  # the same contrasts per fraction, Holm-adjusted across fractions
GRID = "grid_controls"  # each on-grid probe beside its off-grid control, per comparison
POWER = "power"  # seeds: what the runs can detect, and what the smallest effect of interest would need
RETENTION = "retention"  # retained accuracy under the patch-grid shuffle and its offset control, per fraction
POSITION = "position"  # the same for analysis.controls.position (the ViT without position embedding, its ViT)
FIGURE = "controls"
UNIFORM_SUFFIX = "@uniform"  # the robustness stage's name for a ViT scored with uniform attention
