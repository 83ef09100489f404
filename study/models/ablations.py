"""Test-time ablations of a trained model: what its attention is worth, measured by taking it away.

:func:`uniform_attention` replaces every attention row of a built ViT by the uniform average over its tokens
(probability 1/T for each of the T tokens, prefix tokens included: the class token, and DeiT's distillation
token, are averaged in like any patch), so each head passes on the mean of its values to every position. Nothing
is retrained: the difference between the model's accuracy with and without the switch is the accuracy its learned
attention pattern carries (the robustness stage scores both, :mod:`study.robustness.scoring`).

Only modules whose class is exactly :class:`study.models.vit.Attention` are switched: they read the attribute
``Attention.uniform``. A subclass with its own attention rule (ConViT's gated positional attention) ignores it, so
a model holding one has no uniform variant at all (:func:`has_uniform_variant`) rather than one whose first
blocks keep their attention; a model without study attention (the ResNet) has none either.

Why an attribute switched on and off rather than a copy of the model: a copy would double a run's memory in
every scoring process, and setting a flag on a dozen modules costs nothing per batch; the switch adds no
parameter or buffer, so the model's ``state_dict`` is the trained one throughout.

:func:`fused_attention` is the same kind of switch for speed, not an ablation: within it the study's plain
Attention computes softmax attention with PyTorch's fused kernel (``F.scaled_dot_product_attention``) on the CPU
too, where it is otherwise explicit (``Attention.fused_attn`` is None: fused on a GPU only). The robustness stage
scores in it: for inference at batch 250 the fused kernel scored the patch-4 ViT (50 tokens) faster than the
explicit path on a 2-core CPU (docs/robustness.md, "Scoring speed"), while training keeps the explicit path that
was faster for it. The same function up to rounding (tests/models/test_ablations.py: logits to 1e-5).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn

from study.models.vit import Attention


def _attention_modules(model: nn.Module) -> tuple[list[Attention], bool]:
    """The model's plain study Attention modules, and whether it holds any other (subclassed) one."""
    plain = [m for m in model.modules() if type(m) is Attention]
    other = any(isinstance(m, Attention) and type(m) is not Attention for m in model.modules())
    return plain, other


def has_uniform_variant(model: nn.Module) -> bool:
    """Whether :func:`uniform_attention` can make every attention of ``model`` uniform: it has study Attention
    modules and no other kind of attention (a ConViT's GPSA blocks would keep theirs, a ResNet has none)."""
    plain, other = _attention_modules(model)
    return bool(plain) and not other


@contextlib.contextmanager
def uniform_attention(model: nn.Module) -> Iterator[nn.Module]:
    """Within the block, every study Attention of ``model`` attends uniformly (1/T over all T tokens, prefix tokens
    included); on leaving, each gets its softmax attention back, also after an error. Raises ValueError for a model
    without a uniform variant (:func:`has_uniform_variant`), so that a half-ablated model is never scored."""
    if not has_uniform_variant(model):
        raise ValueError(f"{type(model).__name__} has no uniform-attention variant: it needs study Attention "
                         "modules and no other kind of attention")
    modules, _ = _attention_modules(model)
    before = [module.uniform for module in modules]  # restored as found, so the switch also nests
    for module in modules:
        module.uniform = True  # an instance attribute shadowing the class default
    try:
        yield model
    finally:
        for module, was in zip(modules, before):
            module.uniform = was


@contextlib.contextmanager
def fused_attention(model: nn.Module) -> Iterator[nn.Module]:
    """Within the block, every plain study Attention of ``model`` uses the fused softmax kernel on any device
    (``fused_attn = True``); on leaving, each gets its previous ``fused_attn`` back, also after an error. A model
    without such modules (a CNN, timm's models, a ConViT's GPSA blocks, which have no fused form) is left as it is.
    Uniform attention (:func:`uniform_attention`) takes precedence inside ``Attention.forward``, so the two nest."""
    modules, _ = _attention_modules(model)
    before = [module.fused_attn for module in modules]  # restored as found, so the switch also nests
    for module in modules:
        module.fused_attn = True  # an instance attribute shadowing the class default (None: on a GPU only)
    try:
        yield model
    finally:
        for module, was in zip(modules, before):
            module.fused_attn = was
