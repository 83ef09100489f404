"""A ViT with a convolutional stem (Xiao et al., 2021, "Early convolutions help transformers see better").

Why: the ViT's patchify stem (a ``p×p`` stride-``p`` convolution) is what Xiao et al. blame for its optimisation
troubles; replacing it with a few stride-2 ``3×3`` convolutions (BatchNorm + ReLU) and a final ``1×1``
convolution to the width made ViTs train faster, less sensitive to the optimiser and learning rate, and more
accurate at equal FLOPs. The stem's output is the same ``H/p × W/p`` token grid, so everything after
it (class token, position embedding, blocks, head, the analyses) is the study's ViT unchanged.

Stem for patch size ``p = 2ⁿ``, width ``D`` (their ViT_C)::

    image (C×H×W) -> n × [3×3 conv, stride 2, no bias -> BatchNorm -> ReLU] -> 1×1 conv to D (with bias)

with channels doubling to ``D`` at the last ``3×3`` conv (``D/2ⁿ⁻¹, …, D/2, D``; their ViT_C-1GF: 24, 48, 96,
192 for D = 192, with 11 blocks instead of 12), unless ``stem_channels`` lists them. A patch size that is not a
power of two has no such stack and is refused. Xiao et al. remove one transformer block to pay for the stem's
FLOPs; here that is the ``depth`` argument, set by the preset (with ``stem_channels`` to make the trade even:
see ``tests/models/test_convstem.py`` for the study's sizes).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from study.core.errors import StudyError
from study.models.vit import PatchEmbed, VisionTransformer


def _halvings(patch_size: tuple[int, int]) -> int:
    """``n`` with ``p = 2ⁿ`` for a square patch of side ``p ≥ 2``; a one-line StudyError otherwise."""
    side = patch_size[0]
    if patch_size[0] != patch_size[1] or side < 2 or side & (side - 1):
        raise StudyError(f"a convolutional stem needs a square power-of-two patch_size >= 2 (one stride-2 conv per "
                         f"halving), got {patch_size[0] if patch_size[0] == patch_size[1] else patch_size}")
    return side.bit_length() - 1


class ConvStem(PatchEmbed):
    """:class:`PatchEmbed`'s geometry (and its checks) with the projection replaced by Xiao et al.'s stem.

    ``proj`` is the whole stem, so :meth:`PatchEmbed.forward` still maps ``(B, C, H, W)`` -> ``(B, N, D)``.
    """

    def __init__(self, img_size: int | tuple[int, int], patch_size: int | tuple[int, int], in_chans: int,
                 embed_dim: int, stem_channels: Sequence[int] | None = None) -> None:
        super().__init__(img_size, patch_size, in_chans, embed_dim)  # the patch size divides the image
        convs = _halvings(self.patch_size)
        if stem_channels is None:
            stem_channels = [max(1, embed_dim >> (convs - 1 - index)) for index in range(convs)]
        stem_channels = list(stem_channels)
        if len(stem_channels) != convs or not all(isinstance(c, int) and c > 0 for c in stem_channels):
            raise StudyError(f"stem_channels {stem_channels} must list {convs} positive integers, one per stride-2 "
                             f"conv of patch size {self.patch_size[0]}")
        layers: list[nn.Module] = []
        channels = in_chans
        for out_channels in stem_channels:
            # 3×3, stride 2, padding 1 halves an even side exactly; no bias, BatchNorm supplies it.
            conv = nn.Conv2d(channels, out_channels, kernel_size=3, stride=2, padding=1, bias=False)
            nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")  # as the study's ResNets
            layers += [conv, nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)]
            channels = out_channels
        # The 1×1 conv to the width keeps PyTorch's default init, as the patch projection it stands in for.
        layers.append(nn.Conv2d(channels, embed_dim, kernel_size=1))
        self.stem_channels = tuple(stem_channels)
        self.proj = nn.Sequential(*layers)  # (B, C, H, W) -> (B, D, H/p, W/p)


class ConvStemViT(VisionTransformer):
    """The study's ViT with :class:`ConvStem` as ``patch_embed``; keyword arguments as the ViT's, plus
    ``stem_channels`` (the ``3×3`` convs' widths; default doubling up to ``embed_dim``)."""

    def __init__(self, stem_channels: Sequence[int] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        patchify = self.patch_embed
        self.patch_embed = ConvStem(patchify.img_size, patchify.patch_size, patchify.proj.in_channels,
                                    self.embed_dim, stem_channels)
