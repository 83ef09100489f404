"""Robustness probes (study.robustness.probes) checked against answers known by construction.

The images are synthetic and made here: textured ellipses on a black background, like Fashion-MNIST
items (28×28 grey) and centred CIFAR objects (32×32 colour). Known answers: where a shifted pixel lands,
which cells an occlusion zeroes and how many, that a shuffle only moves whole cells, that every level 0
is the identity, that seeds and batching behave, that each corruption grows with its severity, the
settings validation's messages, mCE on a hand-made table, and that the study's ViT cannot tell a
patch-grid shuffle from the same shuffle of its position embeddings.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from study.robustness.probes import (CORRUPTIONS, MNIST_C, SEEDED, cell_map, cell_permutations, check_probe_settings,
                                   corrupt, half_cell_offset, hidden_count, mce, occlusion, permute_cells,
                                   prediction_change, rearrangement, translation)
from study.robustness.probes.corrupt_pixels import stripe_width
from study.robustness.probes import corruption_errors
from study.core.errors import StudyError
from study.models import build_model

DOCS = Path(__file__).resolve().parents[2] / "docs" / "robustness.md"


def items(count: int, side: int, channels: int, seed: int = 0) -> torch.Tensor:
    """uint8 (N, H, W, C): a textured ellipse per image, centred within ±3 px, on black."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:side, 0:side].astype(np.float64)
    images = np.zeros((count, side, side, channels))
    for index in range(count):
        centre = side / 2 - 0.5 + rng.uniform(-3, 3, size=2)
        radii = rng.uniform(0.22, 0.38, size=2) * side
        inside = ((rows - centre[0]) / radii[0]) ** 2 + ((cols - centre[1]) / radii[1]) ** 2 <= 1
        base = rng.uniform(110, 220, size=channels)
        texture = 35 * np.sin(rows * rng.uniform(0.4, 1.2) + cols * rng.uniform(0.2, 0.9))
        noise = rng.uniform(-15, 15, size=(side, side, channels))
        images[index] = inside[..., None] * (base + texture[..., None] + noise)
    return torch.from_numpy(np.clip(images, 0, 255).round().astype(np.uint8))


@pytest.fixture(scope="module")
def grey() -> torch.Tensor:
    return items(12, 28, 1)


@pytest.fixture(scope="module")
def colour() -> torch.Tensor:
    return items(12, 32, 3, seed=1)


def mean_change(before: torch.Tensor, after: torch.Tensor) -> float:
    return (after.float() - before.float()).abs().mean().item()


# --------------------------------------------------------------------------------------------------
# Translation and prediction change
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dx, dy", [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-2, 3)])
def test_a_shift_moves_a_pixel_and_fills_with_zeros(dx, dy):
    image = torch.zeros(1, 28, 28, 3, dtype=torch.uint8)
    image[0, 5, 7] = torch.tensor([10, 20, 30], dtype=torch.uint8)
    shifted = translation(image, dx, dy)
    expected = torch.zeros_like(image)
    expected[0, 5 + dy, 7 + dx] = image[0, 5, 7]
    assert torch.equal(shifted, expected)
    # a full image shifted right by 1: its first column is now black, the rest is the old image
    full = torch.full((2, 28, 28, 1), 0.5)
    moved = translation(full, 1, 0)
    assert moved.dtype == full.dtype and torch.all(moved[:, :, 0] == 0) and torch.all(moved[:, :, 1:] == 0.5)


def test_shift_of_zero_is_the_identity_and_of_a_side_blanks(grey):
    assert torch.equal(translation(grey, 0, 0), grey)
    assert not translation(grey, 28, 0).any() and not translation(grey, 0, -30).any()
    with pytest.raises(StudyError, match="whole number"):
        translation(grey, 1.5, 0)


def test_prediction_change_is_the_share_of_changed_predictions():
    assert prediction_change(np.array([0, 1, 2, 3]), np.array([0, 1, 5, 3])) == 0.25
    assert prediction_change(torch.tensor([4, 4]), torch.tensor([4, 4])) == 0.0
    with pytest.raises(StudyError, match="same length"):
        prediction_change([0, 1], [0, 1, 2])


# --------------------------------------------------------------------------------------------------
# Occlusion
# --------------------------------------------------------------------------------------------------


