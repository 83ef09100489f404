"""Tests for the control models: the ViT without position embedding (timm parity, the default unchanged), ConvMixer
and Swin (timm's classes, sized for the study), the pixel MLP; the registry's refusals, the analyses' view of them,
training, and their cost against params.yaml's ViT."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from timm.models.convit import ConVit as TimmConVit
from timm.models.convmixer import ConvMixer as TimmConvMixer
from timm.models.deit import VisionTransformerDistilled as TimmDistilled
from timm.models.swin_transformer import PatchMerging
from timm.models.swin_transformer import SwinTransformer as TimmSwin
from timm.models.vision_transformer import VisionTransformer as TimmViT
from torch.nn.init import trunc_normal_

from tests.conftest import ROOT, assert_costs_like_study_vit, assert_parity_both_ways, random_images

from study.core.errors import StudyError
from study.archs import traits
from study.models import (CONVMIXER_DEFAULTS, MLP_DEFAULTS, MODEL_NAMES, SWIN_DEFAULTS, attention_probs, build_model,
                          representations)
from study.models.convit import ConViT
from study.models.cost import count_parameters, forward_flops
from study.models.mlp import PixelMLP
from study.models.vit import VisionTransformer

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread

# The controls sized for the study (a config uses these; they are also the registry's defaults): each within 10% of
# params.yaml's ViT (patch 4, width 64, depth 4, 4 heads, MLP ratio 2; 139,018 parameters, 15.77 MFLOPs) in
# parameters and forward FLOPs. Measured: convmixer 151,568 (+9.0%) and 14.25 MFLOPs (-9.6%); swin 145,438 (+4.6%)
# and 14.58 MFLOPs (-7.6%); mlp 139,930 (+0.7%) and 0.28 MFLOPs (an MLP does one multiply-add per weight, 2 FLOPs
# per parameter, so only its parameters can be matched).
# ConvMixer cannot do better: at patch 4 every weight is used once per token of the 7×7 grid (98 FLOPs per
# parameter) where the ViT does 113, so parameters at +9% leave FLOPs at -10%.
CONVMIXER_SIZES = dict(dim=166, depth=4, kernel_size=7, patch_size=4)
SWIN_SIZES = dict(embed_dim=32, depths=[8, 1], num_heads=[2, 4], window_size=3, patch_size=4, mlp_ratio=[4.0, 2.0])
MLP_SIZES = dict(hidden=[176])
SMALL = {"convmixer": dict(dim=16, depth=2, kernel_size=3, patch_size=4),
         "swin": dict(embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=3, patch_size=4, mlp_ratio=2.0),
         "mlp": dict(hidden=[32, 16])}
CONTROLS = ("convmixer", "swin", "mlp")
VIT_CONFIGS = [
    dict(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depth=2, num_heads=4),
    dict(img_size=32, patch_size=8, in_chans=3, num_classes=7, embed_dim=24, depth=2, num_heads=2, global_pool="avg",
         mlp_ratio=2.0, qkv_bias=False),
]


# --- the ViT without a position embedding -------------------------------------------------------------

@pytest.mark.parametrize("config", VIT_CONFIGS)
def test_vit_without_pos_embed_matches_timm(config):
    torch.manual_seed(0)
    reference = TimmViT(**config, pos_embed="none")
    ours = assert_parity_both_ways(lambda: VisionTransformer(**config, pos_embed="none"), reference,
                                   random_images(config["in_chans"], config["img_size"]))
    assert ours.pos_embed is None and reference.pos_embed is None
    assert "pos_embed" not in ours.state_dict()
    x = random_images(config["in_chans"], config["img_size"])
    with torch.no_grad():  # the explicit-attention path agrees with forward
        logits, attentions = ours.forward_with_attention(x)
        torch.testing.assert_close(logits, ours(x), atol=1e-5, rtol=0)
    assert len(attentions) == config["depth"]


def test_without_pos_embed_the_vit_sees_a_bag_of_patches():
    # With the class token read out, permuting the patches of an image leaves the logits unchanged.
    model = build_model("vit", 10, 28, 1, patch_size=7, embed_dim=32, depth=2, num_heads=2, pos_embed="none").eval()
    x = random_images(1, 28, batch=2)
    # (B, 1, 28, 28) -> (B, 4, 7, 4, 7) -> (B, 4, 4, 7, 7): the 4×4 grid of 7×7 patches; then reverse the patch order
    patches = x.reshape(2, 4, 7, 4, 7).permute(0, 1, 3, 2, 4).reshape(2, 16, 7, 7)
    shuffled = patches.flip(1).reshape(2, 4, 4, 7, 7).permute(0, 1, 3, 2, 4).reshape(2, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(model(shuffled), model(x), atol=1e-5, rtol=0)
        with_positions = build_model("vit", 10, 28, 1, patch_size=7, embed_dim=32, depth=2, num_heads=2).eval()
        assert not torch.allclose(with_positions(shuffled), with_positions(x), atol=1e-5)


@pytest.mark.parametrize("name, extra", [("vit", {}), ("deit", {}), ("convit", {"local_up_to_layer": 1}),
                                         ("vit_convstem", {})])
def test_default_pos_embed_is_learned_with_the_same_draws(name, extra):
    """``pos_embed='learn'`` (the default) builds what the code built before the option: the same parameters from
    the same random draws in the same order (the ViT's position embedding first, then the class token, ...)."""
    sizes = dict(patch_size=4, embed_dim=32, depth=2, num_heads=2, **extra)
    torch.manual_seed(0)
    default = build_model(name, 10, 28, 1, **sizes).state_dict()
    after_default = torch.rand(4)
    torch.manual_seed(0)
    explicit = build_model(name, 10, 28, 1, **sizes, pos_embed="learn").state_dict()
    assert torch.equal(torch.rand(4), after_default)  # the same number of draws
    assert list(default) == list(explicit) and all(torch.equal(default[key], explicit[key]) for key in default)
    if name == "vit":  # _init_weights' draws, as before the option: pos_embed first, then cls_token (then linears)
        for pos_embed in ("learn", "none"):
            model = build_model(name, 10, 28, 1, **sizes, pos_embed=pos_embed)
            torch.manual_seed(0)
            model._init_weights()
            torch.manual_seed(0)
            if pos_embed == "learn":
                assert torch.equal(model.pos_embed, trunc_normal_(torch.zeros(model.pos_embed.shape), std=0.02))
            else:  # no position embedding: the class token draws first
                assert model.pos_embed is None and set(default) - set(model.state_dict()) == {"pos_embed"}
            assert torch.equal(model.cls_token, torch.nn.init.normal_(torch.zeros(model.cls_token.shape), std=1e-6))


def test_deit_without_pos_embed_is_timms_with_a_zero_one():
    # timm's distilled ViT ignores pos_embed='none' (it always builds one); ours has none, which computes what
    # timm's does with its position embedding set to zero.
    config = dict(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depth=2, num_heads=2)
    torch.manual_seed(0)
    ours = build_model("deit", 10, 28, 1, **{k: config[k] for k in ("patch_size", "embed_dim", "depth", "num_heads")},
                       pos_embed="none").eval()
    reference = TimmDistilled(**config).eval()
    assert set(reference.state_dict()) - set(ours.state_dict()) == {"pos_embed"}
    with torch.no_grad():
        for parameter in ours.parameters():
            parameter.normal_(std=0.1)
        reference.load_state_dict({**ours.state_dict(), "pos_embed": torch.zeros_like(reference.pos_embed)})
        x = random_images(1, 28)
        torch.testing.assert_close(ours(x), reference(x), atol=1e-5, rtol=0)


def test_convit_without_pos_embed_matches_timm():
    config = dict(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depth=3, num_heads=4,
                  local_up_to_layer=2)
    torch.manual_seed(0)
    reference = TimmConVit(**{**config, "embed_dim": 8, "qkv_bias": True, "use_pos_embed": False})
    assert_parity_both_ways(lambda: ConViT(**config, pos_embed="none"), reference, random_images(1, 28))


def test_vit_family_without_pos_embed_still_serves_the_analyses():
    x = random_images(1, 28, batch=2)
    for name in ("vit", "deit", "convit", "vit_convstem"):
        model = build_model(name, 10, 28, 1, patch_size=4, embed_dim=32, depth=2, num_heads=2, pos_embed="none",
                            **({"local_up_to_layer": 1} if name == "convit" else {})).eval()
        assert model.pos_embed is None and traits(name).transformer
        with torch.no_grad():
            assert representations(model, x)["patch_embed"].shape[1] == 49 + model.num_prefix_tokens
            assert attention_probs(model, x)[0].shape[-1] == 49 + model.num_prefix_tokens


def test_bad_pos_embed_is_refused_in_one_line():
    with pytest.raises(StudyError, match="pos_embed 'sincos' is not supported; use one of \\('learn', 'none'\\)") \
            as caught:
        build_model("vit", 10, 28, 1, pos_embed="sincos")
    assert "\n" not in str(caught.value)


# --- ConvMixer, Swin and the MLP -----------------------------------------------------------------------

def test_registry_names_the_controls_and_defaults_are_the_study_sizes():
    assert set(CONTROLS) <= set(MODEL_NAMES)
    assert CONVMIXER_DEFAULTS == CONVMIXER_SIZES and SWIN_DEFAULTS == SWIN_SIZES and MLP_DEFAULTS == MLP_SIZES


@pytest.mark.parametrize("name", CONTROLS)
@pytest.mark.parametrize("size, channels, classes", [(28, 1, 10), (32, 3, 100)])
def test_controls_build_for_the_data_and_give_logits(name, size, channels, classes):
    for sizes in ({}, SMALL[name]):  # the study's sizes and small ones
        model = build_model(name, classes, size, channels, **sizes).eval()
        with torch.no_grad():
            logits = model(random_images(channels, size, batch=2))
            features = model.forward_features(random_images(channels, size, batch=2))
            assert logits.shape == (2, classes)
            torch.testing.assert_close(model.forward_head(features), logits)


def test_convmixer_and_swin_are_timms_classes_with_timms_state_dicts():
    convmixer = build_model("convmixer", 10, 28, 1)
    assert type(convmixer) is TimmConvMixer
    TimmConvMixer(166, 4, kernel_size=7, patch_size=4, in_chans=1, num_classes=10).load_state_dict(
        convmixer.state_dict(), strict=True)
    swin = build_model("swin", 10, 28, 1)
    assert type(swin) is TimmSwin
    TimmSwin(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depths=(8, 1), num_heads=(2, 4),
             window_size=3, mlp_ratio=(4.0, 2.0)).load_state_dict(swin.state_dict(), strict=True)


def test_swin_on_the_7x7_grid_has_shifted_windows_and_patch_merging():
    swin = build_model("swin", 10, 28, 1)
    first, second = swin.layers
    assert swin.patch_embed.grid_size == (7, 7)
    assert [block.window_size for block in first.blocks] == [(3, 3)] * 8  # a 7×7 grid padded to 3×3 windows
    assert [block.shift_size for block in first.blocks] == [(0, 0), (1, 1)] * 4  # shifted in every other block
    assert isinstance(second.downsample, PatchMerging) and second.blocks[0].input_resolution == (4, 4)
    assert all(block.drop_path1.__class__.__name__ == "Identity" for block in first.blocks)  # no stochastic depth
    with torch.no_grad():
        stages = swin.forward_intermediates(random_images(1, 28, batch=2), intermediates_only=True)
    assert [tuple(stage.shape) for stage in stages] == [(2, 32, 7, 7), (2, 64, 4, 4)]


def test_mlp_layout():
    model = build_model("mlp", 10, 28, 1, hidden=[32, 16])
    assert [tuple(layer.weight.shape) for layer in model.modules() if isinstance(layer, torch.nn.Linear)] == [
        (32, 784), (16, 32), (10, 16)]
    logistic = build_model("mlp", 10, 28, 1, hidden=[])  # multinomial logistic regression: one Linear
    assert isinstance(logistic, PixelMLP) and count_parameters(logistic) == 784 * 10 + 10


@pytest.mark.parametrize("name", CONTROLS)
def test_a_few_sgd_steps_lower_the_loss(name):
    torch.manual_seed(0)
    model = build_model(name, 10, 28, 1, **SMALL[name]).train()
    x, y = random_images(1, 28, batch=16), torch.arange(16) % 10
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(12):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses  # 16 random images: memorised, given the steps


@pytest.mark.parametrize("name, keys", [
    ("convmixer", ["intermediates.0", "intermediates.1"]),
    ("swin", ["intermediates.0", "intermediates.1"]),
    ("mlp", ["embed", "hidden.0", "hidden.1"]),
])
def test_controls_are_not_transformers_and_expose_representations(name, keys):
    model = build_model(name, 10, 28, 1, **SMALL[name]).eval()
    assert not traits(name).transformer and not traits(name).attention  # fed NHWC as the CNNs, no attention maps
    x = random_images(1, 28, batch=2)
    with torch.no_grad():
        layers = representations(model, x)
        assert list(layers) == keys and all(value.shape[0] == 2 for value in layers.values())
        model.to(memory_format=torch.channels_last)  # as the train stage feeds non-transformers
        model(x.contiguous(memory_format=torch.channels_last))
    with pytest.raises(StudyError, match="attention maps need one of the study's"):
        attention_probs(model, x)


def test_logistic_regression_has_no_representations():
    with pytest.raises(StudyError, match="no intermediate representations") as caught:
        representations(build_model("mlp", 10, 28, 1, hidden=[]), random_images(1, 28))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name, overrides, match", [
    ("convmixer", {"dim": 0}, "dim must be a positive integer, got 0"),
    ("convmixer", {"patch_size": 5}, "convmixer: patch size 5 does not divide image size 28"),
    ("convmixer", {"kernel_size": 2.5}, "kernel_size must be a positive integer"),
    ("convmixer", {"act_layer": "relu"}, "unknown override 'act_layer' for model 'convmixer'; allowed: depth, dim"),
    ("convmixer", {"img_size": 32}, "set it through the data"),
    ("swin", {"depths": []}, "depths must be a non-empty list of positive integers"),
    ("swin", {"num_heads": [2]}, "num_heads \\[2\\] must have one entry per stage"),
    ("swin", {"num_heads": [3, 4]}, "stage 0 has width 32 .*not divisible by its num_heads 3"),
    ("swin", {"window_size": [3, 2]}, "window_size must be a positive integer"),
    ("swin", {"mlp_ratio": [4.0, 2.0, 1.0]}, "mlp_ratio must be a positive number or one per stage \\(2\\)"),
    ("swin", {"patch_size": 3}, "swin: patch size 3 does not divide image size 28"),
    ("swin", {"drop_path_rate": 0.1}, "unknown override 'drop_path_rate' for model 'swin'"),
    ("mlp", {"hidden": 128}, "hidden 128 must be a list of positive integers"),
    ("mlp", {"hidden": [64, 0]}, "must be a list of positive integers"),
    ("mlp", {"width": 64}, "unknown override 'width' for model 'mlp'; allowed: hidden"),
])
def test_bad_control_overrides_are_refused_in_one_line(name, overrides, match):
    with pytest.raises(StudyError, match=match) as caught:
        build_model(name, 10, 28, 1, **overrides)
    assert "\n" not in str(caught.value)


