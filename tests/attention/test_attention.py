"""Attention rollout and mean attention distance checked against direct computations written here."""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from study.attention.maps import (
    attention_rollout,
    cls_attention_maps,
    cls_rollout_map,
    mean_attention_distance,
    patch_distances,
    uniform_attention_distance,
)
from study.attention.figures import attention_distance_plot, attention_maps_figure, attention_maps_frame
from study.outputs.figure_style import model_colour, save_figure
from study.core.errors import StudyError


def random_attention(generator: torch.Generator, batch: int, heads: int, tokens: int) -> torch.Tensor:
    logits = 2.0 * torch.randn(batch, heads, tokens, tokens, generator=generator, dtype=torch.float64)
    return logits.softmax(dim=-1)


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def direct_rollout(layers: list[np.ndarray], fuse) -> np.ndarray:
    """Rollout of one image with numpy and explicit per-row normalisation, Â_L ⋯ Â_1."""
    residuals = []
    for attn in layers:  # attn: (heads, T, T)
        fused = fuse(attn, axis=0)
        a_hat = 0.5 * fused + 0.5 * np.eye(len(fused))
        for i in range(len(a_hat)):
            a_hat[i] = a_hat[i] / a_hat[i].sum()
        residuals.append(a_hat)
    return functools.reduce(lambda acc, a_hat: a_hat @ acc, residuals)


# ---------------------------------------------------------------------------------------------------
# Rollout
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fusion, fuse", [("mean", np.mean), ("max", np.max), ("min", np.min)])
def test_rollout_matches_direct_product_and_rows_sum_to_one(generator, fusion, fuse):
    layers = [random_attention(generator, 2, 3, 6) for _ in range(4)]
    rollout = attention_rollout(layers, head_fusion=fusion)
    assert rollout.shape == (2, 6, 6)
    torch.testing.assert_close(rollout.sum(-1), torch.ones(2, 6, dtype=torch.float64))
    for b in range(2):
        expected = direct_rollout([layer[b].numpy() for layer in layers], fuse)
        np.testing.assert_allclose(rollout[b].numpy(), expected, atol=1e-12)


def test_rollout_multiplies_later_layers_on_the_left(generator):
    first, second = random_attention(generator, 1, 1, 5), random_attention(generator, 1, 1, 5)
    step = lambda a: 0.5 * a[0, 0] + 0.5 * torch.eye(5, dtype=torch.float64)  # rows already sum to 1
    rollout = attention_rollout([first, second])[0]
    torch.testing.assert_close(rollout, step(second) @ step(first))
    assert not torch.allclose(rollout, step(first) @ step(second))


def test_rollout_of_identity_attention_is_identity():
    eye = torch.eye(7).expand(3, 4, 7, 7)  # (B, heads, T, T)
    torch.testing.assert_close(attention_rollout([eye] * 5), torch.eye(7).expand(3, 7, 7))


def test_head_fusion_modes_on_a_hand_example():
    # Two heads, two tokens: head 0 attends to itself, head 1 to the other token.
    attn = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]]])  # (1, 2, 2, 2)
    mean = attention_rollout([attn], "mean")[0]  # fused = all 0.5 -> Â = [[.75, .25], [.25, .75]]
    torch.testing.assert_close(mean, torch.tensor([[0.75, 0.25], [0.25, 0.75]]))
    maxed = attention_rollout([attn], "max")[0]  # fused = ones -> 0.5·1 + 0.5·I -> rows [1, .5]/1.5
    torch.testing.assert_close(maxed, torch.tensor([[2 / 3, 1 / 3], [1 / 3, 2 / 3]]))
    minned = attention_rollout([attn], "min")[0]  # fused = zeros -> identity
    torch.testing.assert_close(minned, torch.eye(2))


def test_discard_ratio_zeroes_lowest_non_class_weights_per_row():
    # One head, T = 5; ratio 0.5 discards floor(0.5·4) = 2 of the columns 1..4 in every row.
    row = torch.tensor([0.01, 0.30, 0.05, 0.40, 0.24])  # class column is the smallest but is kept
    attn = row.expand(1, 1, 5, 5).clone()
    rollout = attention_rollout([attn], discard_ratio=0.5)[0]
    kept = torch.tensor([0.01, 0.30, 0.0, 0.40, 0.0])
    for i in range(5):
        expected = 0.5 * kept + 0.5 * torch.eye(5)[i]
        torch.testing.assert_close(rollout[i], expected / expected.sum())
    torch.testing.assert_close(attention_rollout([attn], discard_ratio=0.0), attention_rollout([attn]))


