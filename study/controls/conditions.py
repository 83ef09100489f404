"""Which probes respect the ViT's patch grid, and which is each one's control off the grid.

A probe *on the grid* cuts the image along the ViT's token boundaries (a ``g × g`` shuffle of ``p``-px cells, the
occlusion of whole patches, a shift by exactly one patch); its *control* is the same kind of damage that cuts
across tokens (a shuffle of coarser or finer cells, the occlusion grid moved by half a patch, a 1- or 2-px shift).
A robustness win is the ViT's own only where it holds off the grid too; where it holds on the grid alone it is a
property of the tokenisation, which a patchify CNN shares.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

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
    against every other shuffle grid; aligned occlusion of ``share`` of the cells against the offset grid; a
    shift of ``patch_size`` px along x against every smaller shift along x. Pairs without a control are dropped."""
    pairs = []
    grids = sorted(float(g) for g in table.loc[table["probe"] == "rearrangement", "level"].unique())
    shuffle = ("rearrangement", "shuffle", float(patch_grid))
    pairs.append(GridPair(f"{patch_grid}x{patch_grid} shuffle", shuffle,
                          tuple(("rearrangement", "shuffle", g) for g in grids if g != patch_grid)))
    pairs.append(GridPair(f"{100 * share:g}% occluded", ("occlusion", "aligned", share),
                          (("occlusion", "offset", share),)))
    shifts = sorted(float(s) for s in table.loc[(table["probe"] == "translation") & (table["variant"] == "x"),
                                                 "level"].unique())
    pairs.append(GridPair(f"{patch_size}-px shift", ("translation", "x", float(patch_size)),
                          tuple(("translation", "x", s) for s in shifts if s < patch_size)))
    kept = []
    for pair in pairs:
        controls = tuple(c for c in pair.off_grid if _has(table, c))
        if _has(table, pair.on_grid) and controls:
            kept.append(GridPair(pair.label, pair.on_grid, controls))
    return kept


def condition_label(probe: str, variant: str, level: float) -> str:
    """A short name for a condition, as the figure and tables print it."""
    if probe == "clean":
        return "clean"
    if probe == "rearrangement":
        return f"{level:g}x{level:g} shuffle"
    if probe == "occlusion":
        return f"{100 * level:g}% occluded ({variant})"
    if probe == "translation":
        return f"{level:g}-px shift ({variant})"
    return f"{variant.replace('_', ' ')} {level:g}"
