"""Two control architectures built from timm's code: ConvMixer (a patchify CNN) and Swin (windowed attention).

Why these two: each keeps one ingredient of the study's ViT and swaps another, so that "ViT beats CNN" can be
pinned on an ingredient rather than on a whole recipe.

* ConvMixer (Trockman & Kolter, 2022, "Patches are all you need?"): the ViT's stem (a ``p×p`` stride-``p``
  patch embedding, so the same ``H/p × W/p`` grid of tokens), then blocks that mix tokens with a depthwise
  ``k×k`` convolution (fixed, translation-equivariant weights) and channels with a ``1×1`` convolution, BatchNorm
  and GELU, global average pooling and a linear head. It is the ViT with attention replaced by convolution.
* Swin (Liu et al., 2021, "Swin Transformer: hierarchical vision transformer using shifted windows"): attention
  only inside local ``w×w`` windows of the token grid, windows shifted by ``⌊w/2⌋`` in every other block so
  neighbouring windows exchange information, patch merging (each ``2×2`` group of tokens concatenated and
  projected to twice the width) between stages, relative position biases, mean pooling. It is the ViT with a
  convolution's locality and hierarchy put back into attention.

Both are timm's classes (``timm.models.convmixer.ConvMixer``, ``timm.models.swin_transformer.SwinTransformer``,
checked against timm 1.0.31), randomly initialised, so their ``state_dict`` is timm's and weights are
interchangeable. timm is imported inside the builders: it adds about a second to a process's start, and the
default study never builds these models.

Swin on the study's images. With patch size 4, Fashion-MNIST's 28×28 gives a 7×7 token grid, and 7 has no
useful window size: timm clamps a window at least as large as the grid to the whole grid and then never shifts
(``SwinTransformerBlock._calc_window_shift``), so ``window_size=7`` is plain global attention, not Swin. A
window that does not divide the side is padded: timm zero-pads the normalised tokens at the bottom and right
before partitioning (``_attn``), runs attention on the padded windows and crops the padding off again; patch
merging pads an odd side by one the same way, so the second stage has a 4×4 grid. In unshifted blocks timm does
not mask the padded positions: real tokens attend to them too (their keys and values are the qkv biases alone).
The study uses ``window_size=3``: a 7×7 grid padded to 9×9 is 3×3
windows of 9 tokens with a shift of 1, the closest this grid comes to Swin-T's 8×8 windows of 7×7 tokens in its
first stage (a window of 4 gives only 2×2 windows, one of 2 sixteen windows of 4 tokens). ``window_size`` is one
int for all stages here (timm reads a pair of ints as one ``(h, w)`` window, not as two stages' sizes). The
study's sizes (see ``tests/models/test_controls.py``) put 8 blocks in the first stage (4 unshifted, 4 shifted)
and one after patch merging: Swin's later stages hold most of its parameters but few of its FLOPs, so matching
the ViT in both needs most blocks where the grid is large. Stochastic depth is off (timm's default of 0.1 is for
ImageNet; the study's ViT has none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from study.core.errors import StudyError


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise StudyError(f"{name} must be a positive integer, got {value!r}")
    return value


def _positive_ints(name: str, value: Any) -> list[int]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value or not all(
            isinstance(item, int) and not isinstance(item, bool) and item > 0 for item in value):
        raise StudyError(f"{name} must be a non-empty list of positive integers, got {value!r}")
    return list(value)


def check_patch_size(model: str, patch_size: int, image_size: int) -> None:
    """Refuse a patch size that does not divide the image side: timm's stems would crop the remainder silently."""
    _positive_int("patch_size", patch_size)
    if image_size % patch_size != 0:
        raise StudyError(f"{model}: patch size {patch_size} does not divide image size {image_size}; choose a "
                         "patch_size that divides the image side")


def build_convmixer(num_classes: int, img_size: int, in_chans: int, dim: int, depth: int, kernel_size: int,
                    patch_size: int) -> nn.Module:
    """timm's ``ConvMixer`` (GELU, average pooling, timm's and PyTorch's default init) for the data's shape."""
    for name, value in (("dim", dim), ("depth", depth), ("kernel_size", kernel_size)):
        _positive_int(name, value)
    check_patch_size("convmixer", patch_size, img_size)
    from timm.models.convmixer import ConvMixer  # here: see the module docstring

    return ConvMixer(dim, depth, kernel_size=kernel_size, patch_size=patch_size, in_chans=in_chans,
                     num_classes=num_classes)


def build_swin(num_classes: int, img_size: int, in_chans: int, embed_dim: int, depths: Sequence[int],
               num_heads: Sequence[int], window_size: int, patch_size: int,
               mlp_ratio: float | Sequence[float]) -> nn.Module:
    """timm's ``SwinTransformer`` for the data's shape, without stochastic depth; one ``window_size`` for all stages.

    Stage ``i`` has width ``embed_dim·2ⁱ``, ``depths[i]`` blocks and ``num_heads[i]`` heads (which must divide the
    width: timm would otherwise shrink the attention width silently). ``mlp_ratio`` is one number or one per stage.
    """
    _positive_int("embed_dim", embed_dim)
    depths, num_heads = _positive_ints("depths", depths), _positive_ints("num_heads", num_heads)
    if len(num_heads) != len(depths):
        raise StudyError(f"num_heads {num_heads} must have one entry per stage, as depths {depths}")
    for stage, heads in enumerate(num_heads):
        width = embed_dim * 2 ** stage
        if width % heads:
            raise StudyError(f"stage {stage} has width {width} (embed_dim x 2^{stage}), not divisible by its "
                             f"num_heads {heads}")
    _positive_int("window_size", window_size)
    ratios = list(mlp_ratio) if isinstance(mlp_ratio, Sequence) and not isinstance(mlp_ratio, str) else [mlp_ratio]
    if len(ratios) not in (1, len(depths)) or not all(
            isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0 for r in ratios):
        raise StudyError(f"mlp_ratio must be a positive number or one per stage ({len(depths)}), got {mlp_ratio!r}")
    check_patch_size("swin", patch_size, img_size)
    from timm.models.swin_transformer import SwinTransformer  # here: see the module docstring

    return SwinTransformer(img_size=img_size, patch_size=patch_size, in_chans=in_chans, num_classes=num_classes,
                           embed_dim=embed_dim, depths=tuple(depths), num_heads=tuple(num_heads),
                           window_size=window_size, mlp_ratio=ratios[0] if len(ratios) == 1 else tuple(ratios),
                           drop_path_rate=0.0)
