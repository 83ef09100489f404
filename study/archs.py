"""The model registry: every model family the study builds, declared once with its constructor and its traits.

Why one table: :func:`study.models.build_model` builds from it, ``study models`` lists it, and the training stage,
the analyses and the report ask it what a model is (a token sequence or a CNN, how many prefix tokens, whether it
has attention maps) rather than each keeping its own list of names or guessing from a model's attributes.

Plain Python on purpose: a stage that only reads tables (the controls, the report) asks it without importing
torch, and a family's constructor is named as ``"module:attribute"`` and imported only when a model of that family
is built, so a process loads no model file (nor timm, which the controls' constructors import) that it does not
build.

A family's line: its name (``models.<name>.arch`` in params), its constructor, its traits, and the study's defaults
for its ``arch_args`` where they differ from the constructor's own. Every constructor is called with timm's size
keywords, ``constructor(img_size=..., in_chans=..., num_classes=..., **arch_args)``; the ``arch_args`` keys a
family allows are its constructor's other keyword parameters (for a class, its ``__init__``'s and its bases'), so the
schema is the constructor's signature, never a list kept beside it. Adding a family: docs/models.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from study.core.errors import StudyError

TIMM_PREFIX = "timm:"  # ``timm:<name>``: any timm architecture, randomly initialised (study.models.build_model)


@dataclass(frozen=True)
class Traits:
    """What the pipeline asks of a model without looking inside it.

    ``transformer``: a token sequence in timm's ViT layout (prefix tokens, then the patch tokens), fed NCHW images
    and read by the token analyses; everything else (the ResNets, ConvMixer, Swin, whose timm layout is
    channels-last, the MLP) is fed ``channels_last`` as a CNN. ``prefix_tokens``: tokens before the patch tokens,
    timm's ``num_prefix_tokens`` (1 for a class token, 2 for DeiT's class and distillation tokens). ``attention``:
    explicit softmax attention maps through :func:`study.models.attention_probs`, which the attention analyses read.
    """

    transformer: bool
    prefix_tokens: int
    attention: bool


VIT = Traits(transformer=True, prefix_tokens=1, attention=True)
CNN = Traits(transformer=False, prefix_tokens=0, attention=False)
# timm's models are fed as the CNNs are and have no explicit attention maps: the study declares nothing about code it
# does not own (their representations come from timm's forward_intermediates, study.models.representations).
TIMM_TRAITS = CNN


@dataclass(frozen=True)
class Family:
    """One model family: ``name`` builds ``constructor`` (``"module:attribute"``) with ``defaults`` under the
    ``arch_args``; ``traits`` are those of every model it builds, or, where they depend on the ``arch_args`` (a
    ladder rung's), those of its defaults, ``varies`` giving them for any ``arch_args``. ``probe``: a built model runs
    one blank image, for the sizes only a forward pass refuses (timm's layers in the controls)."""

    name: str
    constructor: str
    traits: Traits
    defaults: Mapping[str, Any] = field(default_factory=dict)
    probe: bool = False
    varies: Callable[[Mapping[str, Any]], Traits] | None = None

    def traits_for(self, arch_args: Mapping[str, Any]) -> Traits:
        """The traits of this family's model built with ``arch_args``."""
        return self.traits if self.varies is None else self.varies(arch_args)

    @property
    def is_vit(self) -> bool:
        """Whether every model of the family is a ViT, whatever its ``arch_args``: tokens with a class token and
        attention maps on a patch grid (the models the robustness probes' grid and the report's ViT roles read)."""
        t = self.traits
        return self.varies is None and t.transformer and t.attention and t.prefix_tokens >= 1


# ViT-Tiny's width/depth/heads (Touvron et al., 2021, Table 1) with patch 4, the usual CIFAR patch size.
VIT_DEFAULTS: dict[str, Any] = {"patch_size": 4, "embed_dim": 192, "depth": 12, "num_heads": 3, "mlp_ratio": 4.0}
# ConViT-Ti/S/B (d'Ascoli et al., 2021; timm's convit_tiny/small/base): GPSA in 10 of 12 blocks, α = 1.
CONVIT_DEFAULTS: dict[str, Any] = {"local_up_to_layer": 10, "locality_strength": 1.0}
# The controls at the study's size (1×28×28 Fashion-MNIST, 10 classes): parameters and forward FLOPs within 10% of
# params.yaml's ViT (patch 4, width 64, depth 4, 4 heads, MLP ratio 2); tests/models/test_controls.py checks the
# bounds. ConvMixer: the ViT's depth and patch size, width set to match; kernel 7 spans the 7×7 grid (from the middle
# token) as the paper's kernel 9 spans about half of CIFAR's 16×16 grid at patch 2.
CONVMIXER_DEFAULTS: dict[str, Any] = {"dim": 166, "depth": 4, "kernel_size": 7, "patch_size": 4}
# Swin: the ViT's head width (16) and patch size; study/models/controls.py says why these windows and depths.
SWIN_DEFAULTS: dict[str, Any] = {"embed_dim": 32, "depths": [8, 1], "num_heads": [2, 4], "window_size": 3,
                                 "patch_size": 4, "mlp_ratio": [4.0, 2.0]}
# The MLP: one hidden layer (the classic 784-h-10 net) whose parameters are within 10% of params.yaml's ViT.
MLP_DEFAULTS: dict[str, Any] = {"hidden": [176]}


def _rung_traits(arch_args: Mapping[str, Any]) -> Traits:
    """A ladder rung (study.models.ladder): the ViT's tokens, without a prefix token where ``class_token`` is false,
    with attention maps only while its ``token_mixer`` is an attention (global or local)."""
    return replace(VIT, prefix_tokens=1 if arch_args.get("class_token", True) else 0,
                   attention=arch_args.get("token_mixer", "attention") in ("attention", "local_attention"))


FAMILIES: Mapping[str, Family] = {family.name: family for family in (
    Family("vit", "study.models.vit:VisionTransformer", VIT, VIT_DEFAULTS),
    Family("deit", "study.models.deit:DistilledVisionTransformer", replace(VIT, prefix_tokens=2), VIT_DEFAULTS),
    Family("convit", "study.models.convit:ConViT", VIT, {**VIT_DEFAULTS, **CONVIT_DEFAULTS}),
    Family("vit_convstem", "study.models.convstem:ConvStemViT", VIT, VIT_DEFAULTS),
    Family("resnet18", "study.models.resnet:resnet18", CNN),
    Family("resnet8", "study.models.resnet:resnet8", CNN),
    Family("resnet20", "study.models.resnet:resnet20", CNN),
    Family("convmixer", "study.models.controls:build_convmixer", CNN, CONVMIXER_DEFAULTS, probe=True),
    Family("swin", "study.models.controls:build_swin", CNN, SWIN_DEFAULTS, probe=True),
    Family("mlp", "study.models.mlp:build_mlp", CNN, MLP_DEFAULTS, probe=True),
    Family("ladder", "study.models.ladder:MetaViT", VIT, VIT_DEFAULTS, varies=_rung_traits),
)}
MODEL_NAMES = tuple(FAMILIES)
VIT_FAMILY = tuple(name for name, family in FAMILIES.items() if family.is_vit)


def family(arch: str) -> Family:
    """The registry's entry for ``arch`` (one of ``MODEL_NAMES``); a one-line StudyError naming the choices."""
    if arch not in FAMILIES:
        raise StudyError(f"unknown model {arch!r}; choose one of {', '.join(MODEL_NAMES)} or "
                         f"{TIMM_PREFIX}<timm model name>")
    return FAMILIES[arch]


def traits(arch: str, arch_args: Mapping[str, Any] | None = None) -> Traits:
    """The traits of model ``arch`` built with ``arch_args`` (a run's spec carries both); ``TIMM_TRAITS`` for
    ``timm:<name>``."""
    if arch.startswith(TIMM_PREFIX):
        return TIMM_TRAITS
    return family(arch).traits_for(arch_args or {})
