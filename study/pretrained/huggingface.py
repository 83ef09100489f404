"""Hugging Face ViT and DeiT classifiers, converted into the study's ViT and DeiT.

Reads a ``save_pretrained`` folder directly (``config.json``, ``model.safetensors`` or ``pytorch_model.bin``,
optionally ``preprocessor_config.json``), so converting needs neither transformers nor network. The study's
model then gives what HF's does not expose by name: every block's tokens and softmax attention.

What differs between the two implementations, and how the conversion bridges it:

* HF projects q, k and v with three ``(D, D)`` linears; the study (as timm) uses one ``(3D, D)`` linear
  whose output rows are ``[q; k; v]``. Both split heads the same way (head h = rows ``h·D/H … (h+1)·D/H``
  of each), so the weights are concatenated in that order.
* HF's ``layer_norm_eps`` defaults to 1e-12, timm's to 1e-6: every LayerNorm gets the config's eps.
* ``hidden_act``: exact GELU is the study's; the tanh GELU, ReLU and SiLU replace the MLP's activation.
* ``DeiTForImageClassification`` classifies from the class token only; ``...WithTeacher`` averages the
  class and distillation heads, as the study's DeiT does (:class:`ClassTokenDeiT` covers the former).

Parameter names: transformers 4 saves ``{vit,deit}.encoder.layer.N.attention.attention.query`` …, and
transformers 5 holds ``{vit,deit}.layers.N.attention.q_proj`` … in memory; both are read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from torch import Tensor, nn

from study.core.errors import StudyError
from study.models.deit import DistilledVisionTransformer
from study.models.vit import VisionTransformer
from study.pretrained.images import Preprocessing
from study.pretrained.weights import read_state_dict

ARCHITECTURES = ("ViTForImageClassification", "DeiTForImageClassification",
                 "DeiTForImageClassificationWithTeacher")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
ACTIVATIONS = {"gelu": nn.GELU, "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
               "gelu_new": lambda: nn.GELU(approximate="tanh"), "relu": nn.ReLU, "silu": nn.SiLU, "swish": nn.SiLU}
# Pillow's resampling filters by number, as image-processor configs store them.
PIL_RESAMPLE = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
# The ViT image processor's defaults, used when a folder has no preprocessor_config.json.
DEFAULT_MEAN_STD = (0.5, 0.5, 0.5)

# Per-block parameter names of transformers 4 (saved files) and 5 (in memory) -> the study's.
_BLOCK_KEY = re.compile(r"^(?:vit|deit)\.(?:encoder\.layer|layers)\.(\d+)\.(.+)\.(weight|bias)$")
_BLOCK_PARTS = {
    "attention.attention.query": "q", "attention.q_proj": "q",
    "attention.attention.key": "k", "attention.k_proj": "k",
    "attention.attention.value": "v", "attention.v_proj": "v",
    "attention.output.dense": "attn.proj", "attention.o_proj": "attn.proj",
    "intermediate.dense": "mlp.fc1", "mlp.fc1": "mlp.fc1",
    "output.dense": "mlp.fc2", "mlp.fc2": "mlp.fc2",
    "layernorm_before": "norm1", "layernorm_after": "norm2",
}
_OTHER_KEYS = {
    "embeddings.cls_token": "cls_token", "embeddings.distillation_token": "dist_token",
    "embeddings.position_embeddings": "pos_embed",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "layernorm.weight": "norm.weight", "layernorm.bias": "norm.bias",
}
_HEADS = {"classifier": "head", "cls_classifier": "head", "distillation_classifier": "head_dist"}
# Used only for masked-image modelling (bool_masked_pos), never in classification.
_UNUSED = ("embeddings.mask_token",)


class ClassTokenDeiT(DistilledVisionTransformer):
    """The study's DeiT read out as HF's ``DeiTForImageClassification``: one head, on the class token.

    The distillation token is still there (it takes part in attention), it just feeds no head.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.head_dist = nn.Identity()  # HF's model has no distillation head: nothing to load into one

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        x = self.head_drop(x[:, 0])  # (B, T, D) -> (B, D): the class token
        return x if pre_logits else self.head(x)


