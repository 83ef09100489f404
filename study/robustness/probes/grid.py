"""Grid probes: random cell occlusion and cell rearrangement (Naseer et al., NeurIPS 2021).

Naseer, Ranasinghe, Khan, Hayat, Khan & Yang, "Intriguing Properties of Vision Transformers":

* **Random patch drop**: the image is cut into the ViT's patch grid, ⌊share·cells⌋ cells
  are chosen at random without replacement and set to 0 in [0, 1] pixel space, before normalisation.
  Variants: a finer drop grid, and the grid *offset* by half a patch so that dropped cells straddle the
  ViT's tokens — then the grid has one more row and column of cells, those at the border clipped by the
  image edge. :func:`occlusion` implements both; ``grid`` equal to the image side is pixel drop.
* **Patch shuffle**: the image cut into a g×g grid whose cells are permuted at random per
  image. A ViT whose position embeddings are permuted with the patches gives the same logits, since
  attention is permutation-equivariant and the class token stays first (tests/robustness/test_probes.py checks it).
  :func:`rearrangement` draws the permutations; :func:`permute_cells` applies a given one.
  Its off-grid control (this study's, not Naseer et al.'s): the same g×g grid *offset* by half a cell, so that
  every cell straddles the ViT's tokens while the same number of cells of the same size are permuted. The
  image is rolled cyclically by the offset (left and up), its aligned cells permuted, and rolled back: the
  cells of the last row and column wrap around the border (a cell of the last column holds the image's last
  ``cell − offset`` and first ``offset`` columns), so that no cell is clipped and no pixel is lost.

Levels: the occlusion *share* (0 is the identity, 1 blanks the image) and the rearrangement *grid*
(1 is the identity: one cell). Randomness comes from :class:`ImageStreams`, keyed by the probe and its
grid (and offset), never by the share: the cells hidden at 50% include those hidden at 30%; the offset
shuffle draws its own permutations, not the aligned shuffle's.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from study.robustness.settings import check_grid, check_share, divisors  # noqa: F401 (re-exported)
from study.robustness.probes.pixels import check_images
from study.robustness.probes.streams import ImageStreams
from study.core.errors import StudyError

# ⌊share·cells⌋ computed in floating point: 0.29·100 is 28.999999999999996. The tolerance rounds such
# products up to the integer they denote; no real share is within 1e-9 of an integer count below it.
_FLOOR_TOLERANCE = 1e-9


def hidden_count(share: float, cells: int) -> int:
    """⌊share·cells⌋: how many cells an occlusion at ``share`` hides (Naseer et al. 2021)."""
    return min(cells, math.floor(check_share(share) * cells + _FLOOR_TOLERANCE))


def half_cell_offset(image_size: int, grid: int) -> int:
    """The offset, in pixels, of a grid shifted by half a cell (rounded down): 3 px for 4×4 cells of 7 px."""
    return (image_size // grid) // 2


def _check_offset(offset: int, cell_h: int, cell_w: int, probe: str) -> int:
    """``offset`` as an int in [0, the cell's smaller side), or a one-line StudyError."""
    smaller = min(cell_h, cell_w)
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral) or not 0 <= offset < smaller:
        raise StudyError(f"{probe}: offset {offset!r} px must be an integer in [0, {smaller}) for "
                         f"{cell_h}x{cell_w}-px cells; half a cell is {smaller // 2}")
    return int(offset)


def cell_map(height: int, width: int, grid: int, offset: int = 0) -> tuple[Tensor, int]:
    """Which cell each pixel belongs to: ``(cell index per pixel (H, W) int64, number of cells)``.

    ``offset`` = 0: the aligned ``grid``×``grid`` grid, cells numbered in raster order (the ViT's patch
    order). ``0 < offset < cell``: every cell boundary moves ``offset`` px right and down, so there are
    ``grid + 1`` bands per axis; the first band is ``offset`` px wide and the last ``cell − offset`` px
    (the clipped border cells of Naseer et al.'s offset variant).
    """
    cell_h, cell_w = check_grid(height, width, grid, "occlusion")
    offset = _check_offset(offset, cell_h, cell_w, "occlusion")
    extra = 1 if offset else 0  # an offset grid gains a row and a column of clipped cells
    # band(y) = ⌊(y − offset)/cell⌋, + 1 so that the clipped first band (y < offset) is band 0
    rows = torch.div(torch.arange(height) - offset, cell_h, rounding_mode="floor") + extra  # (H,)
    cols = torch.div(torch.arange(width) - offset, cell_w, rounding_mode="floor") + extra  # (W,)
    bands = grid + extra
    return rows[:, None] * bands + cols[None, :], bands * bands  # (H, W), cells