def cell_states(original: torch.Tensor, occluded: torch.Tensor, grid: int, offset: int) -> list[list[str]]:
    """Per image and cell: 'zero' (all pixels 0), 'kept' (equal to the original) or 'mixed'."""
    cells_of_pixel, cells = cell_map(original.shape[1], original.shape[2], grid, offset)
    states = []
    for before, after in zip(original, occluded):
        row = []
        for cell in range(cells):
            where = cells_of_pixel == cell
            if torch.all(after[where] == 0):
                row.append("zero")
            elif torch.equal(after[where], before[where]):
                row.append("kept")
            else:
                row.append("mixed")
        states.append(row)
    return states


@pytest.mark.parametrize("grid, share", [(7, 0.5), (4, 0.3), (14, 0.29), (2, 1.0), (28, 0.1)])
def test_occlusion_zeroes_whole_cells_and_keeps_every_other_pixel(grid, share):
    images = torch.randint(1, 256, (6, 28, 28, 1), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    occluded = occlusion(images, share, seed=3, grid=grid)
    states = cell_states(images, occluded, grid, 0)
    for row in states:
        assert "mixed" not in row
        assert row.count("zero") == int(np.floor(share * grid * grid + 1e-9))
    assert occluded.dtype == images.dtype and occluded.shape == images.shape


def test_hidden_count_is_the_floor_of_share_times_cells():
    assert hidden_count(0.29, 100) == 29  # 0.29·100 is 28.999999999999996 in floating point
    assert [hidden_count(share, 49) for share in (0.0, 0.1, 0.5, 0.9, 1.0)] == [0, 4, 24, 44, 49]


def test_an_offset_grid_has_clipped_border_cells_and_zeroes_them():
    assert half_cell_offset(28, 4) == 3
    cells_of_pixel, cells = cell_map(28, 28, 4, offset=3)
    assert cells == 25
    band_widths = torch.bincount(cells_of_pixel[0] - cells_of_pixel[0, 0])  # first row: cells 0..4
    assert band_widths.tolist() == [3, 7, 7, 7, 4]  # 3-px and (7 − 3)-px clipped bands at the borders
    images = torch.full((8, 28, 28, 1), 200, dtype=torch.uint8)
    occluded = occlusion(images, 0.6, seed=0, grid=4, offset=3)
    states = cell_states(images, occluded, 4, 3)
    areas = torch.bincount(cells_of_pixel.flatten(), minlength=cells)  # pixels per cell
    clipped_zeroed = 0
    for row, image in zip(states, occluded):
        assert "mixed" not in row and row.count("zero") == 15  # ⌊0.6 · 25⌋
        zeroed = [cell for cell, state in enumerate(row) if state == "zero"]
        assert int((image == 0).sum()) == int(areas[zeroed].sum())
        clipped_zeroed += sum(int(areas[cell]) < 49 for cell in zeroed)
    assert clipped_zeroed > 0
    assert not occlusion(images, 1.0, seed=0, grid=4, offset=3).any()  # every cell, clipped ones included


def test_larger_shares_hide_a_superset_of_the_cells(grey):
    less = occlusion(grey, 0.3, seed=5, grid=7) == 0
    more = occlusion(grey, 0.6, seed=5, grid=7) == 0
    assert torch.all(more | ~less)  # every pixel zero at 30% is zero at 60%


def test_occlusion_of_float_images_matches_uint8(grey):
    as_float = grey.float() / 255
    occluded = occlusion(as_float, 0.5, seed=1, grid=7)
    assert occluded.dtype == torch.float32
    assert torch.equal(occluded == 0, occlusion(grey, 0.5, seed=1, grid=7) == 0)


def test_occlusion_rejects_impossible_settings(grey):
    with pytest.raises(StudyError, match="does not divide"):
        occlusion(grey, 0.5, seed=0, grid=5)
    with pytest.raises(StudyError, match=r"outside \[0, 1\]"):
        occlusion(grey, 1.5, seed=0, grid=7)
    with pytest.raises(StudyError, match="offset"):
        occlusion(grey, 0.5, seed=0, grid=7, offset=4)
    with pytest.raises(StudyError, match="before normalisation"):
        occlusion(grey.float() / 255 - 0.5, 0.5, seed=0, grid=7)


# --------------------------------------------------------------------------------------------------
# Rearrangement
# --------------------------------------------------------------------------------------------------


def test_permute_cells_known_answer():
    image = torch.arange(16, dtype=torch.uint8).reshape(1, 4, 4, 1)  # cells of a 2×2 grid: [[0,1],[4,5]], ...
    swapped = permute_cells(image, 2, torch.tensor([3, 2, 1, 0]))  # output cell j = input cell 3 − j
    expected = torch.tensor([[10, 11, 8, 9], [14, 15, 12, 13], [2, 3, 0, 1], [6, 7, 4, 5]], dtype=torch.uint8)
    assert torch.equal(swapped[0, :, :, 0], expected)
    with pytest.raises(StudyError, match="not a permutation"):
        permute_cells(image, 2, torch.tensor([0, 0, 1, 2]))


@pytest.mark.parametrize("grid", [2, 4, 7, 14])
def test_shuffle_moves_whole_cells_and_keeps_the_pixel_multiset(colour, grid):
    images = colour[:, :28, :28]  # 28 px, so that 7 and 14 divide it too
    shuffled = rearrangement(images, grid, seed=2)
    permutations = cell_permutations(len(images), grid, seed=2)
    cell = 28 // grid
    for image, result, permutation in zip(images, shuffled, permutations):
        assert sorted(permutation.tolist()) == list(range(grid * grid))
        assert torch.equal(result.flatten().sort().values, image.flatten().sort().values)
        for target, source in enumerate(permutation.tolist()):
            out_row, out_col = divmod(target, grid)
            in_row, in_col = divmod(source, grid)
            assert torch.equal(result[out_row * cell:(out_row + 1) * cell, out_col * cell:(out_col + 1) * cell],
                               image[in_row * cell:(in_row + 1) * cell, in_col * cell:(in_col + 1) * cell])
    assert not torch.equal(shuffled, images)


def intact_share(images: torch.Tensor, probed: torch.Tensor, cell: int) -> float:
    """Share of the aligned ``cell``×``cell`` cells of ``probed`` that are, byte for byte, a cell of ``images``."""
    def cells(batch):
        corners = [(r, c) for r in range(0, batch.shape[1], cell) for c in range(0, batch.shape[2], cell)]
        return [batch[n, r:r + cell, c:c + cell].numpy().tobytes() for n in range(len(batch)) for r, c in corners]
    before = set(cells(images))
    after = cells(probed)
    return sum(found in before for found in after) / len(after)


def test_the_offset_shuffle_permutes_the_pixels_and_breaks_every_patch():
    # Distinct pixel values, so that a cell's bytes say where it came from: a float ramp in [0, 1), four ways.
    ramp = (torch.arange(28 * 28, dtype=torch.float32) / (28 * 28)).reshape(1, 28, 28, 1)
    images = torch.cat([ramp, ramp.flip(1), ramp.flip(2), ramp.transpose(1, 2)] * 5)  # (20, 28, 28, 1)
    offset = half_cell_offset(28, 7)
    assert offset == 2  # half of the patch-4 ViT's 4-px cells
    shuffled = rearrangement(images, 7, seed=3, offset=offset)
    for image, result in zip(images, shuffled):  # a permutation of the pixels: the same multiset
        assert torch.equal(result.flatten().sort().values, image.flatten().sort().values)
    # The aligned 7x7 shuffle moves every 4x4 patch intact; the offset one cuts each patch across four cells, so
    # an output patch is an input patch only where chance keeps four neighbouring cells together (of 980 here).
    assert intact_share(images, rearrangement(images, 7, seed=3), 4) == 1.0
    assert intact_share(images, shuffled, 4) < 0.02


def test_the_offset_shuffle_is_the_aligned_shuffle_of_the_rolled_image_rolled_back(grey):
    permutation = torch.randperm(49, generator=torch.Generator().manual_seed(4))  # one fixed permutation
    offset = half_cell_offset(28, 7)
    expected = permute_cells(grey.roll((-offset, -offset), dims=(1, 2)), 7, permutation).roll((offset, offset),
                                                                                              dims=(1, 2))
    assert torch.equal(permute_cells(grey, 7, permutation, offset=offset), expected)
    # The probe applies the offset stream's permutations, not the aligned shuffle's.
    drawn = cell_permutations(len(grey), 7, seed=5, offset=offset)
    assert not torch.equal(drawn, cell_permutations(len(grey), 7, seed=5))
    expected = torch.stack([permute_cells(image[None], 7, perm, offset=offset)[0] for image, perm in zip(grey, drawn)])
    assert torch.equal(rearrangement(grey, 7, seed=5, offset=offset), expected)


def test_offset_cells_wrap_around_the_border_known_answer():
    # 4x4 image, 2x2 grid moved 1 px: the cells are rows/columns {1, 2} and {3, 0} (wrapping). Swapping the two
    # cells of the middle rows (0 and 1) rolls those rows by 2 px; rows 0 and 3 keep their pixels.
    image = torch.arange(16, dtype=torch.uint8).reshape(1, 4, 4, 1)
    swapped = permute_cells(image, 2, torch.tensor([1, 0, 2, 3]), offset=1)
    expected = torch.tensor([[0, 1, 2, 3], [6, 7, 4, 5], [10, 11, 8, 9], [12, 13, 14, 15]], dtype=torch.uint8)
    assert torch.equal(swapped[0, :, :, 0], expected)
    with pytest.raises(StudyError, match="offset 2 px must be an integer in \\[0, 2\\) for 2x2-px cells"):
        rearrangement(image, 2, seed=0, offset=2)


# --------------------------------------------------------------------------------------------------
# Identity, seeds, batching: every probe
# --------------------------------------------------------------------------------------------------


def test_level_zero_is_the_identity_for_every_probe(grey, colour):
    for images in (grey, colour, colour.float() / 255):
        assert torch.equal(occlusion(images, 0.0, seed=0, grid=4), images)
        assert torch.equal(occlusion(images, 0.0, seed=0, grid=4, offset=2), images)
        assert torch.equal(rearrangement(images, 1, seed=0), images)
        assert torch.equal(translation(images, 0, 0), images)
        for name in CORRUPTIONS:
            assert torch.equal(corrupt(images, name, 0, seed=0), images), name


SEEDED_PROBES = {
    "occlusion": lambda images, seed, start=0: occlusion(images, 0.4, seed, grid=4, start=start),
    "occlusion offset": lambda images, seed, start=0: occlusion(images, 0.4, seed, grid=4, offset=2, start=start),
    "rearrangement": lambda images, seed, start=0: rearrangement(images, 4, seed, start=start),
    "rearrangement offset": lambda images, seed, start=0: rearrangement(images, 4, seed, start=start, offset=4),
    **{f"corruption {name}": (lambda images, seed, start=0, name=name: corrupt(images, name, 3, seed, start))
       for name in CORRUPTIONS},
}


@pytest.mark.parametrize("probe", list(SEEDED_PROBES))
def test_same_seed_same_images_and_batches_do_not_matter(colour, probe):
    apply = SEEDED_PROBES[probe]
    whole = apply(colour, 11)
    assert torch.equal(apply(colour, 11), whole)
    halves = torch.cat([apply(colour[:5], 11, start=0), apply(colour[5:], 11, start=5)])
    assert torch.equal(halves, whole)
    name = probe.removeprefix("corruption ")
    if name in CORRUPTIONS and name not in SEEDED:
        assert torch.equal(apply(colour, 12), whole)  # a fixed function of the image
    else:
        assert not torch.equal(apply(colour, 12), whole)


def test_seeded_lists_exactly_the_corruptions_that_use_randomness():
    assert SEEDED <= set(CORRUPTIONS)
    assert {"stripe", "brightness", "contrast", "scale", "canny_edges", "gaussian_blur"}.isdisjoint(SEEDED)


# --------------------------------------------------------------------------------------------------
# Corruptions
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CORRUPTIONS))
@pytest.mark.parametrize("kind", ["grey", "colour"])
def test_corruption_keeps_format_changes_the_image_and_grows_with_severity(request, name, kind):
    images = request.getfixturevalue(kind)
    changes = []
    for severity in range(6):
        corrupted = corrupt(images, name, severity, seed=0)
        assert corrupted.dtype == torch.uint8 and corrupted.shape == images.shape
        changes.append(mean_change(images, corrupted))
        if severity:
            assert not torch.equal(corrupted, images)
    assert changes[0] == 0 and all(b >= a for a, b in zip(changes, changes[1:])), changes
    as_float = corrupt(images.float() / 255, name, 3, seed=0)
    assert as_float.dtype == torch.float32 and as_float.min() >= 0 and as_float.max() <= 1
    # the float path is the uint8 path before rounding
    assert (as_float * 255 - corrupt(images, name, 3, seed=0).float()).abs().max() <= 0.5 + 1e-3


