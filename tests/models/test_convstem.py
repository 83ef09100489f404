"""Tests for study.models.convstem: the stem's layout and token grid, that the rest is the study's ViT, what a
token sees, the registry's refusals and the size matched to the study's ViT."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.conftest import assert_costs_like_study_vit, random_images

from study.core.errors import StudyError
from study.models import attention_probs, build_model, representations
from study.models.convstem import ConvStem, ConvStemViT

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread

# The conv-stem ViT sized for the study (a preset uses these): params.yaml's ViT less one block, as Xiao et al.
# do, with a stem of 40 and 80 channels: its 34,584 parameters stand in for the block's 33,472.
VIT_CONVSTEM_SIZES = dict(patch_size=4, embed_dim=64, depth=3, num_heads=4, mlp_ratio=2.0, stem_channels=[40, 80])
SMALL = dict(embed_dim=32, depth=2, num_heads=2)


@pytest.mark.parametrize("size, channels, patch", [(28, 1, 4), (32, 3, 8), (8, 2, 2), (32, 3, 16)])
def test_stem_gives_the_vits_token_grid(size, channels, patch):
    vit = build_model("vit", 10, size, channels, patch_size=patch, **SMALL)
    ours = build_model("vit_convstem", 10, size, channels, patch_size=patch, **SMALL).eval()
    assert isinstance(ours, ConvStemViT) and isinstance(ours.patch_embed, ConvStem)
    assert ours.patch_embed.grid_size == vit.patch_embed.grid_size
    assert ours.patch_embed.num_patches == vit.patch_embed.num_patches
    assert ours.patch_embed.patch_size == vit.patch_embed.patch_size  # what the attention analyses read
    x = random_images(channels, size, batch=2)
    with torch.no_grad():
        assert ours.patch_embed(x).shape == vit.patch_embed(x).shape  # (B, N, D)
        assert ours(x).shape == (2, 10)


def test_stem_layout_follows_xiao_et_al():
    model = build_model("vit_convstem", 10, 32, 3, patch_size=16, embed_dim=64, depth=1, num_heads=2)
    layers = list(model.patch_embed.proj)
    convs = [layer for layer in layers if isinstance(layer, nn.Conv2d)]
    assert len(convs) == 5  # log2(16) = 4 stride-2 3×3 convs, then the 1×1
    for conv, norm, act in zip(layers[0:12:3], layers[1:12:3], layers[2:12:3]):
        assert conv.kernel_size == (3, 3) and conv.stride == (2, 2) and conv.padding == (1, 1) and conv.bias is None
        assert isinstance(norm, nn.BatchNorm2d) and isinstance(act, nn.ReLU)
    assert [conv.out_channels for conv in convs[:4]] == [8, 16, 32, 64]  # doubling up to the width
    last = layers[-1]
    assert isinstance(last, nn.Conv2d) and last.kernel_size == (1, 1) and last.out_channels == 64
    assert last.bias is not None


def _outside_stem(model: nn.Module) -> dict[str, tuple[int, ...]]:
    return {key: tuple(value.shape) for key, value in model.state_dict().items() if not key.startswith("patch_embed.")}


def test_the_rest_is_the_study_vit():
    vit = build_model("vit", 10, 28, 1, patch_size=4, **SMALL)
    ours = build_model("vit_convstem", 10, 28, 1, patch_size=4, **SMALL)
    assert _outside_stem(ours) == _outside_stem(vit)
    # so the ViT's weights, stem aside, load into it
    ours.load_state_dict({k: v for k, v in vit.state_dict().items() if not k.startswith("patch_embed.")},
                         strict=False)
    torch.testing.assert_close(ours.blocks[0].attn.qkv.weight, vit.blocks[0].attn.qkv.weight)


def test_a_token_sees_the_stems_receptive_field():
    # Two 3×3 stride-2 convs: token (i, j) sees pixels 4i − 3 … 4i + 3 (7 per side), overlapping its neighbours'
    # patches, where the patchify stem's token sees only its own 4×4 patch.
    model = build_model("vit_convstem", 10, 28, 1, patch_size=4, **SMALL).eval()
    x = random_images(1, 28, batch=4).requires_grad_(True)
    model.patch_embed(x)[:, 3 * 7 + 3].abs().sum().backward()  # token (3, 3)
    seen = x.grad.abs().sum(dim=(0, 1)) > 0  # (28, 28)
    rows = torch.nonzero(seen.any(dim=1)).flatten()
    cols = torch.nonzero(seen.any(dim=0)).flatten()
    assert (rows.min().item(), rows.max().item()) == (9, 15)
    assert (cols.min().item(), cols.max().item()) == (9, 15)


def test_representations_and_attention_as_the_vit():
    model = build_model("vit_convstem", 10, 28, 1, **VIT_CONVSTEM_SIZES)
    x = random_images(1, 28, batch=4)
    model.train()(x)  # BatchNorm in training mode: batch statistics
    model.eval()
    with torch.no_grad():
        tokens = representations(model, x)
        attentions = attention_probs(model, x)
        logits, _ = model.forward_with_attention(x)
        torch.testing.assert_close(logits, model(x), atol=1e-5, rtol=0)
    assert list(tokens) == ["patch_embed", "blocks.0", "blocks.1", "blocks.2", "norm"]
    assert all(value.shape == (4, 50, 64) for value in tokens.values())
    assert len(attentions) == 3 and all(a.shape == (4, 4, 50, 50) for a in attentions)


def test_convstem_sized_for_the_study_costs_what_the_vit_costs():
    # measured: params 139,042 vs 139,018 (+0.02%), forward FLOPs 15.22M vs 15.77M (-3.5%); with the default
    # channels (32, 64) FLOPs fall 10.8%, and with all 4 blocks they rise 14%
    assert_costs_like_study_vit("vit_convstem", VIT_CONVSTEM_SIZES, within=0.1)


@pytest.mark.parametrize("overrides, match", [
    ({"patch_size": 7}, "a convolutional stem needs a square power-of-two patch_size >= 2 .*got 7"),
    ({"patch_size": 1}, "power-of-two patch_size >= 2 .*got 1"),
    ({"patch_size": (4, 2)}, "power-of-two patch_size >= 2 .*got \\(4, 2\\)"),
    ({"patch_size": 6}, "does not divide image size"),
    ({"stem_channels": [16]}, "stem_channels \\[16\\] must list 2 positive integers"),
    ({"stem_channels": [16, 0]}, "must list 2 positive integers"),
    ({"local_up_to_layer": 2}, "unknown override 'local_up_to_layer' for model 'vit_convstem'; allowed: .*"
                               "stem_channels"),
])
def test_bad_convstem_overrides_are_refused_in_one_line(overrides, match):
    with pytest.raises(StudyError, match=match) as caught:
        build_model("vit_convstem", 10, 28, 1, **{**VIT_CONVSTEM_SIZES, **overrides})
    assert "\n" not in str(caught.value)
