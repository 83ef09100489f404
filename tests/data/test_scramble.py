"""The ``scrambled`` condition (study/data/scramble.py): its permutations, and a ViT's exact invariance to it.

The invariance is the reason the condition exists: a ViT with its patch-embedding and position-embedding
weights permuted (``permute_vit_for``) computes on scrambled images exactly what the original computes on
natural ones, while a ResNet has no such map. Quick tier: tiny models, a handful of 28×28 images, float64.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from study.data.scramble import Scramble, draw_scramble, permute_vit_for, scramble_images, unscramble_images
from study.core.errors import StudyError
from study.models import build_model

SIDE, CELL = 28, 4  # Fashion-MNIST's side and the study's patch size: a 7×7 grid of 16-pixel cells
VIT = dict(patch_size=CELL, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0)


def images(count: int = 6, channels: int = 1, seed: int = 0) -> np.ndarray:
    """Random uint8 images (N, H, W, C), the loaders' convention."""
    return np.random.default_rng(seed).integers(0, 256, size=(count, SIDE, SIDE, channels), dtype=np.uint8)


def to_input(batch: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, C) -> float64 (N, C, H, W) on the 0-1 scale, as the models take it."""
    return torch.from_numpy(batch).permute(0, 3, 1, 2).double() / 255.0


def logits(model: torch.nn.Module, batch: np.ndarray) -> torch.Tensor:
    with torch.no_grad():
        return model(to_input(batch))


def eval_model(name: str, **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(name, 10, SIDE, 1, **overrides).double().eval()


def identity(size: int) -> np.ndarray:
    return np.arange(size)


# --- the permutations ---------------------------------------------------------------------------------

def test_permutations_are_fixed_by_the_seed_and_differ_across_seeds():
    first, again, other = draw_scramble(SIDE, SIDE, CELL, 7), draw_scramble(SIDE, SIDE, CELL, 7), \
        draw_scramble(SIDE, SIDE, CELL, 8)
    assert first.grid == (7, 7) and first.cells.shape == (49,) and first.pixels.shape == (16,)
    for name in ("cells", "pixels"):
        assert np.array_equal(getattr(first, name), getattr(again, name))
        assert not np.array_equal(getattr(first, name), getattr(other, name))
    # the documented draw order: cells first, then pixels, from one default_rng(seed)
    rng = np.random.default_rng(7)
    assert np.array_equal(first.cells, rng.permutation(49)) and np.array_equal(first.pixels, rng.permutation(16))
    assert np.array_equal(scramble_images(images(), first), scramble_images(images(), again))


def test_the_record_holds_both_permutations_and_they_cannot_change():
    scramble = draw_scramble(SIDE, SIDE, CELL, 3)
    record = scramble.to_dict()
    assert record == {"condition": "scrambled", "cell": CELL, "grid": [7, 7], "seed": 3,
                      "cells": scramble.cells.tolist(), "pixels": scramble.pixels.tolist()}
    with pytest.raises(ValueError):
        scramble.cells[0] = scramble.cells[1]  # read-only: a recorded permutation cannot drift


@pytest.mark.parametrize("channels", [1, 3])
def test_unscramble_inverts_scramble_and_scramble_moves_pixels(channels):
    scramble = draw_scramble(SIDE, SIDE, CELL, 0)
    natural = images(channels=channels)
    scrambled = scramble_images(natural, scramble)
    assert scrambled.shape == natural.shape and scrambled.dtype == np.uint8
    assert not np.array_equal(scrambled, natural)
    assert np.array_equal(unscramble_images(scrambled, scramble), natural)
    assert np.array_equal(scramble_images(unscramble_images(natural, scramble), scramble), natural)


def test_the_gather_convention_on_a_labelled_image():
    """Scrambled cell g holds natural cell cells[g]; its pixel k holds that cell's natural pixel pixels[k]."""
    scramble = draw_scramble(8, 12, CELL, 1)  # a 2×3 grid: rectangles work too
    natural = np.arange(8 * 12).reshape(1, 8, 12, 1)  # every pixel labelled by its raster index
    scrambled = scramble_images(natural, scramble)
    for g, source in enumerate(scramble.cells):
        for k, pixel in enumerate(scramble.pixels):
            (row, col), (src_row, src_col) = divmod(g, 3), divmod(int(source), 3)
            (i, j), (src_i, src_j) = divmod(k, CELL), divmod(int(pixel), CELL)
            assert scrambled[0, row * CELL + i, col * CELL + j, 0] == \
                natural[0, src_row * CELL + src_i, src_col * CELL + src_j, 0]


