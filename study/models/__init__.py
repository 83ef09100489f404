"""One entry point that turns a model name from params.yaml into a module sized for the data.

Why a registry: every stage (train, analysis, report) builds models from the same few strings, and
every impossible combination (a patch size that does not divide the image, an image smaller than a
ResNet's total stride, an unknown keyword) must fail here with one readable line instead of deep inside
a forward pass. Names:

* ``vit``, ``deit`` — the study's ViT and distilled ViT (:mod:`study.models.vit`, :mod:`study.models.deit`);
  defaults are ViT-Tiny-like at patch 4 (``VIT_DEFAULTS``).
* ``convit`` — ConViT (d'Ascoli et al., 2021; :mod:`study.models.convit`): the ViT with gated positional
  self-attention in its first ``local_up_to_layer`` blocks (default 10 of 12, the paper's).
* ``vit_convstem`` — the ViT with Xiao et al.'s (2021) convolutional stem (:mod:`study.models.convstem`).
* ``ladder`` — the ViT with one more keyword per rung of the ladder from the ViT to a CNN (:mod:`study.models.ladder`):
  no class token, another token mixer (fixed global mean, 3×3 pooling, depthwise convolution), BatchNorm, a
  convolutional stem; with no keyword it is ``vit``.
* ``resnet18``, ``resnet8``, ``resnet20`` — small-image ResNets (:mod:`study.models.resnet`).
* Controls, each changing one ingredient of the ViT; their defaults are sized like params.yaml's ViT
  (``tests/models/test_controls.py``):

  - ``convmixer`` — ConvMixer (Trockman & Kolter, 2022), the ViT's patch stem with convolutions instead of
    attention; ``swin`` — Swin (Liu et al., 2021), attention in shifted local windows with patch merging.
    Both are timm's classes (:mod:`study.models.controls`).
  - ``mlp`` — an MLP on the pixels, the floor without any spatial prior (:mod:`study.models.mlp`).

  ``vit``'s own control is ``pos_embed='none'`` (timm's keyword): no position embedding, a bag of patches.
* ``timm:<name>`` — any timm architecture, randomly initialised (never downloaded). Such models have no
  explicit attention maps; :func:`representations` falls back to timm's ``forward_intermediates``
  (keys ``intermediates.{i}``) where the model implements it.

The analyses should call :func:`representations` and :func:`attention_probs` below rather than the
methods, so that unsupported models fail with a :class:`StudyError`.

A name's entry in the tables below is its ``arch_args`` schema: the keys it allows, which :func:`build_model`
enforces, :func:`architecture_args` lists with their defaults (``study models --available``) and
:func:`check_models` applies to every model of a parameters file (``study check``). Adding an architecture:
docs/models.md.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import torch
from torch import Tensor, nn

from study.core.errors import StudyError
from study.archs import VIT_DEFAULTS, VIT_FAMILY  # noqa: F401 (re-exported)
from study.models.controls import CONVMIXER_DEFAULTS, SWIN_DEFAULTS, build_convmixer, build_swin
from study.models.convit import ConViT
from study.models.convstem import ConvStemViT
from study.models.deit import DistilledVisionTransformer
from study.models.ladder import MetaViT
from study.models.mlp import MLP_DEFAULTS, build_mlp
from study.models.resnet import CifarResNet, SmallImageResNet18, check_image_size, resnet8, resnet18, resnet20
from study.models.vit import VisionTransformer

MODEL_NAMES = ("vit", "deit", "convit", "vit_convstem", "resnet18", "resnet8", "resnet20", "convmixer", "swin",
               "mlp", "ladder")
# The study's ViT family: token sequences with a patch grid, explicit attention and a class token.
TIMM_PREFIX = "timm:"
_VIT_OVERRIDES = frozenset(VIT_DEFAULTS) | {"qkv_bias", "global_pool", "pos_embed", "drop_rate", "pos_drop_rate",
                                             "proj_drop_rate", "attn_drop_rate", "drop_path_rate"}
# ConViT-Ti/S/B (d'Ascoli et al., 2021; timm's convit_tiny/small/base): GPSA in 10 of 12 blocks, α = 1.
CONVIT_DEFAULTS: dict[str, Any] = {"local_up_to_layer": 10, "locality_strength": 1.0}
# name -> (class, its defaults beyond VIT_DEFAULTS, allowed override keywords)
_VITS: dict[str, tuple[type[VisionTransformer], dict[str, Any], frozenset[str]]] = {
    "vit": (VisionTransformer, {}, _VIT_OVERRIDES),
    "deit": (DistilledVisionTransformer, {}, _VIT_OVERRIDES),
    "convit": (ConViT, CONVIT_DEFAULTS, _VIT_OVERRIDES | set(CONVIT_DEFAULTS)),
    "vit_convstem": (ConvStemViT, {}, _VIT_OVERRIDES | {"stem_channels"}),
    "ladder": (MetaViT, {}, _VIT_OVERRIDES | {"class_token", "token_mixer", "norm", "stem"}),
}
# name -> (builder, smallest image side, allowed override keywords)
_RESNETS: dict[str, tuple[Callable[..., nn.Module], int, frozenset[str]]] = {
    "resnet18": (resnet18, SmallImageResNet18.min_image_size, frozenset({"zero_init_residual"})),
    "resnet8": (resnet8, CifarResNet.min_image_size, frozenset({"width", "zero_init_residual", "stem_stride"})),
    "resnet20": (resnet20, CifarResNet.min_image_size, frozenset({"width", "zero_init_residual", "stem_stride"})),
}
# name -> (builder taking (num_classes, image_size, in_chans, **arch args), its defaults); every default may be
# overridden, nothing else
_CONTROLS: dict[str, tuple[Callable[..., nn.Module], dict[str, Any]]] = {
    "convmixer": (build_convmixer, CONVMIXER_DEFAULTS),
    "swin": (build_swin, SWIN_DEFAULTS),
    "mlp": (build_mlp, MLP_DEFAULTS),
}
_SIZE_ARGUMENTS = frozenset({"num_classes", "image_size", "img_size", "in_chans"})


def build_model(name: str, num_classes: int, image_size: int, in_chans: int, **overrides: Any) -> nn.Module:
    """Build model ``name`` for ``in_chans × image_size × image_size`` images and ``num_classes`` classes.

    ``overrides`` are architecture keywords (e.g. ``depth=6`` for ``vit``, ``width=8`` for ``resnet8``).
    Raises :class:`StudyError` for anything that cannot work, before any training starts.
    """
    for label, value in (("num_classes", num_classes), ("image_size", image_size), ("in_chans", in_chans)):
        if not isinstance(value, int) or value < 1:
            raise StudyError(f"{label} must be a positive integer, got {value!r}")
    if name.startswith(TIMM_PREFIX):
        return _build_timm(name[len(TIMM_PREFIX):], num_classes, image_size, in_chans, overrides)
    if name in _VITS:
        model_class, defaults, allowed = _VITS[name]
        _check_overrides(name, overrides, allowed)
        return model_class(img_size=image_size, in_chans=in_chans, num_classes=num_classes,
                           **{**VIT_DEFAULTS, **defaults, **overrides})
    if name in _RESNETS:
        builder, min_image_size, allowed = _RESNETS[name]
        _check_overrides(name, overrides, allowed)
        check_image_size(name, image_size, min_image_size)
        return builder(num_classes, in_chans=in_chans, **overrides)
    if name in _CONTROLS:
        builder, defaults = _CONTROLS[name]
        _check_overrides(name, overrides, frozenset(defaults))
        model = builder(num_classes, image_size, in_chans, **{**defaults, **overrides})
        _probe_forward(model, name, image_size, in_chans)  # e.g. windows or kernels that cannot run on the grid
        return model
    raise StudyError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)} or timm:<timm model name>")


def _check_overrides(name: str, overrides: dict[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        hint = " (set it through the data, not as an override)" if set(unknown) & _SIZE_ARGUMENTS else ""
        raise StudyError(f"unknown override {unknown[0]!r} for model {name!r}{hint}; allowed: "
                         f"{', '.join(sorted(allowed)) or 'none'}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _build_timm(model_name: str, num_classes: int, image_size: int, in_chans: int,
                overrides: dict[str, Any]) -> nn.Module:
    """``timm.create_model`` without weights; refuse, in one line, what timm cannot build or run."""
    import timm  # imported here: only `timm:` models need it, and it slows every process's start

    if not timm.is_model(model_name):
        raise StudyError(f"unknown timm model {model_name!r}; see timm.list_models() for valid names")
    reserved = sorted(set(overrides) & (_SIZE_ARGUMENTS | {"pretrained"}))
    if reserved:
        raise StudyError(f"override {reserved[0]!r} is not allowed for timm:{model_name}; the study sets sizes from "
                         "the data and never downloads pretrained weights")
    kwargs = {"pretrained": False, "num_classes": num_classes, "in_chans": in_chans, **overrides}
    input_desc = f"{in_chans}x{image_size}x{image_size} input"
    try:
        try:
            model = timm.create_model(model_name, img_size=image_size, **kwargs)
        except TypeError as error:  # the architecture is size-agnostic and does not take img_size
            if "img_size" not in str(error):
                raise
            model = timm.create_model(model_name, **kwargs)
    except TypeError as error:
        if "unexpected keyword argument" in str(error):
            raise StudyError(f"unknown override for timm:{model_name}: {_first_line(error)}") from error
        raise StudyError(f"timm:{model_name} cannot be built for {input_desc}: {_first_line(error)}") from error
    except Exception as error:
        raise StudyError(f"timm:{model_name} cannot be built for {input_desc}: {_first_line(error)}") from error
    _probe_forward(model, f"timm:{model_name}", image_size, in_chans)
    return model


def _probe_forward(model: nn.Module, label: str, image_size: int, in_chans: int) -> None:
    """Run one blank image through ``model`` in eval mode: many size mismatches only show up here."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(torch.zeros(1, in_chans, image_size, image_size))
    except Exception as error:
        raise StudyError(f"{label} cannot run on {in_chans}x{image_size}x{image_size} input: "
                         f"{_first_line(error)}; use larger images or another model") from error
    finally:
        model.train(was_training)


