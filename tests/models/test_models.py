"""Tests for study.models: timm parity, the registry's refusals, analysis intermediates, training, cost."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from timm.models.deit import VisionTransformerDistilled as TimmDistilled
from timm.models.vision_transformer import VisionTransformer as TimmViT

from tests.conftest import assert_parity_both_ways
from tests.conftest import assert_same_state_dict_layout as _assert_same_state_dict_layout
from tests.conftest import random_images as _images
from tests.conftest import randomize_parameters as _randomize

from study.core.errors import StudyError
from study.models import MODEL_NAMES, attention_probs, build_model, representations
from study.models.cost import cost_table, count_parameters, forward_flops
from study.models.deit import DistilledVisionTransformer
from study.models.vit import VisionTransformer

VIT_CONFIGS = [
    dict(img_size=28, patch_size=7, in_chans=1, num_classes=10, embed_dim=32, depth=2, num_heads=4),
    dict(img_size=32, patch_size=4, in_chans=3, num_classes=7, embed_dim=48, depth=3, num_heads=3,
         qkv_bias=False, global_pool="avg", mlp_ratio=2.0),
    dict(img_size=8, patch_size=2, in_chans=2, num_classes=5, embed_dim=24, depth=1, num_heads=2, mlp_ratio=3.0,
         drop_rate=0.1, attn_drop_rate=0.1, proj_drop_rate=0.1, drop_path_rate=0.2),
]
DEIT_CONFIG = dict(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depth=2, num_heads=2)
SMALL_VIT = dict(patch_size=7, embed_dim=32, depth=2, num_heads=2)
SHAPES = [(28, 1), (32, 3), (8, 1)]  # (image side, channels)
pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread


@pytest.mark.parametrize("config", VIT_CONFIGS)
def test_vit_matches_timm(config):
    torch.manual_seed(0)
    reference = TimmViT(**config)
    ours = assert_parity_both_ways(lambda: VisionTransformer(**config), reference,
                                   _images(config["in_chans"], config["img_size"]))
    assert ours.num_prefix_tokens == reference.num_prefix_tokens == 1
    assert ours.patch_embed.grid_size == reference.patch_embed.grid_size
    assert ours.patch_embed.num_patches == reference.patch_embed.num_patches


def test_deit_matches_timm_in_eval_and_distilled_training():
    torch.manual_seed(0)
    ours, reference = DistilledVisionTransformer(**DEIT_CONFIG), TimmDistilled(**DEIT_CONFIG)
    _assert_same_state_dict_layout(ours, reference)
    _randomize(ours, seed=3)
    reference.load_state_dict(ours.state_dict(), strict=True)
    DistilledVisionTransformer(**DEIT_CONFIG).load_state_dict(reference.state_dict(), strict=True)
    x = _images(1, 28)
    ours.eval(), reference.eval()
    with torch.no_grad():
        logits = ours(x)
        torch.testing.assert_close(logits, reference(x), atol=1e-5, rtol=0)
        class_logits, dist_logits = ours.forward_heads(x)
        assert not torch.allclose(class_logits, dist_logits)  # two genuinely different heads
        torch.testing.assert_close(logits, (class_logits + dist_logits) / 2)
    assert ours.num_prefix_tokens == 2
    assert ours.pos_embed.shape[1] == ours.patch_embed.num_patches + 2

    # training mode (no dropout configured, so deterministic): tuple only when distilled training is on
    ours.train(), reference.train()
    assert isinstance(ours(x), torch.Tensor)
    ours.set_distilled_training(True)
    reference.set_distilled_training(True)
    ours_pair, reference_pair = ours(x), reference(x)
    assert isinstance(ours_pair, tuple) and len(ours_pair) == 2
    for mine, theirs in zip(ours_pair, reference_pair):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)
    ours.eval()
    assert isinstance(ours(x), torch.Tensor)  # eval always averages, even with distilled training on


def test_deit_refuses_average_pooling():
    with pytest.raises(StudyError, match="global_pool"):
        build_model("deit", 10, 28, 1, global_pool="avg")


def _set_fused_attn(model, fused: bool | None) -> None:
    for block in model.blocks:
        block.attn.fused_attn = fused


@pytest.mark.parametrize("name", ["vit", "deit"])
def test_explicit_attention_path_matches_fused_forward(name):
    model = build_model(name, 10, 28, 1, **SMALL_VIT)
    _randomize(model, seed=5)
    model.eval()
    x = _images(1, 28)
    with torch.no_grad():
        default = model(x)  # on CPU: explicit attention (Attention.fused_attn is None)
        _set_fused_attn(model, True)
        fused = model(x)
        _set_fused_attn(model, None)
        explicit, attentions = model.forward_with_attention(x)
        tokens = model.representations(x)
    torch.testing.assert_close(default, fused, atol=1e-5, rtol=0)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=0)
    prefix = model.num_prefix_tokens
    num_tokens = model.patch_embed.num_patches + prefix  # 16 patches + prefix
    assert len(attentions) == 2
    for probs in attentions:
        assert probs.shape == (4, 2, num_tokens, num_tokens)
        assert (probs >= 0).all()
        torch.testing.assert_close(probs.sum(dim=-1), torch.ones(4, 2, num_tokens))
    assert list(tokens) == ["patch_embed", "blocks.0", "blocks.1", "norm"]
    assert all(value.shape == (4, num_tokens, 32) for value in tokens.values())
    torch.testing.assert_close(tokens["norm"], model.forward_features(x), atol=1e-5, rtol=0)
    # the module-level helpers dispatch to the same methods
    assert len(attention_probs(model, x)) == 2
    assert list(representations(model, x)) == list(tokens)


def test_attention_probs_are_the_softmax_of_scaled_dot_products():
    model = build_model("vit", 10, 28, 1, patch_size=7, embed_dim=32, depth=1, num_heads=2)
    _randomize(model, seed=9)
    x = _images(1, 28, batch=2)
    with torch.no_grad():
        [probs] = model.attention_probs(x)
        block = model.blocks[0]
        tokens = block.norm1(model.representations(x)["patch_embed"])  # (B, T, D)
        q, k, _ = block.attn.qkv(tokens).chunk(3, dim=-1)  # each (B, T, D)
        q = q.reshape(2, 17, 2, 16).transpose(1, 2)  # (B, T, D) -> (B, T, H, D/H) -> (B, H, T, D/H)
        k = k.reshape(2, 17, 2, 16).transpose(1, 2)
        expected = torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1)  # √(D/H) = 4
    torch.testing.assert_close(probs, expected, atol=1e-6, rtol=0)


def test_avg_pool_vit_has_no_token_norm_entry():
    model = build_model("vit", 10, 28, 1, global_pool="avg", **SMALL_VIT)
    with torch.no_grad():
        keys = list(model.representations(_images(1, 28, batch=2)))
    assert keys == ["patch_embed", "blocks.0", "blocks.1"]


def test_resnet_representations_cover_every_block_in_order():
    model = build_model("resnet20", 10, 28, 1, width=8)
    with torch.no_grad():
        maps = model.representations(_images(1, 28, batch=2))
        final = model.forward_features(_images(1, 28, batch=2))
    expected_keys = ["stem"] + [f"layer{stage}.{block}" for stage in (1, 2, 3) for block in range(3)]
    assert list(maps) == expected_keys
    assert maps["stem"].shape == (2, 8, 28, 28)
    assert maps["layer2.0"].shape == (2, 16, 14, 14)
    assert maps["layer3.2"].shape == (2, 32, 7, 7)
    torch.testing.assert_close(maps["layer3.2"], final)

    resnet18 = build_model("resnet18", 10, 8, 1)
    with torch.no_grad():
        maps18 = resnet18.representations(_images(1, 8, batch=2))
    assert len(maps18) == 1 + 8
    assert maps18["layer4.1"].shape == (2, 512, 1, 1)


def test_resnet8_stride2_stem_halves_every_map_and_quarters_the_flops():
    # The default study's ResNet: a stride-2 stem puts the first stage on 14x14 maps of a 28x28 image.
    plain, strided = build_model("resnet8", 10, 28, 1, width=16), build_model("resnet8", 10, 28, 1, width=16, stem_stride=2)
    with torch.no_grad():
        maps = strided.representations(_images(1, 28, batch=2))
    assert maps["stem"].shape == (2, 16, 14, 14) and maps["layer3.0"].shape == (2, 64, 4, 4)
    assert count_parameters(strided) == count_parameters(plain)  # same weights, applied at a quarter of the positions
    ratio = forward_flops(plain, 28, 1) / forward_flops(strided, 28, 1)
    assert 3.5 < ratio < 4.5


def test_resnet_channels_last_gives_same_output():
    model = build_model("resnet8", 10, 28, 1).eval()
    x = _images(1, 28)
    with torch.no_grad():
        reference = model(x)
        model = model.to(memory_format=torch.channels_last)
        torch.testing.assert_close(model(x.to(memory_format=torch.channels_last)), reference,
                                   atol=1e-5, rtol=1e-5)


def test_cifar_resnet_parameter_counts_match_the_paper():
    # He et al. (2016) Table 6: ResNet-20 has 0.27M parameters (CIFAR-10, option-A shortcuts).
    assert round(count_parameters(build_model("resnet20", 10, 32, 3)) / 1e6, 2) == 0.27
    assert count_parameters(build_model("resnet20", 10, 32, 3, width=32)) > 3.9 * 269_722  # ~4x at 2x width


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("size, channels", SHAPES)
def test_every_registry_name_builds_and_runs(name, size, channels):
    model = build_model(name, 10, size, channels).eval()
    with torch.no_grad():
        logits = model(_images(channels, size, batch=2))
    assert logits.shape == (2, 10)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("name, size, channels, overrides, match", [
    ("vit", 28, 1, {"patch_size": 5}, "patch size"),
    ("deit", 32, 3, {"patch_size": 64}, "patch size"),
    ("vit", 28, 1, {"embed_dim": 50, "num_heads": 3}, "not divisible by num_heads"),
    ("vit", 28, 1, {"depthh": 3}, "unknown override 'depthh'"),
    ("vit", 28, 1, {"img_size": 32}, "set it through the data"),
    ("resnet8", 28, 1, {"patch_size": 4}, "unknown override 'patch_size'"),
    ("resnet18", 4, 1, {}, "too small"),
    ("resnet8", 2, 1, {}, "too small"),
    ("convnet", 28, 1, {}, "unknown model 'convnet'.*vit, deit, convit, vit_convstem, resnet18, resnet8, resnet20"),
    ("timm:not_a_model", 28, 1, {}, "unknown timm model"),
    ("timm:resnet10t", 28, 1, {"pretrained": True}, "pretrained"),
    ("timm:resnet10t", 28, 1, {"bogus": 1}, "unknown override"),
    ("timm:vit_tiny_patch16_224", 8, 1, {}, "timm:vit_tiny_patch16_224 cannot run on 1x8x8 input"),
    ("vit", 0, 1, {}, "image_size must be a positive integer"),
])
def test_impossible_models_are_refused_in_one_line(name, size, channels, overrides, match):
    with pytest.raises(StudyError, match=match) as caught:
        build_model(name, 10, size, channels, **overrides)
    assert "\n" not in str(caught.value)


def test_resnet_geometry_rule_boundary():
    # the rule is: image side >= total stride; exactly at the boundary the last stage sees 1x1 maps
    assert build_model("resnet18", 10, 8, 1)(_images(1, 8, batch=2)).shape == (2, 10)
    assert build_model("resnet20", 10, 4, 1)(_images(1, 4, batch=2)).shape == (2, 10)


def test_timm_models_build_sized_and_expose_intermediates():
    vit = build_model("timm:vit_tiny_patch16_224", 10, 32, 3, depth=2, patch_size=8)
    assert vit.patch_embed.img_size == (32, 32)  # img_size was forwarded
    cnn = build_model("timm:resnet10t", 7, 28, 1).eval()
    x = _images(1, 28, batch=2)
    with torch.no_grad():
        assert cnn(x).shape == (2, 7)
        features = representations(cnn, x)
    assert list(features)[0] == "intermediates.0" and len(features) >= 4
    with pytest.raises(StudyError, match="attention maps need"):
        attention_probs(cnn, x)


def _train_steps(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int = 8) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        out = model(x)
        if isinstance(out, tuple):  # distilled DeiT: both heads learn the labels here
            loss = (F.cross_entropy(out[0], y) + F.cross_entropy(out[1], y)) / 2
        else:
            loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name, size, overrides", [
    ("vit", 28, dict(SMALL_VIT, drop_path_rate=0.1)),
    ("deit", 28, SMALL_VIT),
    ("resnet8", 28, {"width": 8}),
    ("resnet20", 28, {"width": 8}),
    ("resnet18", 8, {}),
    ("timm:resnet10t", 28, {}),
])
def test_each_model_fits_a_tiny_batch(name, size, overrides):
    torch.manual_seed(0)
    model = build_model(name, 4, size, 1, **overrides)
    if name == "deit":
        model.set_distilled_training(True)
    x = _images(1, size, batch=16, seed=2)
    y = torch.arange(16) % 4
    losses = _train_steps(model, x, y)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.8 * losses[0]


def test_forward_flops_count_attention_on_cpu():
    model = build_model("vit", 10, 28, 1, patch_size=7, embed_dim=64, depth=2, num_heads=4)
    tokens, patches, dim, depth = 17, 16, 64, 2
    per_block = (2 * tokens * dim * 3 * dim  # qkv projection
                 + 2 * 2 * tokens * tokens * dim  # q kᵀ and attn · v, summed over heads
                 + 2 * tokens * dim * dim  # output projection
                 + 2 * 2 * tokens * dim * 4 * dim)  # MLP (ratio 4)
    closed_form = 2 * patches * dim * 49 + depth * per_block + 2 * dim * 10  # patch conv, blocks, head
    assert forward_flops(model, 28, 1) == closed_form  # explicit attention: two batched matmuls
    _set_fused_attn(model, True)  # the CPU flash-attention kernel, which PyTorch's counter lacks
    assert forward_flops(model, 28, 1) == closed_form
    # a CNN's convolutions are counted too, and training mode is restored afterwards
    resnet = build_model("resnet8", 10, 28, 1)
    assert forward_flops(resnet, 28, 1) > 10_000_000 and resnet.training


def test_cost_table_has_one_row_per_model():
    table = cost_table(["resnet8", "vit"], 10, 28, 1, {"vit": SMALL_VIT})
    assert list(table.columns) == ["model", "params", "forward_mflops"]
    assert list(table["model"]) == ["resnet8", "vit"]
    assert table.loc[1, "params"] == count_parameters(build_model("vit", 10, 28, 1, **SMALL_VIT))
    assert (table["forward_mflops"] > 0).all()