@pytest.mark.parametrize("part", ["cells", "pixels"])
def test_each_part_alone_keeps_every_images_pixel_values(part):
    drawn = draw_scramble(SIDE, SIDE, CELL, 0)
    keep = {"cells": identity(49), "pixels": identity(16)}
    alone = Scramble(cell=CELL, grid=drawn.grid, seed=0, **{**keep, part: getattr(drawn, part)})
    natural = images(channels=3)
    scrambled = scramble_images(natural, alone)
    assert not np.array_equal(scrambled, natural)
    for before, after in zip(natural, scrambled):
        assert np.array_equal(np.sort(before, axis=None), np.sort(after, axis=None))  # same multiset per image
        # and per channel: a pixel's channels move together, so normalisation statistics are unchanged
        assert np.array_equal(np.sort(before.reshape(-1, 3), axis=0), np.sort(after.reshape(-1, 3), axis=0))


def test_a_cell_that_does_not_divide_the_image_is_refused_in_one_line():
    for cell in (5, 0):
        with pytest.raises(StudyError, match="does not divide the 28x28 images") as error:
            draw_scramble(SIDE, SIDE, cell, 0)
        assert "\n" not in str(error.value) and "divisor" in str(error.value)
    with pytest.raises(StudyError, match="do not fit"):
        scramble_images(np.zeros((1, 32, 32, 3), np.uint8), draw_scramble(SIDE, SIDE, CELL, 0))
    with pytest.raises(StudyError, match="not a permutation"):
        Scramble(cell=CELL, grid=(7, 7), seed=0, cells=np.zeros(49, np.int64), pixels=identity(16))


# --- invariance: the ViT has an exact weight map, the ResNet does not ---------------------------------

@pytest.mark.parametrize("name, global_pool", [("vit", "token"), ("vit", "avg"), ("deit", "token")])
def test_a_permuted_vit_on_scrambled_images_computes_the_original_on_natural_ones(name, global_pool):
    scramble = draw_scramble(SIDE, SIDE, CELL, 0)
    vit = eval_model(name, global_pool=global_pool, **VIT)
    permuted = permute_vit_for(scramble, vit).eval()
    natural, scrambled = images(), scramble_images(images(), scramble)

    expected = logits(vit, natural)
    # float64: measured error ~2e-16 (float32: ~1e-7), against logits that vary by ~2e-2 across images
    torch.testing.assert_close(logits(permuted, scrambled), expected, rtol=0, atol=1e-5)
    # not vacuous: the logits vary across images, and the unpermuted ViT does see the scramble
    assert (expected - expected.mean(dim=0)).abs().max() > 1e-3
    assert (logits(vit, scrambled) - expected).abs().max() > 1e-3
    # the copy is independent: the original's weights are untouched
    assert not torch.equal(permuted.pos_embed, vit.pos_embed)
    assert torch.equal(permute_vit_for(scramble, vit).pos_embed, permuted.pos_embed)


def test_a_resnet_is_not_invariant_to_the_scramble():
    scramble = draw_scramble(SIDE, SIDE, CELL, 0)
    resnet = eval_model("resnet8", width=24, stem_stride=2)
    natural = logits(resnet, images())
    assert (natural - natural.mean(dim=0)).abs().max() > 1e-3  # it does tell these images apart
    assert (logits(resnet, scramble_images(images(), scramble)) - natural).abs().max() > 1e-3


def test_the_weight_map_refuses_a_mismatched_scramble_or_model():
    vit = eval_model("vit", **VIT)
    with pytest.raises(StudyError, match="patch"):
        permute_vit_for(draw_scramble(SIDE, SIDE, 7, 0), vit)
    with pytest.raises(StudyError, match="'vit' or 'deit'"):
        permute_vit_for(draw_scramble(SIDE, SIDE, CELL, 0), eval_model("resnet8", width=8))


def test_a_vit_without_position_embedding_needs_only_its_patch_kernel_permuted():
    """Without a position embedding the tokens carry no position, so permuting the patch-embedding kernel's pixels
    alone maps the scrambled images onto the natural ones (the cells' order does not matter to the model)."""
    scramble = draw_scramble(SIDE, SIDE, CELL, 0)
    vit = eval_model("vit", pos_embed="none", **VIT)
    permuted = permute_vit_for(scramble, vit).eval()
    natural, scrambled = images(), scramble_images(images(), scramble)
    assert permuted.pos_embed is None
    torch.testing.assert_close(logits(permuted, scrambled), logits(vit, natural), rtol=0, atol=1e-5)
