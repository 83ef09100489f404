"""The ``scrambled`` data condition: the same images with their spatial layout destroyed, one fixed way.

The image is cut into a grid of ``cell×cell`` cells (``cell`` = the ViT's patch size). One permutation
shuffles the cells across the grid, and one permutation shuffles the ``cell²`` pixels inside a cell, the
same pixel permutation in every cell; both are drawn once from a seed and applied identically to every
image, train and test alike. Channels travel with their pixel. What survives: every image's multiset of
pixel values (so per-channel normalisation statistics are unchanged) and, within each cell, which pixels
belong together. What is lost: every neighbourhood a convolution could use.

Why this is the test of an inductive bias: a ViT without any spatial prior in its architecture sees its
image as an unordered set of patches, each flattened by a shared linear map, and locates them only through
a *learned* position embedding. Permuting the patch-embedding weights like the pixels and the position
embedding like the cells (:func:`permute_vit_for`) gives a ViT whose logits on scrambled images are
exactly the original's on natural ones, so the scrambled task is as learnable for a ViT as the natural one
(up to initialisation and optimisation, which see the same distribution of weights either way). A CNN's
locality and translation equivariance are tied to the pixel grid, and no such weight map exists for it.

Conventions (all permutations gather: ``out[i] = in[perm[i]]``):

* cells are indexed in raster order, ``g = row * (W/cell) + column`` — the order in which
  :class:`study.models.vit.PatchEmbed` emits its tokens;
* pixels inside a cell are indexed in raster order, ``k = i * cell + j`` — the order of a flattened
  ``cell×cell`` convolution kernel;
* scrambled cell ``g`` holds natural cell ``cells[g]``, and scrambled pixel ``k`` of every cell holds that
  cell's natural pixel ``pixels[k]``;
* from ``numpy.random.default_rng(seed)``, ``cells = rng.permutation(G)`` is drawn first, then
  ``pixels = rng.permutation(cell²)``. Changing that order changes every scrambled dataset.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from study.core.errors import StudyError

if TYPE_CHECKING:  # torch only for the ViT weight map; the data path stays numpy-only
    from torch import nn


@dataclass(frozen=True, eq=False)  # eq off: the fields are arrays, compare them with np.array_equal
class Scramble:
    """One drawn ``scrambled`` condition: the two permutations and what they were drawn for."""

    cell: int  # side of a square cell, in pixels (the ViT's patch size)
    grid: tuple[int, int]  # cells per column and per row: (H / cell, W / cell)
    seed: int  # what numpy.random.default_rng was seeded with
    cells: np.ndarray  # (grid[0] * grid[1],) int64: scrambled cell g holds natural cell cells[g]
    pixels: np.ndarray  # (cell * cell,) int64: scrambled pixel k of a cell holds its natural pixel pixels[k]

    def __post_init__(self) -> None:
        for name, size in (("cells", self.grid[0] * self.grid[1]), ("pixels", self.cell * self.cell)):
            perm = np.asarray(getattr(self, name), dtype=np.int64)
            if perm.shape != (size,) or not np.array_equal(np.sort(perm), np.arange(size)):
                raise StudyError(f"scramble {name} is not a permutation of {size} indices; "
                                 "draw it with draw_scramble instead of building it by hand")
            perm = perm.copy()
            perm.flags.writeable = False  # frozen means frozen: a recorded permutation must not drift
            object.__setattr__(self, name, perm)

    @property
    def image_size(self) -> tuple[int, int]:
        """``(H, W)`` of the images this scramble applies to."""
        return self.grid[0] * self.cell, self.grid[1] * self.cell

    def to_dict(self) -> dict:
        """JSON-ready record for a manifest: enough to redo (or undo) the scramble without the seed."""
        return {"condition": "scrambled", "cell": self.cell, "grid": list(self.grid), "seed": self.seed,
                "cells": self.cells.tolist(), "pixels": self.pixels.tolist()}


def draw_scramble(height: int, width: int, cell: int, seed: int) -> Scramble:
    """Draw the ``scrambled`` condition for ``height×width`` images cut into ``cell×cell`` cells.

    ``default_rng(seed)`` gives the cell permutation first, then the within-cell pixel permutation.
    """
    if not isinstance(cell, int) or cell < 1 or height % cell or width % cell:
        raise StudyError(f"scramble cell {cell!r} does not divide the {height}x{width} images; "
                         "set the cell to a divisor of both sides (the ViT's patch size)")
    rng = np.random.default_rng(seed)
    grid = (height // cell, width // cell)
    cells = rng.permutation(grid[0] * grid[1])
    pixels = rng.permutation(cell * cell)
    return Scramble(cell=cell, grid=grid, seed=seed, cells=cells, pixels=pixels)


def scramble_setting(scramble: Scramble) -> dict[str, int]:
    """What a run records of its scramble (``RunSpec.scramble``): enough for :func:`setting_scramble` to redraw it."""
    return {"cell": scramble.cell, "seed": scramble.seed}


def setting_scramble(setting: dict[str, int], height: int, width: int) -> Scramble:
    """The scramble a run recorded (:func:`scramble_setting`), redrawn for ``height×width`` images."""
    return draw_scramble(height, width, int(setting["cell"]), int(setting["seed"]))


def scramble_images(images: np.ndarray, scramble: Scramble) -> np.ndarray:
    """Scrambled copy of ``images`` (N, H, W, C), any dtype: cells and in-cell pixels permuted."""
    return _gather(images, scramble, scramble.cells, scramble.pixels)


def unscramble_images(images: np.ndarray, scramble: Scramble) -> np.ndarray:
    """Inverse of :func:`scramble_images`: ``unscramble_images(scramble_images(x, s), s) == x``."""
    # argsort of a permutation is its inverse: gathering with it puts every cell and pixel back
    return _gather(images, scramble, np.argsort(scramble.cells), np.argsort(scramble.pixels))


def _gather(images: np.ndarray, scramble: Scramble, cells: np.ndarray, pixels: np.ndarray) -> np.ndarray:
    if images.ndim != 4 or tuple(images.shape[1:3]) != scramble.image_size:
        raise StudyError(f"images of shape {tuple(images.shape)} do not fit a scramble drawn for "
                         f"{scramble.image_size[0]}x{scramble.image_size[1]} (N, H, W, C) images; "
                         "draw the scramble for the data's image size")
    n, _, _, channels = images.shape
    (rows, cols), cell = scramble.grid, scramble.cell
    # (N, H, W, C) -> (N, rows, cell, cols, cell, C): split each side into (which cell, where inside it)
    x = images.reshape(n, rows, cell, cols, cell, channels)
    # -> (N, rows, cols, cell, cell, C): the two cell axes next to each other, then the two in-cell axes
    x = x.transpose(0, 1, 3, 2, 4, 5)
    # -> (N, G, P, C) with G = rows*cols, P = cell²: raster cell index g and raster pixel index k, the
    # token order of PatchEmbed and the order of a flattened conv kernel (a copy: the transpose is a view)
    x = x.reshape(n, rows * cols, cell * cell, channels)
    x = x[:, cells][:, :, pixels]  # (N, G, P, C): gather cells, then pixels inside every cell
    # undo the reshapes in reverse: (N, G, P, C) -> (N, rows, cols, cell, cell, C)
    x = x.reshape(n, rows, cols, cell, cell, channels)
    # -> (N, rows, cell, cols, cell, C) -> (N, H, W, C)
    return np.ascontiguousarray(x.transpose(0, 1, 3, 2, 4, 5).reshape(images.shape))


def permute_vit_for(scramble: Scramble, model: nn.Module) -> nn.Module:
    """A copy of the study's ViT (or DeiT) whose logits on scrambled images equal ``model``'s on natural ones.

    Two weight permutations do it, everything else is shared:

    * patch embedding: scrambled pixel ``k`` holds natural pixel ``pixels[k]``, so its kernel weight must be
      the natural kernel's weight ``pixels[k]`` — the same gather, on the flattened ``cell×cell`` kernel;
    * position embedding: scrambled token ``g`` carries natural cell ``cells[g]``, so it gets that cell's
      position vector (prefix tokens keep theirs). The tokens entering block 0 are then the natural ones in
      another order, and attention, MLPs and norms are permutation-equivariant over tokens, so the class
      token (or the mean over patch tokens) comes out the same.
    """
    import torch  # here, not at module level: only this weight map needs torch

    from study.models.vit import VisionTransformer

    if not isinstance(model, VisionTransformer):
        raise StudyError(f"permute_vit_for needs the study's 'vit' or 'deit', not {type(model).__name__}")
    embed = model.patch_embed
    if embed.patch_size != (scramble.cell, scramble.cell) or embed.grid_size != scramble.grid:
        raise StudyError(f"the ViT has patch {embed.patch_size} on a {embed.grid_size} grid but the scramble has "
                         f"cell {scramble.cell} on a {scramble.grid} grid; draw the scramble with the ViT's patch "
                         "size and the data's image size")
    permuted = copy.deepcopy(model)
    cells = torch.tensor(scramble.cells)  # a copy: torch will not wrap a read-only array
    pixels = torch.tensor(scramble.pixels)
    with torch.no_grad():
        weight = permuted.patch_embed.proj.weight  # (D, C, cell, cell)
        # (D, C, cell, cell) -> (D, C, P): raster pixel index k, as in the scrambled images
        flat = weight.reshape(*weight.shape[:2], -1)
        # gather pixels, then (D, C, P) -> (D, C, cell, cell) back into the conv's shape
        weight.copy_(flat[:, :, pixels].reshape(weight.shape))
        pos = permuted.pos_embed  # (1, prefix + G, D); None for a ViT without one, whose tokens carry no position
        if pos is not None:
            prefix = permuted.num_prefix_tokens
            pos[:, prefix:].copy_(pos[:, prefix:][:, cells])  # (1, G, D), gathered by cell (indexing copies)
    return permuted


__all__ = ["Scramble", "draw_scramble", "permute_vit_for", "scramble_images", "scramble_setting", "setting_scramble",
           "unscramble_images"]
