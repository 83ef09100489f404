"""The uniform-attention switch: each head's output is the mean of its values, switching back restores the trained
model exactly, the weights never change, and only models whose every attention is the study's plain Attention get
the variant."""

from __future__ import annotations

import pytest
import torch

from study.models import build_model
from study.models.ablations import has_uniform_variant, uniform_attention
from study.models.vit import Attention

SMALL = {"patch_size": 2, "embed_dim": 16, "depth": 2, "num_heads": 2}


def model(arch: str, **extra) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(arch, 10, 8, 1, **{**SMALL, **extra}).eval()


@pytest.mark.parametrize("fused", [False, True])
def test_uniform_attention_is_the_mean_of_the_values_on_either_path(fused):
    torch.manual_seed(0)
    attention = Attention(16, 2).eval()
    attention.fused_attn = fused  # the fused kernel, as on a GPU, must be bypassed too
    x = torch.randn(3, 5, 16)  # (B, T, D)
    q, k, v = attention._split_heads(x)  # each (B, H, T, D/H)
    expected = attention._merge_heads(v.mean(dim=2, keepdim=True).expand_as(v))  # every query: the mean value
    attention.uniform = True
    torch.testing.assert_close(attention(x), expected)
    _, probs = attention.forward_with_attention(x)
    torch.testing.assert_close(probs, torch.full((3, 2, 5, 5), 1 / 5))


@pytest.mark.parametrize("arch", ["vit", "deit"])
def test_switching_back_restores_the_logits_and_the_weights_never_change(arch):
    net = model(arch)
    x = torch.randn(4, 1, 8, 8)
    state = {name: tensor.clone() for name, tensor in net.state_dict().items()}
    with torch.no_grad():
        before = net(x)
        with uniform_attention(net):
            ablated = net(x)
            assert net.state_dict().keys() == state.keys()
        after = net(x)
    assert not torch.allclose(ablated, before)
    assert torch.equal(after, before)
    for name, tensor in net.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    assert not any(m.uniform for m in net.modules() if isinstance(m, Attention))


def test_the_switch_makes_every_block_uniform_prefix_tokens_included():
    net = model("deit")  # two prefix tokens: T = 16 patches + 2
    with torch.no_grad(), uniform_attention(net):
        probs = net.attention_probs(torch.randn(2, 1, 8, 8))
    assert len(probs) == 2 and all(torch.allclose(p, torch.full_like(p, 1 / 18)) for p in probs)


def test_switching_back_also_after_an_error():
    net = model("vit")
    with pytest.raises(RuntimeError), uniform_attention(net):
        raise RuntimeError("scoring failed")
    assert not any(m.uniform for m in net.modules() if isinstance(m, Attention))


def test_only_models_whose_attention_is_all_plain_get_the_variant():
    assert has_uniform_variant(model("vit")) and has_uniform_variant(model("deit"))
    resnet = build_model("resnet8", 10, 8, 1, width=8)
    convit = model("convit", local_up_to_layer=1)  # its first block's GPSA would keep its attention
    for net in (resnet, convit):
        assert not has_uniform_variant(net)
        with pytest.raises(ValueError, match="no uniform-attention variant"), uniform_attention(net):
            pass
