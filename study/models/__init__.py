"""Build a model by its registry name, sized for the data, and read what the analyses read from it.

Why one entry point: every stage (train, analysis, report) builds models from the same few strings, and every
impossible combination (a patch size that does not divide the image, an image smaller than a ResNet's total
stride, an unknown keyword) must fail here with one readable line instead of deep inside a forward pass.

The names, their constructors and their traits are the registry's (:mod:`study.archs`, re-exported here):

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

A family's ``arch_args`` schema is its constructor's keyword parameters (less the sizes the data sets), which
:func:`build_model` enforces, :func:`architecture_args` lists with their defaults (``study models --available``) and
:func:`check_models` applies to every model of a parameters file (``study check``). Adding an architecture:
docs/models.md.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

import torch
from torch import Tensor, nn

from study.archs import (CONVIT_DEFAULTS, CONVMIXER_DEFAULTS, FAMILIES, MLP_DEFAULTS, MODEL_NAMES, SWIN_DEFAULTS,
                         TIMM_PREFIX, VIT_DEFAULTS, VIT_FAMILY, Family, Traits, family, traits)
from study.core.errors import StudyError

# What the data sets, never an arch_args key: timm's names, and the study's for the image side.
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
    entry = family(name)
    constructor = _constructor(entry)
    _check_overrides(name, overrides, frozenset(_keywords(constructor)))
    model = constructor(img_size=image_size, in_chans=in_chans, num_classes=num_classes,
                        **{**entry.defaults, **overrides})
    if entry.probe:
        _probe_forward(model, name, image_size, in_chans)  # e.g. windows or kernels that cannot run on the grid
    return model


def _constructor(entry: Family) -> Callable[..., nn.Module]:
    """The callable ``entry.constructor`` names (``"module:attribute"``), its module imported now."""
    module, attribute = entry.constructor.split(":")
    return getattr(importlib.import_module(module), attribute)


def _keywords(target: Callable[..., Any]) -> dict[str, Any]:
    """The ``arch_args`` keys ``target`` takes, with its defaults (``None`` where it has none): its keyword
    parameters less the sizes; for a class, those of its ``__init__`` and of its bases', which take what a subclass
    passes on as ``**kwargs``, a subclass's default winning."""
    signatures = ([inspect.signature(c.__init__) for c in target.__mro__ if "__init__" in vars(c)]
                  if isinstance(target, type) else [inspect.signature(target)])
    found: dict[str, Any] = {}
    for signature in reversed(signatures):
        for key, parameter in signature.parameters.items():
            if key == "self" or key in _SIZE_ARGUMENTS or parameter.kind not in (
                    inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
                continue
            found[key] = None if parameter.default is inspect.Parameter.empty else parameter.default
    return found


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


def is_distilled(model: nn.Module) -> bool:
    """Whether ``model`` has a distillation token and head (the study's DeiT)."""
    from study.models.deit import DistilledVisionTransformer

    return isinstance(model, DistilledVisionTransformer)


def attention_probs(model: nn.Module, x: Tensor) -> list[Tensor]:
    """Per-block softmax attention ``(B, heads, T, T)``, for the families whose traits have attention maps.

    For ``convit``'s GPSA blocks it is the gated mix of content and positional attention, with the class
    token, which joins later, as a token at rest (see :mod:`study.models.convit`).
    """
    from study.models.vit import VisionTransformer

    if not isinstance(model, VisionTransformer):
        with_maps = [name for name, entry in FAMILIES.items() if entry.traits.attention]
        raise StudyError(f"attention maps need one of the study's {', '.join(with_maps)}, "
                         f"not {type(model).__name__}")
    return model.attention_probs(x)


__all__ = ["CONVIT_DEFAULTS", "CONVMIXER_DEFAULTS", "FAMILIES", "MLP_DEFAULTS", "MODEL_NAMES", "SWIN_DEFAULTS",
           "TIMM_PREFIX", "VIT_DEFAULTS", "VIT_FAMILY", "Family", "Traits", "architecture_args", "attention_probs",
           "build_model", "check_archs", "check_models", "family", "is_distilled", "representations", "traits"]


def architecture_args(name: str) -> dict[str, Any]:
    """Every ``arch_args`` key that ``build_model(name, ...)`` takes, with its default: the constructor's keywords
    (the same keys :func:`build_model` checks against), the study's defaults first and as params.yaml lists them,
    then the constructor's own, sorted (``None``: the constructor derives it, e.g. the conv stem's channels)."""
    if name not in FAMILIES:
        raise StudyError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    entry = FAMILIES[name]
    keywords = _keywords(_constructor(entry))
    ordered = [*entry.defaults, *sorted(set(keywords) - set(entry.defaults))]
    return {key: entry.defaults[key] if key in entry.defaults else keywords[key] for key in ordered}


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
    the registry's (``MODEL_NAMES``) or ``timm:<a timm model>``. Stages that build models call it before any work."""
    for name, arch in archs.items():
        where = f"{source}: models.{name}.arch"
        if arch in FAMILIES:
            continue
        if not arch.startswith(TIMM_PREFIX):
            raise StudyError(f"{where} = '{arch}': unknown model; choose one of {list(MODEL_NAMES)} or 'timm:<name>'")
        import timm

        if not timm.is_model(arch.removeprefix(TIMM_PREFIX)):
            raise StudyError(f"{where} = '{arch}': timm has no such model (see timm.list_models())")
