"""ResNet baselines for small images (28×28, 32×32): the CNN side of the comparison.

Two families, both with a 3×3 stride-1 stem and no early max-pool, because the ImageNet stem (7×7
stride-2 conv + max-pool) would throw away 15/16 of a 32×32 image before the first residual block:

* :func:`resnet18` — torchvision's ResNet-18 (He et al., 2016, Table 1; 11M parameters, widths 64-512)
  with only the stem swapped, the common CIFAR adaptation. Built exactly as torchvision's ``ResNet`` builds it
  (same modules in the same order, same initialisation and random draws), so weights and ``state_dict`` keys are
  torchvision's; ``tests/models`` checks both against torchvision.
* :func:`resnet8` / :func:`resnet20` — the CIFAR ResNets of He et al. (2016, §4.2): a 3×3 conv with
  ``width`` filters, then 3 stages of ``n`` basic blocks with widths ``width·(1, 2, 4)`` on maps of
  ``S, S/2, S/4``, global average pooling and a linear classifier; depth ``6n + 2``. Shortcuts are the
  paper's option A (identity; subsample and zero-pad channels when the shape changes), so ResNet-20 has
  the paper's 0.27M parameters. The blocks are torchvision's ``BasicBlock`` (:class:`BasicBlock`). These are the lean
  models that train fast on a 2-core CPU. ``stem_stride=2`` (not in the paper) runs every stage on maps a
  quarter the size, for about a quarter of the FLOPs: the default study's ResNet-8, chosen on the validation
  split (params.yaml says what it was compared with).

All expose ``forward_features`` (feature map ``(B, C, h, w)``), ``forward_head`` (pool + linear),
``forward`` and ``representations`` (every residual block's output, for CKA). Nothing here assumes a
memory format, so ``model.to(memory_format=torch.channels_last)`` works.

Image-size rule: the image side must be at least the network's total stride (8 for ResNet-18, 4 for
the CIFAR ResNets; ``min_image_size``). Below that, a stride-2 3×3 conv with padding 1 still yields a
1×1 map, but later stages then see only padding around one pixel and "downsample" nothing.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from study.core.errors import StudyError


# torchvision's ``BasicBlock`` and ResNet construction (``torchvision/models/resnet.py``, torchvision 0.29), restated
# here because importing torchvision for them imports ``torch._dynamo`` too, over a second of the start of every
# process that builds a model, on a 2-core CPU. Same module names, creation order and initialisation, so a seed
# gives the same weights and a state_dict the same keys and bytes as the torchvision classes did.


def _conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """He et al.'s (2016) basic residual block: two 3×3 convs with BN, ReLU after each and after the sum."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv3x3(inplanes, planes, stride)  # the conv path downsamples when stride != 1
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class _ResNetInterface:
    """The study's model interface, for modules with conv1/bn1/relu/maxpool, stages, avgpool, fc."""

    stage_names: tuple[str, ...]
    min_image_size: int

    def _stem(self, x: Tensor) -> Tensor:
        return self.maxpool(self.relu(self.bn1(self.conv1(x))))

    def forward_features(self, x: Tensor) -> Tensor:
        """Image ``(B, C, H, W)`` -> last feature map ``(B, C', h, w)``."""
        x = self._stem(x)
        for name in self.stage_names:
            x = getattr(self, name)(x)
        return x

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """Feature map -> logits ``(B, num_classes)`` (or the pooled features ``(B, C')``)."""
        x = self.avgpool(x).flatten(1)  # (B, C', 1, 1) -> (B, C')
        return x if pre_logits else self.fc(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))

    def representations(self, x: Tensor) -> dict[str, Tensor]:
        """Ordered feature maps ``(B, C, h, w)``: ``stem``, then ``layer{i}.{j}`` for every residual block."""
        x = self._stem(x)
        out = {"stem": x}
        for name in self.stage_names:
            for index, block in enumerate(getattr(self, name)):
                x = block(x)
                out[f"{name}.{index}"] = x
        return out


def _init_convs_and_norms(model: nn.Module, zero_init_residual: bool) -> None:
    """He (fan-out) init for convs, BN to identity; optionally zero each block's last BN (Goyal et al.,
    2017) so every residual block starts as the identity. The same scheme as torchvision's ResNet."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    if zero_init_residual:
        for module in model.modules():
            if isinstance(module, BasicBlock):
                nn.init.zeros_(module.bn2.weight)


def _resnet18_layer(inplanes: int, planes: int, stride: int) -> nn.Sequential:
    """torchvision's ``ResNet._make_layer`` for two basic blocks: a 1×1 conv + BN shortcut where the shape changes."""
    downsample = None
    if stride != 1 or inplanes != planes:
        downsample = nn.Sequential(nn.Conv2d(inplanes, planes, kernel_size=1, stride=stride, bias=False),
                                   nn.BatchNorm2d(planes))
    return nn.Sequential(BasicBlock(inplanes, planes, stride, downsample), BasicBlock(planes, planes))


