"""Robustness probes: what a model keeps when its test images are occluded, rearranged, shifted or corrupted.

Every probe is a pure, batched function of ``(images, level, seed)`` on images in pixel space before
normalisation — ``(N, H, W, C)`` uint8 (as :mod:`study.data.prepared` stores them) or float in [0, 1] —
returning the same dtype, layout and device, deterministic on CPU. Random choices are per image, keyed
by ``(seed, probe, start + i)`` (:mod:`~study.robustness.probes.streams`), so streaming the test set in
batches (pass each batch's ``start``) gives the same images as one batch.

==========================  =====================================  ===========================================
probe                       level                                  source
==========================  =====================================  ===========================================
:func:`occlusion`           share of grid cells set to 0 (0–1)     Naseer et al. 2021, random patch drop
:func:`rearrangement`       grid of cells permuted (1 = identity)  Naseer et al. 2021, patch shuffle
:func:`translation`         shift in px (dx, dy)                   Azulay & Weiss 2019
:func:`corrupt`             corruption name, severity 0–5          Mu & Gilmer 2019 (MNIST-C); H&D 2019
==========================  =====================================  ===========================================

Occlusion and rearrangement also take an ``offset``: the same grid moved that many px right and down, so that its
cells straddle the ViT's patches (the off-grid controls of the aligned probes).

Plus :func:`prediction_change` (share of predictions a 1-px shift changes), :func:`mce` (mean corruption
error against a baseline model, Hendrycks & Dietterich 2019) and :func:`check_probe_settings` (the
validation the params layer runs first). ``docs/robustness.md`` describes each probe and its levels.
"""

from study.robustness.corruption_error import corruption_errors, mce  # table arithmetic, kept outside (no torch)
from study.robustness.probes.corruptions import CORRUPTIONS, MNIST_C, SEEDED, SEVERITIES, corrupt
from study.robustness.probes.grid import (cell_map, cell_permutations, half_cell_offset, hidden_count, occlusion,
                                        permute_cells, rearrangement)
from study.robustness.settings import check_probe_settings
from study.robustness.probes.shift import prediction_change, translation
from study.robustness.probes.streams import ImageStreams

__all__ = [
    "CORRUPTIONS", "MNIST_C", "SEEDED", "SEVERITIES", "ImageStreams", "cell_map", "cell_permutations",
    "check_probe_settings", "corrupt", "corruption_errors", "half_cell_offset", "hidden_count", "mce",
    "occlusion", "permute_cells", "prediction_change", "rearrangement", "translation",
]