def representations(model: nn.Module, x: Tensor) -> dict[str, Tensor]:
    """Ordered intermediate activations of ``model`` on ``x``, input side first.

    The study's models use their own ``representations`` method (token tensors for ViT/DeiT, feature
    maps for ResNets); timm models use ``forward_intermediates`` where they have it.
    """
    if hasattr(model, "representations"):
        return model.representations(x)
    if hasattr(model, "forward_intermediates"):
        try:
            features = model.forward_intermediates(x, intermediates_only=True)
        except Exception as error:
            raise StudyError(f"{type(model).__name__}.forward_intermediates failed ({_first_line(error)}); "
                             "use one of the study's models for this analysis") from error
        return {f"intermediates.{index}": feature for index, feature in enumerate(features)}
    raise StudyError(f"{type(model).__name__} exposes no intermediate representations; use one of "
                     f"{', '.join(MODEL_NAMES)} for this analysis")


def is_transformer(model: nn.Module) -> bool:
    """Whether ``model`` is of the ViT family (the study's ``VIT_FAMILY``, timm's ViTs): a token sequence with
    prefix tokens, read by the attention analyses and fed NCHW. Everything else is treated as a CNN (NHWC)."""
    return hasattr(model, "num_prefix_tokens")  # timm's attribute for class/distillation tokens; no CNN has it


