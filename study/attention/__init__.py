"""Attention: how local each head attends, against initialisation and between models (stage ``attention``), and
its part of the report.

The names the stage writes and the report reads, defined here once: ``FOLDER``, the stage's folder under the
tables and the figures (where dvc.yaml's ``attention`` stage writes), then each table's and figure's stem.
ConViT's gates, which the same stage measures, are named by :mod:`study.priors`.
"""

FOLDER = "attention"
HEADS_SEEDS = "attention_heads_seeds"
HEADS = "attention_heads"
LAYERS = "attention_layers"
CONTRASTS = "attention_contrasts"
MODEL_CONTRASTS = "attention_model_contrasts"
DISTANCE = "attention_distance"  # per layer, a table and a figure
MAPS_FIGURE = "attention_maps"  # a prefix: attention_maps_<model>_<token>_<block>