def test_rollout_keeps_input_dtype_and_rejects_bad_input(generator):
    layers = [random_attention(generator, 1, 2, 5).float() for _ in range(2)]
    assert attention_rollout(layers).dtype == torch.float32
    with pytest.raises(StudyError, match="head_fusion"):
        attention_rollout(layers, head_fusion="sum")
    with pytest.raises(StudyError, match="at least one"):
        attention_rollout([])
    with pytest.raises(StudyError, match="discard_ratio"):
        attention_rollout(layers, discard_ratio=1.0)
    with pytest.raises(StudyError, match="layer 1"):
        attention_rollout([layers[0], layers[1][:, :, :4, :4]])


def test_cls_maps_read_prefix_rows_in_row_major_order(generator):
    # DeiT layout: 2 prefix tokens + a 2×3 grid = 8 tokens.
    rollout = attention_rollout([random_attention(generator, 2, 3, 8)])
    cls_map = cls_rollout_map(rollout, num_prefix_tokens=2, grid_size=(2, 3))
    dist_map = cls_rollout_map(rollout, num_prefix_tokens=2, grid_size=(2, 3), token_index=1)
    assert cls_map.shape == (2, 2, 3)
    for r, c in itertools.product(range(2), range(3)):
        assert cls_map[1, r, c] == rollout[1, 0, 2 + 3 * r + c]
        assert dist_map[1, r, c] == rollout[1, 1, 2 + 3 * r + c]
    attn = random_attention(generator, 2, 3, 8)
    heads = cls_attention_maps(attn, num_prefix_tokens=2, grid_size=(2, 3))
    assert heads.shape == (2, 3, 2, 3) and heads[1, 2, 1, 0] == attn[1, 2, 0, 2 + 3]
    with pytest.raises(StudyError, match="prefix"):
        cls_rollout_map(rollout, num_prefix_tokens=1, grid_size=(2, 3))
    with pytest.raises(StudyError, match="token_index"):
        cls_rollout_map(rollout, num_prefix_tokens=2, grid_size=(2, 3), token_index=2)


# ---------------------------------------------------------------------------------------------------
# Mean attention distance
# ---------------------------------------------------------------------------------------------------


def brute_force_mean_distance(grid_size: tuple[int, int], patch_size: int) -> float:
    gh, gw = grid_size
    centres = [(r * patch_size, c * patch_size) for r in range(gh) for c in range(gw)]
    return float(np.mean([math.dist(a, b) for a in centres for b in centres]))


@pytest.mark.parametrize("grid_size, patch_size", [((1, 1), 16), ((2, 2), 4), ((3, 5), 7), ((8, 8), 4)])
def test_uniform_attention_distance_closed_form(grid_size, patch_size):
    assert uniform_attention_distance(grid_size, patch_size) == pytest.approx(
        brute_force_mean_distance(grid_size, patch_size), rel=1e-12
    )


def test_uniform_attention_distance_on_2x2_grid():
    # Each patch: itself 0, two neighbours at 4 px, one diagonal at 4√2 px.
    assert uniform_attention_distance((2, 2), 4) == pytest.approx(2 + math.sqrt(2))


def test_uniform_attention_gives_the_closed_form_even_with_class_token_weight():
    tokens = 1 + 3 * 4
    attn = torch.full((2, 3, tokens, tokens), 1.0 / tokens)  # prefix gets its share too
    distance = mean_attention_distance(attn, (3, 4), patch_size=4, num_prefix_tokens=1)
    assert distance.shape == (3,)
    torch.testing.assert_close(
        distance, torch.full((3,), uniform_attention_distance((3, 4), 4), dtype=torch.float64)
    )


def test_attention_to_self_only_gives_zero():
    eye = torch.eye(2 + 16).expand(3, 2, 18, 18)
    assert torch.all(mean_attention_distance(eye, (4, 4), patch_size=8, num_prefix_tokens=2) == 0)


