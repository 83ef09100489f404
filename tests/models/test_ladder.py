"""Tests for study.models.ladder: with no keyword the rung is the study's ViT; each keyword changes what it says
(timm's ViT without a class token, PoolFormer's pooling, BatchNorm over tokens, the conv stem); refusals; the costs
the ladder's twins are matched on."""

from __future__ import annotations

import pytest
import torch
from timm.models.metaformer import Pooling
from timm.models.vision_transformer import VisionTransformer as TimmViT
from torch import nn

from study.core.errors import StudyError
from study.models import attention_probs, build_model, representations
from study.models.convstem import ConvStem
from study.models.cost import count_parameters, forward_flops
from study.models.ladder import LocalAttention, MetaViT, MixerBlock, TokenBatchNorm, _OnGrid, window_mask
from study.plan.params import plan_params

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread

SMALL = dict(patch_size=4, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0)
STUDY = dict(patch_size=4, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0)  # params.yaml's ViT
NO_TOKEN = dict(class_token=False, global_pool="avg")
# The ladder's spine from rung 2 on, each rung the one before plus one keyword.
RUNGS = [
    {},
    NO_TOKEN,
    {**NO_TOKEN, "pos_embed": "none"},
    {**NO_TOKEN, "pos_embed": "none", "token_mixer": "mean"},
    {**NO_TOKEN, "pos_embed": "none", "token_mixer": "pool"},
    {**NO_TOKEN, "pos_embed": "none", "token_mixer": "dwconv"},
    {**NO_TOKEN, "pos_embed": "none", "token_mixer": "dwconv", "norm": "batchnorm"},
    {**NO_TOKEN, "pos_embed": "none", "token_mixer": "dwconv", "norm": "batchnorm", "stem": "conv"},
]


def _images(batch: int = 4) -> torch.Tensor:
    return torch.randn(batch, 1, 28, 28, generator=torch.Generator().manual_seed(1))


def test_with_no_keyword_the_rung_is_the_study_vit():
    torch.manual_seed(0)
    vit = build_model("vit", 10, 28, 1, **SMALL).eval()
    torch.manual_seed(0)
    rung = build_model("ladder", 10, 28, 1, **SMALL).eval()
    assert isinstance(rung, MetaViT)
    ours, theirs = rung.state_dict(), vit.state_dict()
    assert list(ours) == list(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)  # the same draws
    x = _images()
    with torch.no_grad():
        assert torch.equal(rung(x), vit(x))


@pytest.mark.parametrize("args", RUNGS, ids=[f"rung{i}" for i in range(len(RUNGS))])
def test_every_rung_trains_and_gives_tokens_to_the_analyses(args):
    model = build_model("ladder", 10, 28, 1, **{**SMALL, **args})
    x = _images()
    model(x).sum().backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "cls_token" not in n and "qkv" not in n)
    model.eval()
    with torch.no_grad():
        tokens = representations(model, x)
    prefix = 0 if args.get("class_token") is False else 1
    assert tokens["blocks.1"].shape == (4, 49 + prefix, 32)  # (B, T, D): the 7×7 grid, and the class token
    if args.get("token_mixer", "attention") == "attention":
        with torch.no_grad():
            assert [a.shape for a in attention_probs(model, x)] == [(4, 2, 49 + prefix, 49 + prefix)] * 2
    else:
        with pytest.raises(StudyError, match="no attention maps"):
            attention_probs(model, x)


def test_without_a_class_token_the_rung_loads_into_timms_vit_and_agrees():
    rung = build_model("ladder", 10, 28, 1, **SMALL, **NO_TOKEN).eval()
    assert rung.cls_token is None and rung.num_prefix_tokens == 0 and rung.pos_embed.shape == (1, 49, 32)
    timm = TimmViT(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depth=2, num_heads=2,
                   mlp_ratio=2.0, class_token=False, global_pool="avg").eval()
    timm.load_state_dict(rung.state_dict())  # strict: the same names and shapes
    x = _images()
    with torch.no_grad():
        torch.testing.assert_close(rung(x), timm(x), rtol=1e-5, atol=1e-5)


