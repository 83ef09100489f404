"""What CKA compares: three readings of a model's layers, one function each, all ``(model, images) -> {layer: (B, ...)}``
ordered input to output.

Why more than one. CKA (Kornblith et al. 2019) of two networks' layers only says something when its chance level,
the same comparison between two random initialisations, lies below the trained values. For ViTs read on the
residual stream (Raghu et al. 2021 compare the tokens after each block) it does not: at initialisation every block
adds almost nothing (timm's init draws its linear weights with std 0.02, so each block is close to the identity),
the stream is the patch + position embedding carried through the skip connections, and two random ViTs give CKA
near 1 at every depth — above the trained values, so the stream cannot tell fractions apart. Hence:

- :func:`residual_stream` — the stream itself (each block's output; a ResNet's feature maps), the reading of
  every CKA table but ``cka_readings`` (which sets all three side by side); kept for comparison, its chance level
  is the problem above;
- :func:`block_updates` — what each block *adds* to the stream: for the study's ViT family a block's output minus
  its input (both attention and MLP updates, summed), for a ResNet's basic blocks the residual branch (the output
  of the block's last BatchNorm, before the shortcut is added). The skip connection's copy of the input, which
  makes any two random ViTs alike, is taken out; what remains is what the block computes. The first layer is the
  input embedding (patch embedding or stem), as in the stream, so the embedding-is-left-out rule of
  :mod:`study.cka.similarity` applies unchanged. Models with neither (timm's, say) keep their stream;
  their layers are then named as the stream's;
- :func:`pooled_features` — the one vector per image the head reads (``forward_head(..., pre_logits=True)``: the
  class token after the final norm for the ViT, the mean of the two prefix tokens for DeiT, the global average of
  the last feature map for a ResNet): the representation the classifier uses. It is recorded after the input
  embedding, so that it too has a first layer to leave out, and its "mean over depth" is the pooled CKA itself.

Measured on the default study (3 seeds, CKA to another seed's model at the largest fraction, chance = two seeds'
initial weights): for vit and deit the chance level is 0.98–1.00 in all three readings, above every trained value
(stream 0.90–0.92, updates 0.59–0.67, pooled 0.35–0.62). At initialisation a ViT is close to a linear map of the
pixels (small weights, near-uniform attention, GELU near its linear part), and linear CKA of two random, nearly
isotropic linear maps of the same inputs is near 1 whatever is read; training makes the features nonlinear and
lowers CKA. No reading removes that, so the report draws no claim where the chance level is not below the values
(:mod:`study.cka.report`); table ``cka_readings`` keeps all three.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from study.models import representations
from study.models.resnet import BasicBlock
from study.models.vit import VisionTransformer

Features = Callable[[nn.Module, Tensor], dict[str, Tensor]]
POOLED = "pooled"  # the one layer of pooled_features


def residual_stream(model: nn.Module, x: Tensor) -> dict[str, Tensor]:
    """The model's recorded layers as they are (:func:`study.models.representations`): tokens ``(B, T, D)`` after
    each block of a ViT, feature maps ``(B, C, h, w)`` after each block of a ResNet."""
    return representations(model, x)


def block_updates(model: nn.Module, x: Tensor) -> dict[str, Tensor]:
    """The input embedding, then what each residual block adds (module docstring); the stream where the model has
    no residual blocks this function knows."""
    if isinstance(model, VisionTransformer):
        return _token_updates(representations(model, x))
    branches = [(name, module) for name, module in model.named_modules() if isinstance(module, BasicBlock)]
    if branches:
        return _branch_outputs(model, x, branches)
    return representations(model, x)


def _token_updates(stream: dict[str, Tensor]) -> dict[str, Tensor]:
    """``patch_embed`` as it is, then ``blocks.i`` minus the tokens entering block i, each ``(B, T, D)``. The final
    norm is not an update of the stream and is left out."""
    out = {"patch_embed": stream["patch_embed"]}
    previous = stream["patch_embed"]
    for name, tokens in stream.items():
        if name.startswith("blocks."):
            out[name] = tokens - previous  # (B, T, D): the attention and MLP updates of this block, summed
            previous = tokens
    return out


def _branch_outputs(model: nn.Module, x: Tensor, blocks: list[tuple[str, nn.Module]]) -> dict[str, Tensor]:
    """The first recorded layer (the stem) of the stream, then each basic block's residual branch ``(B, C, h, w)``
    (its ``bn2`` output, before the shortcut is added), caught by forward hooks during the same forward pass."""
    branches: dict[str, Tensor] = {}
    hooks = [block.bn2.register_forward_hook(
        lambda _module, _inputs, output, name=name: branches.__setitem__(name, output.clone()))
        for name, block in blocks]
    try:
        stream = representations(model, x)  # the block adds the shortcut in place: clone() keeps the branch alone
    finally:
        for hook in hooks:
            hook.remove()
    first = next(iter(stream))
    return {first: stream[first], **{name: branches[name] for name, _ in blocks}}


def pooled_features(model: nn.Module, x: Tensor) -> dict[str, Tensor]:
    """The input embedding (the stream's first layer), then ``{"pooled": (B, D)}``: the vector the classification
    head reads."""
    stream = representations(model, x)
    first = next(iter(stream))
    return {first: stream[first], POOLED: model.forward_head(model.forward_features(x), pre_logits=True)}


MEASURES: dict[str, Features] = {"stream": residual_stream, "update": block_updates, "pooled": pooled_features}