class SmallImageResNet18(_ResNetInterface, nn.Module):
    """torchvision's ResNet-18 with a 3×3 stride-1 stem and no max-pool; state_dict keys unchanged."""

    stage_names = ("layer1", "layer2", "layer3", "layer4")
    min_image_size = 8  # three stride-2 stages: 8 -> 4 -> 2 -> 1

    def __init__(self, num_classes: int, in_chans: int = 3, zero_init_residual: bool = False) -> None:
        super().__init__()
        # torchvision's ResNet(BasicBlock, [2, 2, 2, 2]) first, its ImageNet stem included: building and
        # initialising that 7×7 conv draws from the random stream, and skipping it would change every later weight.
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = _resnet18_layer(64, 64, stride=1)
        self.layer2 = _resnet18_layer(64, 128, stride=2)
        self.layer3 = _resnet18_layer(128, 256, stride=2)
        self.layer4 = _resnet18_layer(256, 512, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        _init_convs_and_norms(self, zero_init_residual)
        # Then the small-image stem, replacing the 7×7 conv in place (the state_dict keeps its key order).
        self.conv1 = nn.Conv2d(in_chans, 64, kernel_size=3, stride=1, padding=1, bias=False)
        nn.init.kaiming_normal_(self.conv1.weight, mode="fan_out", nonlinearity="relu")
        self.maxpool = nn.Identity()


class PadShortcut(nn.Module):
    """He et al.'s option-A shortcut: subsample by ``stride`` and zero-pad the new channels (no params)."""

    def __init__(self, stride: int, extra_channels: int) -> None:
        super().__init__()
        self.stride = stride
        self.extra_channels = extra_channels

    def forward(self, x: Tensor) -> Tensor:
        x = x[:, :, ::self.stride, ::self.stride]  # (B, C, H, W) -> (B, C, ⌈H/s⌉, ⌈W/s⌉), as the conv path
        return F.pad(x, (0, 0, 0, 0, 0, self.extra_channels))  # (B, C, h, w) -> (B, C + extra, h, w)


def _stage(in_width: int, out_width: int, blocks: int, stride: int) -> nn.Sequential:
    shortcut = None
    if stride != 1 or in_width != out_width:
        shortcut = PadShortcut(stride, out_width - in_width)
    layers = [BasicBlock(in_width, out_width, stride=stride, downsample=shortcut)]
    layers += [BasicBlock(out_width, out_width) for _ in range(blocks - 1)]
    return nn.Sequential(*layers)


class CifarResNet(_ResNetInterface, nn.Module):
    """He et al. (2016) §4.2 ResNet of depth ``6·blocks_per_stage + 2``, stage widths ``width·(1, 2, 4)``."""

    stage_names = ("layer1", "layer2", "layer3")
    min_image_size = 4  # two stride-2 stages: 4 -> 2 -> 1

    def __init__(self, blocks_per_stage: int, num_classes: int, in_chans: int = 3, width: int = 16,
                 zero_init_residual: bool = False, stem_stride: int = 1) -> None:
        super().__init__()
        if blocks_per_stage < 1 or width < 1:
            raise StudyError(f"a CIFAR ResNet needs blocks_per_stage >= 1 and width >= 1, got "
                             f"{blocks_per_stage} and {width}")
        if stem_stride not in (1, 2):
            raise StudyError(f"stem_stride must be 1 or 2, got {stem_stride!r}")
        widths = (width, 2 * width, 4 * width)
        self.conv1 = nn.Conv2d(in_chans, width, kernel_size=3, stride=stem_stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity()  # no early pooling: the paper's CIFAR nets keep the full map
        self.layer1 = _stage(width, widths[0], blocks_per_stage, stride=1)
        self.layer2 = _stage(widths[0], widths[1], blocks_per_stage, stride=2)
        self.layer3 = _stage(widths[1], widths[2], blocks_per_stage, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[2], num_classes)
        _init_convs_and_norms(self, zero_init_residual)


def check_image_size(name: str, image_size: int | None, min_image_size: int) -> None:
    """Refuse images smaller than the network's total stride (see the module docstring); ``None``: not checked."""
    if image_size is not None and image_size < min_image_size:
        raise StudyError(f"{name} downsamples by {min_image_size}x, so {image_size}x{image_size} images are too "
                         f"small; use images of at least {min_image_size}x{min_image_size} or a smaller model")


# The builders take timm's size keyword ``img_size`` as every registry constructor does (study.archs); a ResNet's
# layers do not depend on it, so it is only checked against the network's total stride.


def resnet18(num_classes: int, in_chans: int = 3, zero_init_residual: bool = False, *,
             img_size: int | None = None) -> SmallImageResNet18:
    """ResNet-18 (11.2M parameters at 10 classes) with the small-image stem."""
    check_image_size("resnet18", img_size, SmallImageResNet18.min_image_size)
    return SmallImageResNet18(num_classes, in_chans=in_chans, zero_init_residual=zero_init_residual)


def resnet8(num_classes: int, in_chans: int = 3, width: int = 16, zero_init_residual: bool = False,
            stem_stride: int = 1, *, img_size: int | None = None) -> CifarResNet:
    """CIFAR ResNet-8 (n = 1): 7 convs + 1 linear; 75k parameters at width 16, 10 classes."""
    check_image_size("resnet8", img_size, CifarResNet.min_image_size)
    return CifarResNet(1, num_classes, in_chans=in_chans, width=width, zero_init_residual=zero_init_residual,
                       stem_stride=stem_stride)


def resnet20(num_classes: int, in_chans: int = 3, width: int = 16, zero_init_residual: bool = False,
             stem_stride: int = 1, *, img_size: int | None = None) -> CifarResNet:
    """CIFAR ResNet-20 (n = 3): 19 convs + 1 linear; 0.27M parameters at width 16, 10 classes."""
    check_image_size("resnet20", img_size, CifarResNet.min_image_size)
    return CifarResNet(3, num_classes, in_chans=in_chans, width=width, zero_init_residual=zero_init_residual,
                       stem_stride=stem_stride)