def has_attention(model: nn.Module) -> bool:
    """Whether ``model`` is of the ViT family and mixes its tokens by attention: a ladder rung with another mixer
    (:mod:`study.models.ladder`) has tokens but no attention maps."""
    return is_transformer(model) and getattr(model, "token_mixer", "attention") == "attention"


def is_distilled(model: nn.Module) -> bool:
    """Whether ``model`` has a distillation token and head (the study's DeiT)."""
    return isinstance(model, DistilledVisionTransformer)


def attention_probs(model: nn.Module, x: Tensor) -> list[Tensor]:
    """Per-block softmax attention ``(B, heads, T, T)``; only the study's ViT family has it (``VIT_FAMILY``).

    For ``convit``'s GPSA blocks it is the gated mix of content and positional attention, with the class
    token, which joins later, as a token at rest (see :mod:`study.models.convit`).
    """
    if not isinstance(model, VisionTransformer):
        raise StudyError(f"attention maps need one of the study's {', '.join(VIT_FAMILY)}, "
                         f"not {type(model).__name__}")
    return model.attention_probs(x)


__all__ = ["CONVIT_DEFAULTS", "CONVMIXER_DEFAULTS", "MLP_DEFAULTS", "MODEL_NAMES", "SWIN_DEFAULTS", "TIMM_PREFIX",
           "VIT_DEFAULTS", "VIT_FAMILY", "architecture_args", "attention_probs", "build_model", "check_archs",
           "check_models", "has_attention", "is_distilled", "is_transformer", "representations"]


