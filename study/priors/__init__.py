"""Priors: what a CNN's priors buy a ViT, and what they cost on scrambled images; its part of the report.

ConViT's gates are measured by the ``attention`` stage, into its folder (:data:`study.attention.FOLDER`), under
the names defined here once, read by the report's section.
"""

GATES_RUNS = "gates_runs"
GATES = "gates"  # a table and a figure
GATE_CONTRASTS = "gate_contrasts"