def test_hand_made_2x2_example():
    # Tokens [cls, p00, p01, p10, p11], patch size 4.
    # Head 0: each patch gives cls 0.2, itself 0.4, the diagonally opposite patch 0.4 -> after dropping
    #         cls and renormalising: 0.5 · 0 + 0.5 · 4√2 = 2√2.
    # Head 1: each patch attends only to its horizontal neighbour: 4.
    opposite = {0: 3, 1: 2, 2: 1, 3: 0}
    horizontal = {0: 1, 1: 0, 2: 3, 3: 2}
    attn = torch.zeros(1, 2, 5, 5)
    attn[0, :, 0, 0] = 1.0  # the class token's own row is never a query
    for p in range(4):
        attn[0, 0, 1 + p, 0] = 0.2
        attn[0, 0, 1 + p, 1 + p] = 0.4
        attn[0, 0, 1 + p, 1 + opposite[p]] = 0.4
        attn[0, 1, 1 + p, 1 + horizontal[p]] = 1.0
    distance = mean_attention_distance(attn, (2, 2), patch_size=4, num_prefix_tokens=1)
    torch.testing.assert_close(distance, torch.tensor([2 * math.sqrt(2), 4.0], dtype=torch.float64))


def test_per_image_values_average_to_the_overall_value(generator):
    attn = random_attention(generator, 4, 3, 1 + 9)
    per_image = mean_attention_distance(attn, (3, 3), 2, 1, per_image=True)
    assert per_image.shape == (4, 3)
    torch.testing.assert_close(per_image.mean(0), mean_attention_distance(attn, (3, 3), 2, 1))


def test_patch_distances_are_pixel_distances_between_centres():
    d = patch_distances((2, 3), patch_size=5)  # patches row-major: index = 3·row + col
    assert d[0, 2] == pytest.approx(10.0) and d[0, 3] == pytest.approx(5.0)
    assert d[0, 5] == pytest.approx(math.hypot(5, 10))


# ---------------------------------------------------------------------------------------------------
# Attention figures (smoke tests)
# ---------------------------------------------------------------------------------------------------


def test_model_colours_are_fixed_per_family():
    assert model_colour("vit_tiny") == model_colour("ViT-S")
    assert model_colour("deit_tiny_distilled") != model_colour("vit_tiny")
    assert model_colour("resnet18") != model_colour("vit_tiny")
    assert model_colour("convnext") == model_colour("mystery")


def test_attention_figures_render_and_save(tmp_path, generator):
    data = pd.DataFrame(
        [
            {"model": m, "fraction": f, "layer": layer, "head": h, "distance": 3.0 * layer + h,
             "uniform": uniform_attention_distance((8, 8), 4)}
            for m in ("vit", "deit") for f in (0.1, 1.0) for layer in range(12) for h in range(3)
        ]
    )
    fig = attention_distance_plot(data)
    assert len(fig.axes) == 4
    assert all(len(ax.lines) == 1 for ax in fig.axes)  # the uniform-attention reference line
    vit_only = data[data["model"] == "vit"].drop(columns=["model", "fraction", "uniform"])
    single = attention_distance_plot(vit_only, reference=12.0)
    assert single.axes[0].lines[0].get_ydata()[0] == 12.0

    attn = random_attention(generator, 2, 3, 1 + 16).float()
    heads = cls_attention_maps(attn, 1, (4, 4)).numpy()
    rollout = cls_rollout_map(attention_rollout([attn, attn]), 1, (4, 4)).numpy()
    images = torch.rand(2, 3, 16, 16, generator=generator).numpy()  # (N, C, H, W)
    maps = attention_maps_figure(images, heads, rollout, ["cat", "ship"])
    assert len(maps.axes) == 2 * (3 + 2) + 1  # and the colour bar
    assert "scaled per map" in maps.axes[-1].get_ylabel()
    frame = attention_maps_frame(heads, rollout, ["cat", "ship"])
    assert len(frame) == 2 * 4 * 16
    paths = save_figure(maps, tmp_path / "maps", frame)
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    grey = attention_maps_figure(images[:, :1], heads, rollout, ["cat", "ship"])  # (N, 1, H, W)
    assert len(grey.axes) == 11
    with pytest.raises(StudyError, match="titles"):
        attention_maps_figure(images, heads, rollout, ["cat"])


# ---------------------------------------------------------------------------------------------------
# Attention entropy
# ---------------------------------------------------------------------------------------------------

from scipy import stats  # noqa: E402

from study.attention import locality  # noqa: E402
from study.attention.maps import mean_attention_entropy, uniform_attention_entropy  # noqa: E402
from study.attention.report import attention_findings, model_contrast_sentences  # noqa: E402


