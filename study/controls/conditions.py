"""Which probes respect the ViT's patch grid, and which is each one's control off the grid.

A probe *on the grid* cuts the image along the ViT's token boundaries (a ``g × g`` shuffle of ``p``-px cells, the
occlusion of whole patches, a shift by exactly one patch); its *control* is the same kind of damage that cuts
across tokens: matched in amount where the probe allows (the same shuffle and the same occlusion with the grid moved
by half a cell), otherwise a coarser or finer shuffle or a smaller shift; for the one-patch shift, a shift of two
patches, a whole step of the ResNet's 8-px stride, separates the ViT's grid from the CNN's aliasing (Azulay & Weiss
2019). Whether a difference is specific to the grid is tested as an interaction (the grid table here, exploratory;
the plan's claims in stage ``plan``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from study.robustness import condition_label  # noqa: F401 (the controls' tables and figure name conditions so)

CLEAN = ("clean", "clean", 0.0)


@dataclass(frozen=True)
class GridPair:
    """One on-grid condition and its off-grid controls, each ``(probe, variant, level)``."""
    label: str
    on_grid: tuple[str, str, float]
    off_grid: tuple[tuple[str, str, float], ...]


def _has(table: pd.DataFrame, condition: tuple[str, str, float]) -> bool:
    probe, variant, level = condition
    return bool(((table["probe"] == probe) & (table["variant"] == variant) & (table["level"] == level)).any())


def grid_pairs(table: pd.DataFrame, patch_grid: int, patch_size: int, share: float = 0.75) -> list[GridPair]:
    """The on-grid probes the table holds, each with the off-grid controls it holds: the ``patch_grid`` shuffle
    against the same grid offset by half a cell (the matched control), then every other shuffle grid; aligned
    occlusion of ``share`` of the cells against the offset grid; a shift of ``patch_size`` px along x against a
    shift of twice that (a whole step of an 8-px-stride CNN's grid), then every smaller shift along x. Pairs
    without a control are dropped."""
    pairs = []
    grids = sorted(float(g) for g in table.loc[(table["probe"] == "rearrangement")
                                               & (table["variant"] == "shuffle"), "level"].unique())
    shuffle = ("rearrangement", "shuffle", float(patch_grid))
    pairs.append(GridPair(f"{patch_grid}x{patch_grid} shuffle", shuffle,
                          (("rearrangement", "offset", float(patch_grid)),
                           *(("rearrangement", "shuffle", g) for g in grids if g != patch_grid))))
    pairs.append(GridPair(f"{100 * share:g}% occluded", ("occlusion", "aligned", share),
                          (("occlusion", "offset", share),)))
    shifts = sorted(float(s) for s in table.loc[(table["probe"] == "translation") & (table["variant"] == "x"),
                                                 "level"].unique())
    pairs.append(GridPair(f"{patch_size}-px shift", ("translation", "x", float(patch_size)),
                          (("translation", "x", 2.0 * patch_size),
                           *(("translation", "x", s) for s in shifts if s < patch_size))))
    kept = []
    for pair in pairs:
        controls = tuple(c for c in pair.off_grid if _has(table, c))
        if _has(table, pair.on_grid) and controls:
            kept.append(GridPair(pair.label, pair.on_grid, controls))
    return kept