def occlusion(images: Tensor, share: float, seed: int, grid: int, offset: int = 0, start: int = 0) -> Tensor:
    """Set ⌊share·cells⌋ random cells of each image to 0 (black), chosen per image without replacement.

    Args: ``images`` ``(N, H, W, C)`` uint8 or float in [0, 1]; ``share`` in [0, 1]; ``seed`` the recorded
    probe seed; ``grid`` cells per side (it must divide H and W); ``offset`` px by which the grid is
    shifted right and down (0 aligned; see :func:`cell_map`); ``start`` the index of ``images[0]`` in the
    evaluation set, so that streaming in batches gives the same images as one batch.
    Returns a new tensor of the same dtype, layout and device.
    """
    check_images(images, "occlusion")
    count, height, width, _ = images.shape
    cell_of_pixel, cells = cell_map(height, width, grid, offset)  # (H, W), M
    hidden = hidden_count(share, cells)
    if hidden == 0:
        return images.clone()
    # A random ranking of the cells per image; the first `hidden` of it are dropped. Keyed by grid and
    # offset but not by share, so a larger share hides a superset of the cells.
    ranking = ImageStreams(count, seed, ("occlusion", grid, offset), start).randperm(cells)  # (N, M)
    dropped = torch.zeros(count, cells, dtype=torch.bool)  # (N, M)
    dropped.scatter_(1, ranking[:, :hidden], True)
    mask = dropped[:, cell_of_pixel]  # (N, M) indexed by (H, W) -> (N, H, W)
    return images.masked_fill(mask.to(images.device)[..., None], 0)  # (N, H, W, 1) broadcast over C


def cell_permutations(count: int, grid: int, seed: int, start: int = 0, offset: int = 0) -> Tensor:
    """The permutations :func:`rearrangement` applies: ``(count, grid²)`` int64, one uniform draw per image. The
    stream is keyed by the grid and, for an offset grid, by the offset too (the aligned shuffle's key leaves the
    offset out, so its draws do not depend on whether offset grids are scored)."""
    if isinstance(grid, bool) or not isinstance(grid, numbers.Integral) or grid < 1:
        raise StudyError(f"rearrangement: grid {grid!r} must be a positive integer (cells per side)")
    grid = int(grid)
    key = ("rearrangement", grid) if offset == 0 else ("rearrangement", grid, int(offset))
    return ImageStreams(count, seed, key, start).randperm(grid * grid)


def permute_cells(images: Tensor, grid: int, permutation: Tensor, offset: int = 0) -> Tensor:
    """Rearrange the cells of a ``grid``×``grid`` grid: output cell ``j`` is input cell ``permutation[j]``.

    Cells are numbered in raster order, like the ViT's patch tokens. ``permutation`` is ``(grid²,)`` (the
    same for every image) or ``(N, grid²)`` (one per image). ``offset`` > 0 moves every cell boundary that many
    px right and down, cyclically: the image is rolled ``offset`` px left and up, its aligned cells permuted,
    and rolled back, so the cells of the last row and column wrap around the border.
    """
    check_images(images, "rearrangement")
    count, height, width, channels = images.shape
    cell_h, cell_w = check_grid(height, width, grid, "rearrangement")
    offset = _check_offset(offset, cell_h, cell_w, "rearrangement")
    cells = grid * grid
    permutation = torch.as_tensor(permutation, dtype=torch.int64)
    if permutation.ndim == 1:
        permutation = permutation.expand(count, cells)  # (G²,) -> (N, G²)
    if tuple(permutation.shape) != (count, cells) or not torch.equal(
            permutation.sort(dim=1).values, torch.arange(cells).expand(count, cells)):
        raise StudyError(f"rearrangement: permutation of shape {tuple(permutation.shape)} is not a permutation "
                         f"of the {cells} cells for each of {count} images")
    if offset:
        # pixel (y, x) of the rolled image is pixel (y + offset, x + offset) of the image (mod H, W): the rolled
        # image's aligned cells are the offset grid's cells
        images = images.roll((-offset, -offset), dims=(1, 2))  # (N, H, W, C)
    # (N, H, W, C) -> (N, G, ch, G, cw, C) -> (N, G, G, ch, cw, C) -> (N, G², ch, cw, C): cells in raster order
    tiles = images.reshape(count, grid, cell_h, grid, cell_w, channels).permute(0, 1, 3, 2, 4, 5)
    tiles = tiles.reshape(count, cells, cell_h, cell_w, channels)
    rows = torch.arange(count, device=images.device)[:, None]  # (N, 1), broadcast against (N, G²)
    moved = tiles[rows, permutation.to(images.device)]  # (N, G², ch, cw, C): moved[n, j] = tiles[n, perm[n, j]]
    # (N, G², ch, cw, C) -> (N, G, G, ch, cw, C) -> (N, G, ch, G, cw, C) -> (N, H, W, C)
    moved = moved.reshape(count, grid, grid, cell_h, cell_w, channels).permute(0, 1, 3, 2, 4, 5)
    moved = moved.reshape(count, height, width, channels)
    if offset:
        moved = moved.roll((offset, offset), dims=(1, 2))  # back: the cells where the offset grid has them
    return moved.contiguous()


def rearrangement(images: Tensor, grid: int, seed: int, start: int = 0, offset: int = 0) -> Tensor:
    """Permute the cells of a ``grid``×``grid`` grid at random, independently per image (patch shuffle).

    ``grid`` = 1 is the identity. A uniform permutation can leave cells in place (for 2×2, the identity
    itself has probability 1/24), as in Naseer et al.'s protocol. ``start`` as in :func:`occlusion`.
    ``offset`` > 0 shuffles the grid moved that many px right and down, cyclically (:func:`permute_cells`;
    :func:`half_cell_offset` gives half a cell), with permutations of its own (:func:`cell_permutations`).
    """
    check_images(images, "rearrangement")
    cell_h, cell_w = check_grid(images.shape[1], images.shape[2], grid, "rearrangement")
    offset = _check_offset(offset, cell_h, cell_w, "rearrangement")
    if grid == 1:
        return images.clone()
    return permute_cells(images, grid, cell_permutations(images.shape[0], grid, seed, start, offset), offset)