def test_entropy_of_uniform_attention_is_log_n_even_with_class_token_weight():
    tokens = 1 + 3 * 4
    attn = torch.full((2, 3, tokens, tokens), 1.0 / tokens)  # the class token takes its share too
    entropy = mean_attention_entropy(attn, (3, 4), num_prefix_tokens=1)
    torch.testing.assert_close(entropy, torch.full((3,), math.log(12), dtype=torch.float64))
    assert uniform_attention_entropy((3, 4)) == pytest.approx(math.log(12))


def test_entropy_of_one_patch_is_zero_and_of_two_equal_patches_log_two():
    eye = torch.eye(2 + 16).expand(1, 2, 18, 18)
    assert torch.all(mean_attention_entropy(eye, (4, 4), num_prefix_tokens=2) == 0)
    attn = torch.zeros(1, 1, 5, 5)  # [cls, p00, p01, p10, p11]
    attn[0, 0, :, 0] = 0.5  # half on the class token: dropped and renormalised away
    attn[0, 0, 1:, 1] = attn[0, 0, 1:, 4] = 0.25
    expected = torch.tensor([math.log(2)], dtype=torch.float64)
    torch.testing.assert_close(mean_attention_entropy(attn, (2, 2), 1), expected)


# ---------------------------------------------------------------------------------------------------
# Per-head and per-layer statistics over seeds, with the initialisation baseline
# ---------------------------------------------------------------------------------------------------


def heads_frame(distances: dict, uniform: float = 14.0) -> pd.DataFrame:
    """Rows of ``HEAD_COLUMNS`` from {(model, state, fraction, seed, layer): [distance of each head]}."""
    return pd.DataFrame([
        {"model": m, "state": st, "fraction": f, "seed": s, "layer": layer, "head": h, "distance": d,
         "entropy": d / 10, "uniform_distance": uniform, "uniform_entropy": math.log(16)}
        for (m, st, f, s, layer), ds in distances.items() for h, d in enumerate(ds)
    ], columns=locality.HEAD_COLUMNS)


def test_local_heads_are_counted_below_three_quarters_of_uniform_and_the_most_local_named():
    heads = heads_frame({("vit", locality.TRAINED, 1.0, 0, 0): [10.6, 14.0, 5.0, 10.4]})  # threshold 10.5 px
    row = locality.layer_statistics(heads).iloc[0]
    assert row["local_heads"] == 2 and row["local_threshold"] == pytest.approx(10.5)
    assert row["most_local_head"] == 2 and row["most_local_distance"] == 5.0
    assert row["mean_distance"] == pytest.approx(10.0) and row["heads"] == 4


def test_heads_are_summarised_by_rank_within_each_seed_not_by_index():
    # Head 0 is local in seed 0, head 1 in seed 1: the most local head is 3 px in both seeds.
    heads = heads_frame({("vit", locality.TRAINED, 1.0, 0, 0): [3.0, 12.0],
                         ("vit", locality.TRAINED, 1.0, 1, 0): [12.0, 3.0]})
    table = locality.head_table(heads, 0.95).set_index("head_rank")
    assert table.loc[0, "distance_mean"] == 3.0 and table.loc[0, "distance_ci_high"] == 3.0
    assert table.loc[1, "distance_mean"] == 12.0 and (table["seeds"] == 2).all()
    layers = locality.layer_table(locality.layer_statistics(heads), 0.95).iloc[0]
    assert layers["most_local_head"] == "0,1" and layers["most_local_distance"] == 3.0


def test_init_rows_have_no_fraction_and_keep_their_own_group():
    nan = float("nan")
    heads = heads_frame({("vit", locality.INIT, nan, 0, 0): [13.0, 14.0],
                         ("vit", locality.TRAINED, 1.0, 0, 0): [4.0, 14.0]})
    layers = locality.layer_statistics(heads).set_index("state")
    assert layers.loc[locality.INIT, "most_local_distance"] == 13.0 and np.isnan(layers.loc[locality.INIT, "fraction"])
    assert layers.loc[locality.TRAINED, "most_local_distance"] == 4.0