def test_stripe_inverts_the_outer_column_bands(grey):
    assert [stripe_width(28, severity) for severity in range(1, 6)] == [1, 3, 4, 6, 7]  # 7 + 7 is MNIST-C
    striped = corrupt(grey, "stripe", 5, seed=0)
    assert torch.equal(striped[:, :, :7], 255 - grey[:, :, :7])
    assert torch.equal(striped[:, :, 21:], 255 - grey[:, :, 21:])
    assert torch.equal(striped[:, :, 7:21], grey[:, :, 7:21])


def test_brightness_of_grey_images_adds_a_constant(grey):
    lifted = corrupt(grey, "brightness", 1, seed=0).int()
    assert (lifted - (grey.int() + 25.5).clamp(max=255)).abs().max() <= 1


def test_translate_is_an_exact_shift_in_a_random_direction(grey):
    moved = corrupt(grey, "translate", 2, seed=4)
    for image, result in zip(grey, moved):
        candidates = [translation(image[None], dx, dy)[0] for dx in (-2, 2) for dy in (-2, 2)]
        assert any(torch.equal(result, candidate) for candidate in candidates)


def test_corrupt_rejects_unknown_names_and_severities(grey):
    with pytest.raises(StudyError, match="unknown corruption 'frost'; choose from shot_noise, ") as error:
        corrupt(grey, "frost", 1, seed=0)
    assert "\n" not in str(error.value) and all(name in str(error.value) for name in CORRUPTIONS)
    for severity in (6, -1, 2.5, True):
        with pytest.raises(StudyError, match="out of range"):
            corrupt(grey, "fog", severity, seed=0)
    with pytest.raises(StudyError, match="non-negative integer"):
        corrupt(grey, "fog", 1, seed=-1)


