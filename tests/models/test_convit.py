"""Tests for study.models.convit: timm parity, the convolutional init, the gates, the class token, the analyses'
views of a GPSA block, the registry's refusals and the size matched to the study's ViT."""

from __future__ import annotations

import math

import pytest
import torch
from timm.models.convit import ConVit as TimmConVit

from tests.conftest import assert_costs_like_study_vit, assert_parity_both_ways, random_images, randomize_parameters

from study.attention.maps import (
    attention_rollout,
    cls_rollout_map,
    mean_attention_distance,
    mean_attention_entropy,
    uniform_attention_distance,
)
from study.core.errors import StudyError
from study.models import attention_probs, build_model, representations
from study.models.convit import ConViT, GatedPositionalAttention

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread

# The ConViT sized for the study (a preset uses these): params.yaml's ViT (patch 4, width 64, depth 4, 4 heads,
# MLP ratio 2) with GPSA in the first 3 of its 4 blocks (the paper: 10 of 12) and the paper's locality strength.
CONVIT_SIZES = dict(patch_size=4, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0, local_up_to_layer=3,
                    locality_strength=1.0)
CONFIGS = [  # our keywords; embed_dim is the width
    dict(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depth=3, num_heads=4,
         local_up_to_layer=2),
    dict(img_size=32, patch_size=4, in_chans=3, num_classes=7, embed_dim=36, depth=2, num_heads=9, mlp_ratio=2.0,
         qkv_bias=False, global_pool="avg", local_up_to_layer=1, locality_strength=0.5),
    dict(img_size=8, patch_size=2, in_chans=2, num_classes=5, embed_dim=24, depth=2, num_heads=2, mlp_ratio=3.0,
         local_up_to_layer=1, drop_rate=0.1, attn_drop_rate=0.1, proj_drop_rate=0.1, drop_path_rate=0.2),
]


def _timm(config: dict) -> TimmConVit:
    """timm's ConVit with the same sizes: its embed_dim is per head, and its qkv_bias defaults to False."""
    return TimmConVit(**{**config, "embed_dim": config["embed_dim"] // config["num_heads"],
                         "qkv_bias": config.get("qkv_bias", True)})


@pytest.mark.parametrize("config", CONFIGS)
def test_convit_matches_timm_both_ways(config):
    torch.manual_seed(0)
    reference = _timm(config)
    x = random_images(config["in_chans"], config["img_size"])
    ours = assert_parity_both_ways(lambda: ConViT(**config), reference, x)
    with torch.no_grad():  # the analyses' path computes the same function
        torch.testing.assert_close(ours.forward_with_attention(x)[0], reference(x), atol=1e-5, rtol=0)
    assert ours.num_prefix_tokens == reference.num_prefix_tokens == 1


@pytest.mark.parametrize("config", CONFIGS[:2])
def test_convolutional_init_and_gates_match_timm(config):
    ours, reference = ConViT(**config), _timm(config)
    layers = config["local_up_to_layer"]
    for mine, theirs in zip(ours.blocks[:layers], reference.blocks[:layers]):
        assert isinstance(mine.attn, GatedPositionalAttention)
        # H = 4 and 9 are squares, so every head's v_pos is set by the init (none is left random)
        torch.testing.assert_close(mine.attn.pos_proj.weight, theirs.attn.pos_proj.weight, atol=0, rtol=0)
        torch.testing.assert_close(mine.attn.v.weight, torch.eye(config["embed_dim"]), atol=0, rtol=0)
        torch.testing.assert_close(mine.attn.v.weight, theirs.attn.v.weight, atol=0, rtol=0)
    assert not any(isinstance(block.attn, GatedPositionalAttention) for block in ours.blocks[layers:])
    # gates start at λ = 1: σ(1) of each head's attention is positional
    gates = ours.gates()
    assert gates.shape == (layers, config["num_heads"])
    torch.testing.assert_close(gates, torch.full_like(gates, 1 / (1 + math.exp(-1))))
    assert not gates.requires_grad  # a record for the analyses


def test_gates_follow_the_gating_parameters():
    model = ConViT(**CONFIGS[0])
    with torch.no_grad():
        model.blocks[1].attn.gating_param[2] = -3.0
    assert model.gates()[1, 2].item() == pytest.approx(1 / (1 + math.exp(3)))
    assert model.gates()[0, 2].item() == pytest.approx(1 / (1 + math.exp(-1)))