def is_huggingface_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def read_config(folder: Path) -> dict:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as error:
        raise StudyError(f"{folder}/config.json: unreadable ({' '.join(str(error).split())})") from None
    if not isinstance(config, dict):
        raise StudyError(f"{folder}/config.json: not a JSON object")
    return config


def weights_file(folder: Path) -> Path:
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            return folder / name
    raise StudyError(f"{folder}: no weights ({', '.join(WEIGHT_FILES)}); save the model with save_pretrained")


def architecture(config: dict, where: str) -> str:
    names = config.get("architectures") or []
    supported = [name for name in names if name in ARCHITECTURES]
    if not supported:
        raise StudyError(f"{where}: architecture {names or config.get('model_type')!r} is not supported; "
                         f"supported: {', '.join(ARCHITECTURES)}")
    return supported[0]


def build(config: dict, arch: str, where: str) -> VisionTransformer:
    """The study's ViT or DeiT shaped as ``config`` (weights not loaded yet)."""
    dim, heads, hidden = (_int(config, key, where) for key in ("hidden_size", "num_attention_heads",
                                                               "intermediate_size"))
    if int(dim * (hidden / dim)) != hidden:  # the study's Mlp is int(dim * mlp_ratio) wide
        raise StudyError(f"{where}: intermediate_size {hidden} cannot be written as hidden_size {dim} x mlp_ratio")
    act = config.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise StudyError(f"{where}: hidden_act {act!r} is not supported; supported: {', '.join(ACTIVATIONS)}")
    classes = len(config.get("id2label") or {}) or int(config.get("num_labels", 2))
    model_class = {"ViTForImageClassification": VisionTransformer,
                   "DeiTForImageClassification": ClassTokenDeiT,
                   "DeiTForImageClassificationWithTeacher": DistilledVisionTransformer}[arch]
    try:
        model = model_class(img_size=_pair(config.get("image_size", 224), "image_size", where),
                            patch_size=_pair(config.get("patch_size", 16), "patch_size", where),
                            in_chans=_int(config, "num_channels", where, 3), num_classes=classes,
                            embed_dim=dim, depth=_int(config, "num_hidden_layers", where), num_heads=heads,
                            mlp_ratio=hidden / dim, qkv_bias=bool(config.get("qkv_bias", True)))
    except StudyError as error:
        raise StudyError(f"{where}: {error}") from None
    eps = float(config.get("layer_norm_eps", 1e-12))
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.eps = eps  # read by every forward (F.layer_norm(..., self.eps))
    for block in model.blocks:
        block.mlp.act = ACTIVATIONS[act]()
    return model