def test_contrasts_pair_by_seed_and_claim_only_clear_changes():
    nan = float("nan")
    distances = {}
    for seed, noise in zip((0, 1, 2), (0.1, -0.1, 0.05)):
        distances["vit", locality.INIT, nan, seed, 0] = [13.8 + noise, 14.2]
        distances["vit", locality.TRAINED, 0.1, seed, 0] = [6.0 + noise / 2, 14.0]
        distances["vit", locality.TRAINED, 1.0, seed, 0] = [6.0 - noise / 2, 14.0]
    table = locality.contrasts(locality.layer_statistics(heads_frame(distances)), 0.95).set_index("versus")
    init, smallest = table.loc["init"], table.loc["smallest"]
    assert init["difference"] == pytest.approx(-7.8 - 1.5 * 0.05 / 3)  # per seed: -7.8 - 1.5 * noise
    assert bool(init["significant"]) and init["ci_high"] < 0
    assert not bool(smallest["significant"]) and smallest["ci_low"] < 0 < smallest["ci_high"]
    assert smallest["versus_fraction"] == 0.1 and init["seeds"] == 3
    assert init["confidence"] > 0.95  # Holm over the model's two contrasts


def test_a_null_contrast_gets_the_larger_end_of_its_interval_as_equivalence_bound():
    nan = float("nan")
    distances = {}
    for seed, noise in zip((0, 1, 2), (0.1, -0.1, 0.05)):
        distances["vit", locality.INIT, nan, seed, 0] = [13.8 + noise, 14.2]
        distances["vit", locality.TRAINED, 0.1, seed, 0] = [6.0 + noise / 2, 14.0]
        distances["vit", locality.TRAINED, 1.0, seed, 0] = [6.0 - noise / 2, 14.0]
    table = locality.contrasts(locality.layer_statistics(heads_frame(distances)), 0.95).set_index("versus")
    init, smallest = table.loc["init"], table.loc["smallest"]
    assert np.isnan(init["equivalence_bound"])  # detected: no bound
    # per seed: -noise = (-0.1, 0.1, -0.05); the second of two Holm steps tests at α, so the raw 95% interval.
    half = stats.t.ppf(0.975, 2) * np.std([-0.1, 0.1, -0.05], ddof=1) / np.sqrt(3)
    assert smallest["equivalence_bound"] == pytest.approx(half + 0.05 / 3)  # |lower end| = half − mean


def test_layer_table_gives_the_head_mean_an_interval_over_seeds():
    heads = heads_frame({("vit", locality.TRAINED, 1.0, 0, 0): [4.0, 12.0],
                         ("vit", locality.TRAINED, 1.0, 1, 0): [6.0, 12.0],
                         ("vit", locality.TRAINED, 1.0, 2, 0): [5.0, 13.0]})
    row = locality.layer_table(locality.layer_statistics(heads), 0.95).iloc[0]
    half = stats.t.ppf(0.975, 2) * np.std([8.0, 9.0, 9.0], ddof=1) / np.sqrt(3)  # head means 8, 9, 9
    assert row["mean_distance"] == pytest.approx(26 / 3)
    assert (row["mean_distance_ci_low"], row["mean_distance_ci_high"]) == pytest.approx((26 / 3 - half, 26 / 3 + half))


def two_model_layers(local_gain: float) -> pd.DataFrame:
    """vit and deit (4 heads) at init, 10% and full data, 3 seeds: the same at init and 10%; at full data deit's
    most local head is ``local_gain`` px closer than vit's and its other heads as far, so the head mean moves by
    ``local_gain / 4``. Per-seed noise differs between the models."""
    nan = float("nan")
    distances = {}
    for seed, (e_vit, e_deit) in enumerate([(0.1, -0.1), (-0.1, 0.05), (0.05, 0.1)]):
        for model, e in (("vit", e_vit), ("deit", e_deit)):
            gain = local_gain if model == "deit" else 0.0
            distances[model, locality.INIT, nan, seed, 0] = [13.8 + e, 14.0, 14.1, 14.2]
            distances[model, locality.TRAINED, 0.1, seed, 0] = [10.0 + e, 13.0, 14.0, 14.0]
            distances[model, locality.TRAINED, 1.0, seed, 0] = [9.0 - gain + e, 13.0, 14.0, 14.0]
    return locality.layer_statistics(heads_frame(distances))