def test_the_suite_is_mnist_c_plus_three_and_every_corruption_is_documented():
    assert MNIST_C == ("shot_noise", "impulse_noise", "glass_blur", "motion_blur", "shear", "scale", "rotate",
                       "brightness", "translate", "stripe", "fog", "spatter", "dotted_line", "zigzag",
                       "canny_edges")
    assert set(CORRUPTIONS) - set(MNIST_C) == {"gaussian_noise", "gaussian_blur", "contrast"}
    text = DOCS.read_text()
    assert all(f"`{name}`" in text for name in CORRUPTIONS)


# --------------------------------------------------------------------------------------------------
# Settings validation
# --------------------------------------------------------------------------------------------------


def test_good_settings_pass():
    check_probe_settings(28, [1, 2, 4, 7, 14, 28], [0, 0.5, 0.9, 1], list(CORRUPTIONS), [0, 1, 5], shifts=[0, 1, 4])
    check_probe_settings(32, [2, 4, 8], np.linspace(0, 0.9, 10), MNIST_C, range(1, 6))


@pytest.mark.parametrize("settings, message", [
    (dict(grids=[5]), "a 5x5 grid does not divide the 28x28 image; choose a grid that divides 28: 1, 2, 4, 7, 14, 28"),
    (dict(grids=[0]), "grid 0 must be a positive integer"),
    (dict(shares=[1.2]), r"share 1.2 is outside \[0, 1\]"),
    (dict(shares=[-0.1]), r"share -0.1 is outside \[0, 1\]"),
    (dict(shares=[float("nan")]), r"share nan is outside \[0, 1\]"),
    (dict(corruptions=["snow"]), "unknown corruption 'snow'; choose from shot_noise"),
    (dict(severities=[6]), "severity 6 is out of range; use integers 1 to 5"),
    (dict(shifts=[28]), r"shift 28 must be a whole number of pixels in \[0, 28\)"),
])
def test_bad_settings_fail_with_one_line_naming_the_fix(settings, message):
    arguments = dict(image_size=28, grids=[4, 7], shares=[0.5], corruptions=["fog"], severities=[3])
    with pytest.raises(StudyError, match=message) as error:
        check_probe_settings(**{**arguments, **settings})
    assert "\n" not in str(error.value)