def _int(config: dict, key: str, where: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise StudyError(f"{where}: config key {key!r} = {value!r} is not a positive integer")
    return value


def _pair(value, key: str, where: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value) if isinstance(value, list) else ()
    if len(pair) != 2 or not all(isinstance(v, int) and v > 0 for v in pair):
        raise StudyError(f"{where}: config key {key!r} = {value!r} is not a size")
    return pair


def convert_state_dict(state: dict[str, Tensor], where: str) -> dict[str, Tensor]:
    """HF parameter names and layout -> the study's ``state_dict``; an unknown key is one line naming it."""
    converted: dict[str, Tensor] = {}
    qkv: dict[tuple[int, str], dict[str, Tensor]] = {}  # (block, weight|bias) -> {"q": …, "k": …, "v": …}
    for key, value in state.items():
        body = re.sub(r"^(?:vit|deit)\.", "", key)
        block = _BLOCK_KEY.match(key)
        if block and block.group(2) in _BLOCK_PARTS:
            index, part, kind = int(block.group(1)), _BLOCK_PARTS[block.group(2)], block.group(3)
            if part in ("q", "k", "v"):
                qkv.setdefault((index, kind), {})[part] = value
            else:
                converted[f"blocks.{index}.{part}.{kind}"] = value
        elif body in _OTHER_KEYS and body != key:
            converted[_OTHER_KEYS[body]] = value
        elif key.rpartition(".")[0] in _HEADS:
            converted[f"{_HEADS[key.rpartition('.')[0]]}.{key.rpartition('.')[2]}"] = value
        elif body in _UNUSED:
            continue
        else:
            raise StudyError(f"{where}: parameter {key!r} has no counterpart in the study's ViT; this checkpoint "
                             "is not a plain ViT/DeiT classifier")
    for (index, kind), parts in qkv.items():
        if set(parts) != {"q", "k", "v"}:
            raise StudyError(f"{where}: block {index} has {kind}s for {sorted(parts)} of query/key/value only")
        # three (D, D) weights -> (3D, D), rows [q; k; v] as the study's Attention splits them
        converted[f"blocks.{index}.attn.qkv.{kind}"] = torch.cat([parts["q"], parts["k"], parts["v"]], dim=0)
    return converted


def load_weights(model: nn.Module, state: dict[str, Tensor], where: str) -> None:
    """``load_state_dict(strict=True)`` with its complaints as one line."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    if missing:
        raise StudyError(f"{where}: the weights lack {missing[0]!r} ({len(missing)} missing in all); "
                         "config.json and the weights disagree")
    for key, value in state.items():
        if key not in expected:
            raise StudyError(f"{where}: parameter {key!r} does not fit the model config.json describes")
        if tuple(value.shape) != tuple(expected[key].shape):
            raise StudyError(f"{where}: parameter {key!r} has shape {tuple(value.shape)}, config.json implies "
                             f"{tuple(expected[key].shape)}")
    model.load_state_dict(state, strict=True)


def load_folder(folder: Path) -> tuple[VisionTransformer, str, Path]:
    """A ``save_pretrained`` folder -> (the study's model in eval mode, HF architecture, weights file)."""
    config = read_config(folder)
    arch = architecture(config, str(folder))
    model = build(config, arch, str(folder))
    path = weights_file(folder)
    load_weights(model, convert_state_dict(read_state_dict(path), str(path)), str(path))
    return model.eval(), arch, path


def preprocessing(folder: Path, config: dict) -> Preprocessing:
    """``preprocessor_config.json`` (an image processor's ``save_pretrained``) as a :class:`Preprocessing`;
    without one, the ViT image processor's defaults at the model's image size."""
    image_size = _pair(config.get("image_size", 224), "image_size", str(folder))
    path = folder / "preprocessor_config.json"
    if not path.is_file():
        return Preprocessing(image_size, image_size, "bilinear", DEFAULT_MEAN_STD, DEFAULT_MEAN_STD,
                             f"{folder.name}: no preprocessor_config.json, ViTImageProcessor defaults")
    where = str(path)
    try:
        p = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise StudyError(f"{where}: unreadable ({' '.join(str(error).split())})") from None
    if p.get("do_rescale", True) and abs(float(p.get("rescale_factor", 1 / 255)) - 1 / 255) > 1e-9:
        raise StudyError(f"{where}: rescale_factor {p['rescale_factor']} is not supported (only 1/255)")
    resize = _size(p.get("size"), where) if p.get("do_resize", True) else image_size
    crop = _size(p.get("crop_size"), where) if p.get("do_center_crop", False) else resize
    if isinstance(crop, int):
        crop = (crop, crop)
    resample = p.get("resample", 2)
    if resample not in PIL_RESAMPLE:
        raise StudyError(f"{where}: resample {resample!r} is not a Pillow filter number (0-5)")
    normalise = p.get("do_normalize", True)
    channels = len(p.get("image_mean", DEFAULT_MEAN_STD))
    mean = tuple(p.get("image_mean", DEFAULT_MEAN_STD)) if normalise else (0.0,) * channels
    std = tuple(p.get("image_std", DEFAULT_MEAN_STD)) if normalise else (1.0,) * channels
    return Preprocessing(resize, crop, PIL_RESAMPLE[resample], mean, std, f"{folder.name}/preprocessor_config.json")


def _size(size, where: str) -> int | tuple[int, int]:
    """An image processor's ``size``: {height, width} (exact) or {shortest_edge} (aspect kept)."""
    if isinstance(size, int):
        return (size, size)
    if isinstance(size, dict) and {"height", "width"} <= size.keys():
        return (int(size["height"]), int(size["width"]))
    if isinstance(size, dict) and "shortest_edge" in size:
        return int(size["shortest_edge"])
    raise StudyError(f"{where}: size {size!r} is not supported; use {{height, width}} or {{shortest_edge}}")
