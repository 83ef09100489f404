"""The uniform-attention switch: each head's output is the mean of its values, switching back restores the trained
model exactly, the weights never change, and only models whose every attention is the study's plain Attention get
the variant. The fused-attention switch the scoring uses: the same logits as the explicit path, restored after."""

from __future__ import annotations

import pytest
import torch

from study.models import build_model
from study.models.ablations import fused_attention, has_uniform_variant, uniform_attention
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


def counting_fused_kernel(monkeypatch) -> list[int]:
    """Count the calls of the fused kernel (``F.scaled_dot_product_attention``) from here on."""
    calls = []
    kernel = torch.nn.functional.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return kernel(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    return calls


@pytest.mark.parametrize("arch", ["vit", "deit"])
def test_fused_attention_gives_the_explicit_paths_logits_and_restores_the_switch(arch, monkeypatch):
    torch.manual_seed(1)
    net = build_model(arch, 10, 28, 1, patch_size=4, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0).eval()
    with torch.no_grad():  # larger weights than timm's init, so that attention is far from uniform
        for module in net.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(std=0.1)
    attentions = [m for m in net.modules() if isinstance(m, Attention)]
    attentions[0].fused_attn = False  # a value set before: restored as found, not reset to the default
    x = torch.randn(8, 1, 28, 28)
    calls = counting_fused_kernel(monkeypatch)
    with torch.no_grad():
        explicit = net(x)  # on CPU: explicit softmax attention (fused_attn None or False)
        assert not calls
        with fused_attention(net):
            fused = net(x)
        assert len(calls) == 4  # one per block: the switch reached every Attention
        after = net(x)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=0)
    assert torch.equal(after, explicit) and len(calls) == 4  # switched back: explicit again
    assert [m.fused_attn for m in attentions] == [False, None, None, None]


def test_fused_attention_leaves_models_without_plain_attention_alone():
    convit = model("convit", local_up_to_layer=1)  # block 0 GPSA (no fused form), block 1 plain attention
    resnet = build_model("resnet8", 10, 8, 1, width=8)
    with fused_attention(convit), fused_attention(resnet):
        flags = {type(m).__name__: m.fused_attn for m in convit.modules() if isinstance(m, Attention)}
    assert flags == {"GatedPositionalAttention": False, "Attention": True}


def test_uniform_attention_skips_the_probabilities_and_keeps_the_logits(monkeypatch):
    net = model("vit")
    x = torch.randn(5, 1, 8, 8)
    with torch.no_grad(), uniform_attention(net):
        explicit, probs = net.forward_with_attention(x)  # the (B, H, T, T) rows of 1/T, then @ v
        monkeypatch.setattr(Attention, "_attend", lambda *args: pytest.fail("forward built the probabilities"))
        cheap = net(x)
    assert all(torch.allclose(p, torch.full_like(p, 1 / 17)) for p in probs)
    torch.testing.assert_close(cheap, explicit, atol=1e-5, rtol=0)