def architecture_args(name: str) -> dict[str, Any]:
    """Every ``arch_args`` key that ``build_model(name, ...)`` takes, with its default: the registry's allowed keys
    (the same sets :func:`build_model` checks against), defaults from the study's tables first, then from the
    builder's or class's signature (``None``: the builder derives it, e.g. the conv stem's channels)."""
    if name in _VITS:
        model_class, defaults, allowed = _VITS[name]
        return _with_defaults(model_class, allowed, {**VIT_DEFAULTS, **defaults})
    if name in _RESNETS:
        builder, _, allowed = _RESNETS[name]
        return _with_defaults(builder, allowed, {})
    if name in _CONTROLS:
        _, defaults = _CONTROLS[name]
        return dict(defaults)
    raise StudyError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")


def _with_defaults(target: Callable[..., Any], keys: frozenset[str], defaults: dict[str, Any]) -> dict[str, Any]:
    """``keys`` with their defaults: from ``defaults``, else from the signatures of ``target`` (for a class, its
    ``__init__`` and those of its bases, which take what a subclass passes on as ``**kwargs``)."""
    signatures = ([inspect.signature(c.__init__) for c in target.__mro__ if "__init__" in vars(c)]
                  if isinstance(target, type) else [inspect.signature(target)])
    found: dict[str, Any] = {}
    for signature in reversed(signatures):  # a subclass's default wins over its base's
        found.update({key: parameter.default for key, parameter in signature.parameters.items()
                      if parameter.default is not inspect.Parameter.empty})
    ordered = [*defaults, *sorted(keys - set(defaults))]  # the study's own sizes first, as params.yaml lists them
    return {key: defaults[key] if key in defaults else found.get(key) for key in ordered if key in keys}


def check_models(models: dict[str, tuple[str, dict[str, Any]]], num_classes: int, image_size: int, in_chans: int,
                 source: str) -> None:
    """Build every ``{name: (arch, arch_args)}`` of a parameters file for the data's shape, on the CPU and without
    training, so that a bad ``arch_args`` key or value fails here, in one line naming ``models.<name>.arch_args``,
    instead of when its stage builds it. Building is how: only the builder knows every value it refuses (a patch
    that does not divide the image, heads that do not divide the width, a window larger than the grid)."""
    for name, (arch, arch_args) in models.items():
        try:
            build_model(arch, num_classes, image_size, in_chans, **arch_args)
        except StudyError as error:
            raise StudyError(f"{source}: models.{name}.arch_args: {error}") from None
        except Exception as error:  # noqa: BLE001 - a builder's own check (an assert, a TypeError) is a bad value
            raise StudyError(f"{source}: models.{name}.arch_args: {arch} cannot be built for {in_chans}x{image_size}"
                             f"x{image_size} input: {_first_line(error)}; fix the value") from None


def check_archs(archs: dict[str, str], source: str) -> None:
    """Every ``models.<name>.arch`` of a parameters file names a model :func:`build_model` can build: one of
    ``MODEL_NAMES`` or ``timm:<a timm model>``. Stages that build models call it before any work."""
    for name, arch in archs.items():
        where = f"{source}: models.{name}.arch"
        if arch in MODEL_NAMES:
            continue
        if not arch.startswith(TIMM_PREFIX):
            raise StudyError(f"{where} = '{arch}': unknown model; choose one of {list(MODEL_NAMES)} or 'timm:<name>'")
        import timm

        if not timm.is_model(arch.removeprefix(TIMM_PREFIX)):
            raise StudyError(f"{where} = '{arch}': timm has no such model (see timm.list_models())")
