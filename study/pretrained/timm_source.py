"""timm architectures with local weights, and timm ViTs turned into the study's ViT.

``timm.create_model(name, pretrained=False)`` builds the architecture (never downloads), then the weights come
from a local file. The classifier is resized to the weights' class count first, so a fine-tuned head loads.
A timm ViT or DeiT whose layout is the plain one the study's ViT copies (class token, learned position
embedding, pre-norm blocks without layer scale or q/k norm) is moved into the study's model, which exposes
attention maps; the move is kept only if both give the same logits on a test input. Other models (ResNets,
ConvNeXts, ViTs with register tokens …) stay timm modules: CKA reads ``forward_intermediates``, and they
have no attention maps.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import Tensor, nn

from study.core.errors import StudyError
from study.models.deit import DistilledVisionTransformer
from study.models.vit import VisionTransformer
from study.pretrained.images import Preprocessing
from study.pretrained.weights import read_state_dict

# Largest |logit difference| accepted between a timm ViT and its study copy (float32, one input).
CONVERSION_TOLERANCE = 1e-4


def load_timm(name: str, weights: Path) -> tuple[nn.Module, Preprocessing]:
    """timm model ``name`` with the weights in ``weights``, in eval mode (the study's ViT where it can be)."""
    import timm

    if not timm.is_model(name):
        raise StudyError(f"unknown timm model {name!r}; see timm.list_models() for valid names")
    state = read_state_dict(weights)
    model = timm.create_model(name, pretrained=False)
    _fit_classifier(model, state)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as error:
        first = " ".join(str(error).split())[:240]
        raise StudyError(f"{weights}: the weights do not fit timm:{name} ({first})") from None
    model.eval()
    return _as_study_vit(model), _preprocessing(model, name)


def _fit_classifier(model: nn.Module, state: dict[str, Tensor]) -> None:
    """Resize the classifier to the weights' class count (a head fine-tuned on another label set)."""
    classifier = model.pretrained_cfg.get("classifier")
    names = classifier if isinstance(classifier, (list, tuple)) else [classifier]
    weight = state.get(f"{names[0]}.weight") if names[0] else None
    if weight is not None and weight.ndim >= 2 and weight.shape[0] != model.num_classes:
        model.reset_classifier(int(weight.shape[0]))


def _preprocessing(model: nn.Module, name: str) -> Preprocessing:
    """timm's evaluation transform from ``resolve_data_config``: resize to size / crop_pct, centre crop."""
    from timm.data import resolve_data_config

    config = resolve_data_config(model=model)
    _, height, width = config["input_size"]
    crop_pct, mode = config.get("crop_pct", 1.0), config.get("crop_mode", "center")
    if mode not in ("center", "squash"):
        raise StudyError(f"timm:{name}: crop_mode {mode!r} is not supported (center or squash)")
    scaled = (math.floor(height / crop_pct), math.floor(width / crop_pct))
    resize = scaled if mode == "squash" or height != width else scaled[0]
    return Preprocessing(resize, (height, width), config["interpolation"], tuple(config["mean"]),
                         tuple(config["std"]), f"timm.data.resolve_data_config(timm:{name})")


def _as_study_vit(model: nn.Module) -> nn.Module:
    """The study's copy of a plain timm ViT/DeiT with the same weights, else ``model`` itself."""
    from timm.models.vision_transformer import VisionTransformer as TimmViT
    from timm.models.deit import VisionTransformerDistilled

    if type(model) not in (TimmViT, VisionTransformerDistilled):
        return model
    study_class = DistilledVisionTransformer if type(model) is VisionTransformerDistilled else VisionTransformer
    try:
        copy = study_class(img_size=tuple(model.patch_embed.img_size), patch_size=tuple(model.patch_embed.patch_size),
                           in_chans=model.patch_embed.proj.in_channels, num_classes=model.num_classes,
                           global_pool=model.global_pool, embed_dim=model.embed_dim, depth=len(model.blocks),
                           num_heads=model.blocks[0].attn.num_heads,
                           mlp_ratio=model.blocks[0].mlp.fc1.out_features / model.embed_dim,
                           qkv_bias=model.blocks[0].attn.qkv.bias is not None)
        copy.load_state_dict(model.state_dict(), strict=True)
    except (StudyError, RuntimeError, TypeError, AttributeError, ZeroDivisionError):
        return model  # not the plain layout (register tokens, layer scale, another pooling …)
    copy.eval()
    if type(model) is VisionTransformerDistilled:
        copy.distilled_training = False
    probe = torch.randn(2, copy.patch_embed.proj.in_channels, *copy.patch_embed.img_size,
                        generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        same = (copy(probe) - model(probe)).abs().max().item() <= CONVERSION_TOLERANCE
    return copy if same else model