def test_model_contrasts_compare_two_models_directly_paired_by_seed():
    table = locality.model_contrasts(two_model_layers(3.0), [("deit", "vit")], 0.95)
    # 2 measures × (init, 2 fractions)
    assert list(table.columns) == locality.MODEL_CONTRAST_COLUMNS and len(table) == 2 * 3
    local = table[table["measure"] == "most local head"].set_index("fraction", drop=False)
    full, smallest = local.loc[1.0], local.loc[0.1]
    diffs = np.array([-3.0 - 0.1 - 0.1, -3.0 + 0.05 + 0.1, -3.0 + 0.1 - 0.05])  # deit − vit per seed
    assert full["difference"] == pytest.approx(diffs.mean()) and full["significant"]
    assert full["adj_confidence"] == pytest.approx(1 - 0.05 / 3) and np.isnan(full["equivalence_bound"])
    # At init and at 10% the difference is the noise alone, (-0.2, 0.15, 0.05): after the full-data contrast is
    # rejected at α/3, Holm's next step (α/2) does not reject, and the rest keep that level, 97.5%.
    noise = np.array([-0.2, 0.15, 0.05])
    half = stats.t.ppf(1 - 0.025 / 2, 2) * noise.std(ddof=1) / np.sqrt(3)
    assert not smallest["significant"] and smallest["adj_confidence"] == pytest.approx(0.975)
    assert (smallest["adj_ci_low"], smallest["adj_ci_high"]) == pytest.approx((-half, half))  # mean 0
    assert smallest["equivalence_bound"] == pytest.approx(half)
    init = local[local["state"] == locality.INIT].iloc[0]
    assert np.isnan(init["fraction"]) and init["seeds"] == 3  # init rows pair by seed despite their NaN fraction
    spread = table[(table["measure"] == "head mean") & (table["fraction"] == 1.0)].iloc[0]
    assert spread["difference"] == pytest.approx(diffs.mean() / 4)


def test_model_contrast_sentences_claim_the_direct_difference_and_bound_the_null():
    nan = float("nan")
    row = {"comparison": "deit - vit", "layer": 0, "seeds": 3, "inference": True, "ci_low": nan, "ci_high": nan,
           "p_holm": nan}
    rows = [
        {**row, "measure": "most local head", "state": "init", "fraction": nan, "difference": 0.01, "adj_ci_low": -0.2,
         "adj_ci_high": 0.22, "adj_confidence": 0.975, "significant": False, "equivalence_bound": 0.22},
        {**row, "measure": "most local head", "state": "trained", "fraction": 1.0, "difference": -3.0,
         "adj_ci_low": -3.4, "adj_ci_high": -2.6, "adj_confidence": 1 - 0.05 / 3, "significant": True,
         "equivalence_bound": nan},
        {**row, "measure": "head mean", "state": "trained", "fraction": 1.0, "difference": -0.1, "adj_ci_low": -0.55,
         "adj_ci_high": 0.35, "adj_confidence": 0.95, "significant": False, "equivalence_bound": 0.55},
    ]
    sentence, = model_contrast_sentences(pd.DataFrame(rows))
    assert sentence == (
        "deit − vit, first block, mean attention distance paired by seed (negative: deit more local; intervals "
        "Holm-adjusted across the 1 contrast of each measure: every layer and fraction, and initialisation) — most "
        "local head: at initialisation no detectable difference (+0.01 px, Holm-adjusted 97.5% CI -0.20 to +0.22 px; "
        "differences beyond ±0.22 px excluded), at full data deit is 3.00 px closer (more local) (Holm-adjusted 98.3% "
        "CI -3.40 to -2.60 px); head mean: at full data no detectable difference (-0.10 px, Holm-adjusted 95.0% CI "
        "-0.55 to +0.35 px; differences beyond ±0.55 px excluded).")
    few = pd.DataFrame(rows).assign(seeds=2, inference=False)
    text, = model_contrast_sentences(few)
    assert "closer" not in text and "no detectable" not in text and "with 2 seeds no difference is inferred" in text


def test_attention_findings_put_the_head_mean_beside_the_most_local_head():
    layers = locality.layer_table(two_model_layers(3.0), 0.95)
    text = " ".join(attention_findings(layers, locality.contrasts(two_model_layers(3.0), 0.95)))
    deit_full = layers[(layers["model"] == "deit") & (layers["fraction"] == 1.0)].iloc[0]
    assert f"the mean over its heads is {layers.iloc[0]['mean_distance']:.2f} px (CI" in text
    assert f"{deit_full['mean_distance']:.2f} px (CI {deit_full['mean_distance_ci_low']:.2f} to " in text