def test_the_grid_mixers_read_tokens_in_the_patch_grids_raster_order():
    tokens = torch.randn(2, 12, 5)  # (B, h·w, D) for a 3×4 grid
    image = tokens.transpose(1, 2).reshape(2, 5, 3, 4)  # row r, column c is token r·4 + c
    mixed = _OnGrid(Pooling(pool_size=3), (3, 4))(tokens)
    expected = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)(image) - image  # PoolFormer's rule
    torch.testing.assert_close(mixed, expected.flatten(2).transpose(1, 2))


def test_the_mean_mixer_is_the_mean_of_all_tokens_minus_the_token():
    model = build_model("ladder", 10, 28, 1, **SMALL, **NO_TOKEN, token_mixer="mean")
    x = torch.randn(2, 49, 32)
    torch.testing.assert_close(model.blocks[0].token_mixer(x), x.mean(1, keepdim=True).expand_as(x) - x)
    assert not list(model.blocks[0].token_mixer.parameters())  # fixed: nothing to learn


def test_token_batchnorm_is_a_cnns_batchnorm_over_the_grid():
    tokens = torch.randn(4, 49, 8)
    ours, cnn = TokenBatchNorm(8).train(), nn.BatchNorm2d(8).train()
    image = tokens.transpose(1, 2).reshape(4, 8, 7, 7)
    torch.testing.assert_close(ours(tokens), cnn(image).flatten(2).transpose(1, 2))
    torch.testing.assert_close(ours.running_mean, cnn.running_mean)


def test_the_rungs_change_what_they_say_and_nothing_else():
    built = [build_model("ladder", 10, 28, 1, **SMALL, **args) for args in RUNGS]
    assert all(isinstance(b, MixerBlock) for b in built[3].blocks) and all(
        type(b).__name__ == "Block" for b in built[2].blocks)
    assert isinstance(built[4].blocks[0].token_mixer.module, Pooling)
    conv = built[5].blocks[0].token_mixer.module.conv
    assert conv.groups == 32 and conv.kernel_size == (3, 3)
    assert isinstance(built[6].blocks[0].norm1, TokenBatchNorm) and isinstance(built[6].fc_norm, nn.BatchNorm1d)
    assert isinstance(built[5].blocks[0].norm1, nn.LayerNorm)
    assert isinstance(built[7].patch_embed, ConvStem) and not isinstance(built[6].patch_embed, ConvStem)
    keys = [set(b.state_dict()) for b in built]
    # the final LayerNorm moves after the pooling (timm's `fc_norm`), as for the ViT with global_pool avg
    moved = {"norm.weight", "norm.bias"}, {"fc_norm.weight", "fc_norm.bias"}
    assert keys[1] == (keys[0] - {"cls_token"} - moved[0]) | moved[1] and keys[2] == keys[1] - {"pos_embed"}


@pytest.mark.parametrize("args, message", [
    ({"token_mixer": "pool"}, "class_token: false"),
    ({"class_token": False}, "global_pool: avg"),
    ({"token_mixer": "conv"}, "token_mixer 'conv' is not supported"),
    ({"norm": "groupnorm"}, "norm 'groupnorm' is not supported"),
    ({"stem": "conv7"}, "stem 'conv7' is not supported"),
    ({"bogus": 1}, "unknown override 'bogus'"),
    ({"token_mixer": "local_attention"}, "class_token: false"),
    ({**NO_TOKEN, "token_mixer": "local_attention", "attn_window": 4}, "attn_window must be an odd"),
    ({**NO_TOKEN, "attn_window": 5}, "set token_mixer: local_attention"),
    ({**NO_TOKEN, "token_mixer": "pool", "mixer_act": "none"}, "set token_mixer: dwconv"),
    ({**NO_TOKEN, "token_mixer": "dwconv", "mixer_act": "relu"}, "mixer_act 'relu' is not supported"),
])
def test_impossible_rungs_are_refused_in_one_line(args, message):
    with pytest.raises(StudyError, match=message) as err:
        build_model("ladder", 10, 28, 1, **SMALL, **args)
    assert "\n" not in str(err.value)