# --------------------------------------------------------------------------------------------------
# Mean corruption error
# --------------------------------------------------------------------------------------------------


def error_table() -> pd.DataFrame:
    """Two models, two corruptions, two severities, clean errors as severity 0."""
    rows = [("resnet", "clean", 0, 0.05), ("resnet", "fog", 1, 0.1), ("resnet", "fog", 2, 0.3),
            ("resnet", "stripe", 1, 0.2), ("resnet", "stripe", 2, 0.2),
            ("vit", "clean", 0, 0.1), ("vit", "fog", 1, 0.2), ("vit", "fog", 2, 0.4),
            ("vit", "stripe", 1, 0.1), ("vit", "stripe", 2, 0.1)]
    return pd.DataFrame(rows, columns=["model", "corruption", "severity", "error"])


def test_mce_on_a_hand_made_table():
    table = error_table()
    ce = corruption_errors(table, "resnet").set_index(["model", "corruption"])["ce"]
    assert ce["vit", "fog"] == pytest.approx(0.6 / 0.4) and ce["vit", "stripe"] == pytest.approx(0.2 / 0.4)
    scores = mce(table, "resnet").set_index("model")["mce"]
    assert scores["resnet"] == pytest.approx(1.0) and scores["vit"] == pytest.approx(1.0)  # (1.5 + 0.5) / 2
    # relative: fog (0.1 + 0.3) / (0.05 + 0.25), stripe 0 / 0.3
    relative = mce(table, "resnet", relative=True).set_index("model")["relative_mce"]
    assert relative["vit"] == pytest.approx((4 / 3 + 0) / 2) and relative["resnet"] == pytest.approx(1.0)