# --- cost against params.yaml's ViT --------------------------------------------------------------------

@pytest.mark.parametrize("name, sizes", [
    ("convmixer", CONVMIXER_SIZES),
    ("swin", SWIN_SIZES),
    ("vit", dict(patch_size=4, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0, pos_embed="none")),
    ("vit", dict(patch_size=4, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0, global_pool="avg")),
])
def test_controls_sized_for_the_study_cost_what_the_vit_costs(name, sizes):
    assert_costs_like_study_vit(name, sizes, within=0.1)


def test_mlp_sized_for_the_study_has_the_vits_parameters():
    from study.core.config import INPUT_SHAPES, NUM_CLASSES, load_params

    params = load_params(ROOT / "params.yaml")
    (side, channels), classes = INPUT_SHAPES[params.data.dataset], NUM_CLASSES[params.data.dataset]
    vit = params.models["vit"]
    vit_params = count_parameters(build_model(vit.arch, classes, side, channels, **vit.arch_args))
    mlp = build_model("mlp", classes, side, channels, **MLP_SIZES)
    assert abs(count_parameters(mlp) / vit_params - 1) <= 0.1
    assert forward_flops(mlp, side, channels) == 2 * (count_parameters(mlp) - sum(MLP_SIZES["hidden"]) - classes)


def test_a_one_hidden_layer_mlp_has_a_depth_axis_for_cka():
    """Its input embedding (the first linear map, before its GELU) and its hidden layer: two layers, so the CKA
    analysis's relative depth is defined; the embedding equals the first Linear applied to the flattened pixels."""
    model = build_model("mlp", 10, 28, 1, hidden=[176]).eval()
    x = random_images(1, 28, batch=3)
    with torch.no_grad():
        layers = representations(model, x)
        assert list(layers) == ["embed", "hidden.0"]
        torch.testing.assert_close(layers["embed"], model.features[1](x.flatten(1)))
        torch.testing.assert_close(layers["hidden.0"], torch.nn.functional.gelu(layers["embed"]))