def test_a_fixed_mixer_halves_the_rung_so_its_twin_widens_the_mlp_back():
    """Where one change moves parameters or FLOPs by more than 25%, the ladder adds a twin matched to the rung below:
    at the study's size the fixed mixers drop attention's 4·D² weights per block (half the rung); an MLP ratio of 4
    instead of 2 puts them back within 25%."""
    def cost(args):
        model = build_model("ladder", 10, 28, 1, **{**STUDY, **args})
        return count_parameters(model), forward_flops(model, 28, 1)

    below = cost(RUNGS[2])
    for mixer in ("mean", "pool", "dwconv"):
        alone, twin = cost({**RUNGS[2], "token_mixer": mixer}), cost({**RUNGS[2], "token_mixer": mixer,
                                                                      "mlp_ratio": 4.0})
        assert alone[0] < 0.6 * below[0] and alone[1] < 0.6 * below[1]
        assert all(abs(t / b - 1) <= 0.25 for t, b in zip(twin, below)), (mixer, twin, below)


# --- the ladder preset and its plan ------------------------------------------------------------------------------

def _ladder_params():
    from pathlib import Path

    from study.core.config import parse_params
    from study.presets import preset_params

    root = Path(__file__).resolve().parents[2]
    return parse_params(preset_params(root, "ladder"), "configs/ladder.yaml")


def test_each_rung_of_the_preset_is_the_one_before_with_one_change():
    params = _ladder_params()
    ladder = plan_params(params).ladder
    recipe = ("optimizer", "lr", "weight_decay", "label_smoothing", "grad_clip")
    for upper, lower in zip(ladder.rungs[1:], ladder.rungs[:-1]):
        a, b = params.models[upper], params.models[lower]
        args = {k for k in set(a.arch_args) | set(b.arch_args) if a.arch_args.get(k) != b.arch_args.get(k)}
        recipes = {k for k in recipe if getattr(a, k) != getattr(b, k)}
        if a.arch == b.arch:
            changes = len(args) + (1 if recipes else 0)
        else:  # a new architecture (the ResNet's hierarchy) on the same recipe, with its own learning rate
            changes = 1 + (1 if recipes - {"lr"} else 0)
        assert changes == 1, (lower, upper, args, recipes)
    assert set(ladder.rungs) | {m for pair in ladder.side for m in pair} <= set(params.baselines)


def test_the_plan_writes_every_step_and_side_pair_out_as_claims_under_every_condition():
    plan = plan_params(_ladder_params())
    steps = len(plan.ladder.rungs) - 1 + len(plan.ladder.side)
    assert len(plan.claims) == steps * len(plan.ladder.conditions) == 24
    first = plan.claims[0]
    assert (first.arm, first.against, first.direction) == ("lad_avg", "vit", 0)
    shuffled = [c for c in plan.claims if c.condition == ("rearrangement", "shuffle", 7.0)]
    assert len(shuffled) == steps and all(c.control == ("rearrangement", "offset", 7.0) for c in shuffled)
    assert plan.declared == "before_runs"


@pytest.mark.parametrize("change, message", [
    ({"rungs": ["vit", "nope"]}, "'nope' is not a model of the study"),
    ({"rungs": ["vit", "resnet", "vit"]}, "duplicate value"),
])
def test_a_ladder_naming_an_unknown_or_repeated_rung_is_refused(change, message):
    from pathlib import Path

    from study.core.config import parse_params
    from study.presets import preset_params

    raw = preset_params(Path(__file__).resolve().parents[2], "ladder")
    raw["analysis"]["plan"]["ladder"].update(change)
    with pytest.raises(StudyError, match=message):
        plan_params(parse_params(raw, "configs/ladder.yaml"))


def test_only_the_attention_rungs_go_to_the_attention_analyses():
    from study.archs import traits

    assert [traits("ladder", {**SMALL, **args}).attention for args in RUNGS] == [True, True, True, False, False,
                                                                                    False, False, False]
    assert traits("vit", SMALL).attention and not traits("resnet8").attention
    for args in RUNGS:  # the rungs without attention refuse the maps, those with it give them
        rung = build_model("ladder", 10, 28, 1, **SMALL, **args)
        if traits("ladder", {**SMALL, **args}).attention:
            assert len(attention_probs(rung, torch.zeros(1, 1, 28, 28))) == SMALL["depth"]
        else:
            with pytest.raises(StudyError, match="no attention maps"):
                attention_probs(rung, torch.zeros(1, 1, 28, 28))