def test_positional_attention_starts_peaked_at_each_heads_offset():
    # 9 heads: centres Δ on a 3×3 grid, head h = a + 3b looks at (Δ_y, Δ_x) = (a − 1, b − 1)
    model = build_model("convit", 10, 28, 1, patch_size=4, embed_dim=36, depth=2, num_heads=9, local_up_to_layer=1)
    gpsa = model.blocks[0].attn
    centre = 3 * 7 + 3  # the query patch at the centre of the 7×7 grid
    with torch.no_grad():
        positional = gpsa.positional_attention()[:, centre].reshape(9, 7, 7)  # (H, N) -> (H, rows, cols)
        mixed = model.attention_probs(random_images(1, 28, batch=8))[0][:, :, 1 + centre, 1:].mean(0)  # (H, N)
    for head in range(9):
        expected = (3 + head % 3 - 1, 3 + head // 3 - 1)  # (row, col) of the patch at offset Δ_h
        assert divmod(int(positional[head].argmax()), 7) == expected
        # σ(1) ≈ 0.73 positional, the rest content (near uniform at init): the mix peaks there too
        assert divmod(int(mixed[head].argmax()), 7) == expected
    # the peak is exp(−α‖δ − Δ‖²)-shaped: a neighbour at distance 1 gets e^-1 of the peak's score
    head = 4  # Δ = (0, 0)
    assert positional[head, 3, 4] / positional[head, 3, 3] == pytest.approx(math.exp(-1.0), rel=1e-5)


def test_four_heads_look_at_the_four_quadrants_of_a_2x2_kernel():
    # 4 heads (ConViT-Ti, and the study's size): centres (±½, ±½), so each head's peak is shared by the 2×2
    # block of offsets {0, sign Δ_y} × {0, sign Δ_x}
    model = build_model("convit", 10, 28, 1, **CONVIT_SIZES)
    with torch.no_grad():
        positional = model.blocks[0].attn.positional_attention()[:, 24].reshape(4, 7, 7)  # query at (3, 3)
    for head in range(4):
        rows = (3, 3 + (1 if head % 2 else -1))
        cols = (3, 3 + (1 if head // 2 else -1))
        peak = positional[head].max()
        top = {divmod(int(i), 7) for i in torch.nonzero(torch.isclose(positional[head].flatten(), peak)).flatten()}
        assert top == {(r, c) for r in rows for c in cols}


def test_class_token_joins_after_the_last_gpsa_block():
    config = CONFIGS[0]  # 3 blocks, GPSA in the first 2
    model = ConViT(**config).eval()
    randomize_parameters(model, seed=4)
    x = random_images(1, 28, batch=2)
    patches, width = model.patch_embed.num_patches, config["embed_dim"]
    assert model.pos_embed.shape == (1, patches, width)  # positions for the patches only
    with torch.no_grad():
        tokens = representations(model, x)
        logits = model(x)
        features = model.forward_features(x)
    assert list(tokens) == ["patch_embed", "blocks.0", "blocks.1", "blocks.2", "norm"]
    assert all(value.shape == (2, 1 + patches, width) for value in tokens.values())
    torch.testing.assert_close(tokens["norm"], features, atol=1e-5, rtol=0)
    # before it joins, the recorded class token is the learned one, unchanged
    for key in ("patch_embed", "blocks.0", "blocks.1"):
        torch.testing.assert_close(tokens[key][:, 0], model.cls_token[0].expand(2, -1), atol=0, rtol=0)
    assert not torch.allclose(tokens["blocks.2"][:, 0], model.cls_token[0].expand(2, -1))
    # the GPSA blocks do not see it; the blocks after them, and so the logits, do
    with torch.no_grad():
        # (a random shift: LayerNorm would cancel one added to every channel alike)
        model.cls_token.add_(torch.randn(model.cls_token.shape, generator=torch.Generator().manual_seed(0)))
        moved = representations(model, x)
        torch.testing.assert_close(moved["blocks.1"][:, 1:], tokens["blocks.1"][:, 1:], atol=0, rtol=0)
        assert not torch.allclose(moved["blocks.2"][:, 1:], tokens["blocks.2"][:, 1:])
        assert not torch.allclose(model(x), logits)


def test_attention_of_gpsa_blocks_is_the_gated_mix_with_the_class_token_at_rest():
    config = CONFIGS[0]
    model = ConViT(**config).eval()
    randomize_parameters(model, seed=6)  # gates away from σ(1), different per head
    x = random_images(1, 28, batch=2)
    patches, heads = model.patch_embed.num_patches, config["num_heads"]
    with torch.no_grad():
        attentions = attention_probs(model, x)
        gpsa = model.blocks[0].attn
        normed = model.blocks[0].norm1(model.representations(x)["patch_embed"][:, 1:])  # (B, N, D)
        q, k = gpsa.qk(normed).chunk(2, dim=-1)  # each (B, N, D)
        q = q.reshape(2, patches, heads, -1).transpose(1, 2)  # (B, N, D) -> (B, N, H, D/H) -> (B, H, N, D/H)
        k = k.reshape(2, patches, heads, -1).transpose(1, 2)
        content = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(config["embed_dim"] // heads), dim=-1)
        gate = torch.sigmoid(gpsa.gating_param).view(heads, 1, 1)
        expected = (1 - gate) * content + gate * gpsa.positional_attention()
        expected = expected / expected.sum(dim=-1, keepdim=True)
    assert len(attentions) == config["depth"]
    for probs in attentions:
        assert probs.shape == (2, heads, 1 + patches, 1 + patches)
        torch.testing.assert_close(probs.sum(dim=-1), torch.ones(2, heads, 1 + patches))
    torch.testing.assert_close(attentions[0][:, :, 1:, 1:], expected, atol=1e-6, rtol=0)
    for probs in attentions[:2]:  # GPSA: the class token attends only to itself, no patch attends to it
        torch.testing.assert_close(probs[:, :, 0], torch.eye(1 + patches)[0].expand(2, heads, -1), atol=0, rtol=0)
        assert (probs[:, :, 1:, 0] == 0).all()
    assert (attentions[2][:, :, 1:, 0] > 0).all()  # after it joins, patches attend to it


def test_attention_analyses_run_and_see_local_gpsa_heads_at_init():
    model = build_model("convit", 10, 28, 1, **CONVIT_SIZES).eval()
    x = random_images(1, 28, batch=4)
    with torch.no_grad():
        attentions = attention_probs(model, x)
    grid, patch = model.patch_embed.grid_size, 4
    uniform = uniform_attention_distance(grid, patch)
    distances = [mean_attention_distance(a, grid, patch, model.num_prefix_tokens) for a in attentions]
    for a in attentions:
        assert torch.isfinite(mean_attention_entropy(a, grid, model.num_prefix_tokens)).all()
    # measured 6.6 px against 14.4 px for uniform attention: the convolutional init is local from the start
    for layer in range(CONVIT_SIZES["local_up_to_layer"]):
        assert (distances[layer] < 0.6 * uniform).all()
    assert (distances[-1] > 0.9 * uniform).all()  # a plain block at init attends about evenly
    rollout = attention_rollout(attentions)
    assert rollout.shape == (4, 1 + 49, 1 + 49)
    torch.testing.assert_close(rollout.sum(dim=-1), torch.ones(4, 50, dtype=rollout.dtype))
    assert cls_rollout_map(rollout, model.num_prefix_tokens, grid).shape == (4, 7, 7)


def test_gradients_reach_the_gates_and_positional_projections():
    model = build_model("convit", 4, 28, 1, **CONVIT_SIZES)
    loss = torch.nn.functional.cross_entropy(model(random_images(1, 28, batch=4)), torch.arange(4))
    loss.backward()
    for block in model.blocks[:CONVIT_SIZES["local_up_to_layer"]]:
        for parameter in (block.attn.gating_param, block.attn.pos_proj.weight, block.attn.qk.weight):
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0
    # the relative offsets are a buffer: they follow the model's dtype, and are not saved
    assert "blocks.0.attn.rel_indices" not in model.state_dict()
    assert model.double()(random_images(1, 28, batch=1).double()).dtype == torch.float64


def test_convit_sized_for_the_study_costs_what_the_vit_costs():
    # measured: params 139,014 vs 139,018 (-0.003%), forward FLOPs 15.67M vs 15.77M (-0.6%)
    assert_costs_like_study_vit("convit", CONVIT_SIZES, within=0.1)


@pytest.mark.parametrize("overrides, match", [
    ({"local_up_to_layer": 4}, "local_up_to_layer 4 must be an integer from 1 to depth - 1 = 3"),
    ({"local_up_to_layer": 0}, "local_up_to_layer 0 must be"),
    ({"local_up_to_layer": 1.5}, "local_up_to_layer 1.5 must be"),
    ({"locality_strength": 0.0}, "locality_strength 0.0 must be a positive number"),
    ({"gpsa_blocks": 2}, "unknown override 'gpsa_blocks' for model 'convit'; allowed: .*local_up_to_layer, "
                         "locality_strength"),
    ({"stem_channels": [8]}, "unknown override 'stem_channels' for model 'convit'"),
    ({"patch_size": 5}, "patch size"),
])
def test_bad_convit_overrides_are_refused_in_one_line(overrides, match):
    with pytest.raises(StudyError, match=match) as caught:
        build_model("convit", 10, 28, 1, **{**CONVIT_SIZES, **overrides})
    assert "\n" not in str(caught.value)