def test_mce_pairs_the_baseline_within_groups():
    first, second = error_table().assign(seed=0), error_table().assign(seed=1)
    second.loc[second["model"] == "vit", "error"] *= 2  # vit's errors double for seed 1
    scores = mce(pd.concat([first, second]), "resnet", by=["seed"]).set_index(["seed", "model"])["mce"]
    assert scores[0, "vit"] == pytest.approx(1.0) and scores[1, "vit"] == pytest.approx(2.0)
    with pytest.raises(StudyError, match="several rows"):
        mce(pd.concat([first, second]), "resnet")


def test_mce_errors_name_the_problem():
    table = error_table()
    with pytest.raises(StudyError, match="baseline 'alexnet' is not in the table"):
        mce(table, "alexnet")
    with pytest.raises(StudyError, match="has no fog severity 2"):
        mce(table.drop(index=2), "resnet")  # the baseline lacks fog 2
    with pytest.raises(StudyError, match="model vit has no stripe severity 2"):
        mce(table.drop(index=9), "resnet")
    with pytest.raises(StudyError, match="clean error"):
        mce(table[table["severity"] > 0], "resnet", relative=True)


# --------------------------------------------------------------------------------------------------
# The ViT and a patch-grid shuffle
# --------------------------------------------------------------------------------------------------


def test_vit_is_invariant_to_a_patch_shuffle_with_its_position_embeddings_shuffled_alike(grey):
    torch.manual_seed(0)
    model = build_model("vit", 10, 28, 1, patch_size=7, embed_dim=32, depth=2, num_heads=2).eval()
    with torch.no_grad():
        # At timm's initialisation (weights of sd 0.02) attention is nearly uniform, so the class token reads
        # a near-mean of the tokens, which no permutation changes: the test would pass without position
        # embeddings mattering. Larger weights make attention, and so the order of positions, count.
        model.pos_embed.normal_(std=1.0)
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(std=0.2)
    images = grey.permute(0, 3, 1, 2).float() / 255  # (N, 1, 28, 28); normalisation commutes with a shuffle
    permutation = torch.randperm(16, generator=torch.Generator().manual_seed(1))  # the 4×4 patch grid
    shuffled = permute_cells(grey, 4, permutation).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():
        clean = model(images)
        shuffled_only = model(shuffled)
        # token 0 is the class token and keeps its embedding; patch token j now shows cell permutation[j]
        order = torch.cat([torch.zeros(1, dtype=torch.long), permutation + 1])
        model.pos_embed.copy_(model.pos_embed[:, order])
        both = model(shuffled)
    torch.testing.assert_close(both, clean, atol=1e-5, rtol=0)
    assert (shuffled_only - clean).abs().max() > 0.1  # without the matching shuffle of positions, logits move