def test_a_run_keeps_the_weights_it_started_from(tmp_path, monkeypatch):
    """The train stage writes init.pt: exactly the model it built, before any step (captured here from the
    builder), with the run's spec; the final weights differ from it."""
    from study.core.config import parse_params
    import study.data.stage_prepare as prepare_stage
    import study.data.stage_subsets as subsets_stage
    import study.train.stage as train_stage_module
    from study.presets import preset_params
    from study.train.artifacts import load_trained

    smoke = preset_params(Path(__file__).resolve().parents[2], "smoke")
    smoke["budget"].update(epochs=0.05, min_steps=2)  # two steps are enough to move every weight
    params = parse_params(smoke)
    prepare_stage.run(params, tmp_path / "prepared")
    subsets_stage.run(params, tmp_path / "prepared", tmp_path / "subsets")
    built = {}
    build_model = train_stage_module.build_model

    def capture(*args, **kwargs):
        model = build_model(*args, **kwargs)
        built["state"] = {k: v.clone() for k, v in model.state_dict().items()}
        return model

    monkeypatch.setattr(train_stage_module, "build_model", capture)
    out = tmp_path / "run"
    train_stage_module.run(
        params, "vit", 1.0, 1, tmp_path / "prepared", tmp_path / "subsets" / "s1" / "f1.0.npy",
        tmp_path / "subsets" / "validation.npy", None, out / "model.pt", out / "metrics.json",
        out / "history.csv", out / "resume.pt", out / "predictions.npy")
    initial, spec = load_trained(out / "init.pt")
    final, final_spec = load_trained(out / "model.pt")
    assert spec == final_spec and spec.seed == 1 and spec.mean
    state = initial.state_dict()
    assert state.keys() == built["state"].keys()
    assert all(torch.equal(state[k], built["state"][k]) for k in state)
    assert not torch.equal(final.state_dict()["pos_embed"], state["pos_embed"])

def test_head_statistics_average_exactly_over_batches_and_carry_the_references():
    from study.runs.load import normalised_images
    from study.models import attention_probs, build_model

    torch.manual_seed(0)
    model = build_model("vit", 10, 8, 1, patch_size=2, embed_dim=16, depth=2, num_heads=2).eval()
    spec = _spec()
    images = np.random.default_rng(0).integers(0, 256, size=(10, 8, 8, 1), dtype=np.uint8)
    heads = locality.head_statistics({("vit", locality.TRAINED, 1.0, 0): (model, spec)}, images, 4, torch.device("cpu"))
    assert list(heads.columns) == locality.HEAD_COLUMNS and len(heads) == 2 * 2
    with torch.no_grad():
        attn = attention_probs(model, normalised_images(images, spec, torch.device("cpu")))  # all 10 at once
    for layer, a in enumerate(attn):
        rows = heads[heads["layer"] == layer].sort_values("head")
        np.testing.assert_allclose(rows["distance"], mean_attention_distance(a, (4, 4), 2, 1).numpy(), rtol=1e-5)
        np.testing.assert_allclose(rows["entropy"], mean_attention_entropy(a, (4, 4), 1).numpy(), rtol=1e-5)
    assert (heads["uniform_distance"] == uniform_attention_distance((4, 4), 2)).all()
    np.testing.assert_allclose(heads["uniform_entropy"], math.log(16))


def test_attention_figure_facets_by_condition_in_order_with_the_local_line():
    nan = float("nan")
    heads = heads_frame({("vit", locality.INIT, nan, 0, 0): [13.0, 14.0],
                         ("vit", locality.TRAINED, 0.1, 0, 0): [9.0, 14.0],
                         ("vit", locality.TRAINED, 1.0, 0, 0): [4.0, 14.0]})
    heads["condition"] = ["init"] * 2 + ["10% data"] * 2 + ["100% data"] * 2
    fig = attention_distance_plot(heads, columns="condition", local_share=0.75)
    assert [ax.get_title() for ax in fig.axes] == ["vit · init", "vit · 10% data", "vit · 100% data"]
    assert [line.get_ydata()[0] for line in fig.axes[0].lines] == [14.0, 10.5]


def _spec():
    """A run spec for one-channel images already on the 0-1 scale (normalisation is the identity)."""
    from study.train.spec import RunSpec

    return RunSpec(model_name="vit", arch="vit", arch_args={}, num_classes=10, image_size=8, in_chans=1, fraction=1.0,
                   seed=0, params=0, forward_flops=0, mean=(0.0,), std=(1.0,))
