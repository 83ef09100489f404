"""The study's ResNet blocks and stochastic depth are torchvision's, restated so that a training process never imports
torchvision (over a second of its start): same construction, same random draws, same arithmetic, so a seed gives
the bytes it gave when the models used torchvision's classes. torchvision is imported here, in the tests only."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn
from torchvision.models.resnet import BasicBlock as TorchvisionBasicBlock
from torchvision.models.resnet import ResNet
from torchvision.ops import StochasticDepth

from study.models import build_model
from study.models.resnet import BasicBlock, PadShortcut
from study.models.vit import DropPath


def _bytes(module: nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)
    return buffer.getvalue()


def _torchvision_resnet18(num_classes: int, in_chans: int, zero_init_residual: bool) -> ResNet:
    """What the study's ResNet-18 was: torchvision's ResNet-18, then its stem swapped for a 3×3 stride-1 conv."""
    model = ResNet(TorchvisionBasicBlock, [2, 2, 2, 2], num_classes=num_classes, zero_init_residual=zero_init_residual)
    model.conv1 = nn.Conv2d(in_chans, 64, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.maxpool = nn.Identity()
    return model


@pytest.mark.parametrize("zero_init_residual", [False, True])
def test_resnet18_is_torchvision_resnet18_weight_for_weight(zero_init_residual):
    torch.manual_seed(0)
    ours = build_model("resnet18", 10, 16, 1, zero_init_residual=zero_init_residual)
    after_ours = torch.rand(4)
    torch.manual_seed(0)
    reference = _torchvision_resnet18(10, 1, zero_init_residual)
    assert list(ours.state_dict()) == list(reference.state_dict())
    assert _bytes(ours) == _bytes(reference)
    assert torch.equal(after_ours, torch.rand(4))  # the same draws consumed: later weights stay the same too
    x = torch.randn(2, 1, 16, 16)
    ours.train(), reference.train()
    torch.testing.assert_close(ours(x), reference(x), rtol=0, atol=0)


@pytest.mark.parametrize("stride, shortcut", [(1, False), (2, True)])
def test_basic_block_is_torchvision_basic_block(stride, shortcut):
    downsample = PadShortcut(stride, 8) if shortcut else None
    torch.manual_seed(1)
    ours = BasicBlock(8, 16 if shortcut else 8, stride, downsample)
    torch.manual_seed(1)
    reference = TorchvisionBasicBlock(8, 16 if shortcut else 8, stride, downsample)
    assert _bytes(ours) == _bytes(reference)
    x = torch.randn(3, 8, 8, 8)
    torch.testing.assert_close(ours(x), reference(x), rtol=0, atol=0)


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.5, 1.0])
def test_drop_path_draws_and_scales_as_torchvision_stochastic_depth(rate):
    x = torch.randn(16, 5, 7)
    ours, reference = DropPath(rate), StochasticDepth(rate, mode="row")
    for training in (True, False):
        ours.train(training), reference.train(training)
        torch.manual_seed(2)
        mine = ours(x)
        after_ours = torch.rand(1)
        torch.manual_seed(2)
        torch.testing.assert_close(mine, reference(x), rtol=0, atol=0)
        assert torch.equal(after_ours, torch.rand(1))


def test_drop_path_refuses_a_rate_outside_zero_to_one_as_torchvision_did():
    with pytest.raises(ValueError, match="between 0 and 1"):
        DropPath(1.5)(torch.ones(2, 3))