LOCAL = {**NO_TOKEN, "token_mixer": "local_attention"}


def test_the_window_mask_is_each_tokens_neighbourhood_on_the_grid():
    mask = window_mask((3, 4), 3)  # (12, 12), token r·4 + c
    assert mask.shape == (12, 12) and torch.equal(mask, mask.T) and mask.diagonal().all()
    assert mask[0].nonzero().flatten().tolist() == [0, 1, 4, 5]  # a corner: its 2x2 of the 3x3
    assert mask[5].sum() == 9 and mask[5, 10] and not mask[5, 3]  # (1, 1): all 9; (2, 2) in, (0, 3) out
    assert window_mask((3, 4), 7).all()  # a window of the whole grid and more


@pytest.mark.parametrize("norm", ["layernorm", "batchnorm"])
def test_local_attention_with_a_window_over_the_grid_is_the_global_rung_exactly(norm):
    """The same draws and the same state dict as the global-attention rung, and with a window covering the 7x7 grid
    the same outputs, logits, probabilities and gradients, bit for bit."""
    torch.manual_seed(0)
    glob = build_model("ladder", 10, 28, 1, **SMALL, **NO_TOKEN, norm=norm)
    torch.manual_seed(0)
    local = build_model("ladder", 10, 28, 1, **SMALL, **LOCAL, norm=norm, attn_window=13)
    ours, theirs = local.state_dict(), glob.state_dict()
    assert list(ours) == list(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)
    mixers = [m for m in local.modules() if isinstance(m, LocalAttention)]
    assert len(mixers) == 2 and all(m.mask.all() for m in mixers)  # every key in every query's window
    x = _images()
    for model in (glob, local):
        model(x).sum().backward()
    assert torch.equal(local(x), glob(x))
    assert all(torch.equal(a, b) for a, b in zip(attention_probs(local, x), attention_probs(glob, x)))
    grads = [dict((n, p.grad) for n, p in m.named_parameters()) for m in (local, glob)]
    assert all(torch.equal(grads[0][n], grads[1][n]) for n in grads[0])


def test_local_attention_attends_inside_its_window_and_loads_into_timms_vit():
    local = build_model("ladder", 10, 28, 1, **SMALL, **LOCAL).eval()
    x = _images()
    probs = attention_probs(local, x)  # per block (B, H, 49, 49)
    mask = window_mask((7, 7), 3)
    assert len(probs) == 2 and all(torch.equal(p[..., ~mask], torch.zeros_like(p[..., ~mask])) for p in probs)
    torch.testing.assert_close(probs[0].sum(-1), torch.ones(4, 2, 49))
    for module in local.modules():  # the fused kernel with the mask computes the same attention
        if isinstance(module, LocalAttention):
            module.fused_attn = True
    with torch.no_grad():
        fused = local(x)
        for module in local.modules():
            if isinstance(module, LocalAttention):
                module.fused_attn = False
        torch.testing.assert_close(fused, local(x), rtol=1e-5, atol=1e-5)
    timm = TimmViT(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depth=2, num_heads=2,
                   mlp_ratio=2.0, class_token=False, global_pool="avg")
    timm.load_state_dict(local.state_dict())  # strict: the mask is no parameter or persistent buffer
    assert count_parameters(local) == count_parameters(build_model("ladder", 10, 28, 1, **SMALL, **NO_TOKEN))


def test_the_depthwise_mixer_without_its_activation_is_the_convolution_alone():
    plain = build_model("ladder", 10, 28, 1, **SMALL, **NO_TOKEN, pos_embed="none", token_mixer="dwconv",
                        mixer_act="none")
    mixer = plain.blocks[0].token_mixer.module
    assert isinstance(mixer.act, nn.Identity)
    image = torch.randn(2, 32, 7, 7)
    torch.testing.assert_close(mixer(image), mixer.conv(image))
    gelu = build_model("ladder", 10, 28, 1, **SMALL, **NO_TOKEN, pos_embed="none", token_mixer="dwconv")
    assert count_parameters(plain) == count_parameters(gelu) and isinstance(gelu.blocks[0].token_mixer.module.act,
                                                                            nn.GELU)
