"""Names of the model families that light code needs without building a model: which architectures are ViTs
(they have a patch grid and attention) and the ViT's default arguments (its patch size sets the grid the probes
cut along). Here, in plain Python, so that a stage that only reads tables (the controls, the report) does not
import torch and every model file through :mod:`study.models`, which re-exports both."""

from __future__ import annotations

from typing import Any

VIT_FAMILY = ("vit", "deit", "convit", "vit_convstem")
# ViT-Tiny's width/depth/heads (Touvron et al., 2021, Table 1) with patch 4, the usual CIFAR patch size.
VIT_DEFAULTS: dict[str, Any] = {"patch_size": 4, "embed_dim": 192, "depth": 12, "num_heads": 3, "mlp_ratio": 4.0}
