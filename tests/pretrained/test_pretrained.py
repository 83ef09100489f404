"""Loading pretrained checkpoints: Hugging Face ViT/DeiT parity, timm weights, the study's runs, bad input.

Every model is random-init and saved into tmp_path: nothing is downloaded.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from study.core.errors import StudyError
from study.models.vit import VisionTransformer
from study.pretrained import load_pretrained, open_checkpoint
from study.pretrained.weights import read_state_dict

# (patch, image, width, depth, heads, qkv_bias, layer_norm_eps, hidden_act): sizes, eps and activations
# that exercise every part of the conversion.
HF_CONFIGS = [
    (8, 32, 32, 2, 4, True, 1e-12, "gelu"),
    (4, 16, 48, 3, 3, False, 1e-12, "gelu"),
    (16, 64, 64, 1, 8, True, 1e-6, "gelu"),
    (7, 28, 24, 2, 2, False, 1e-5, "gelu_pytorch_tanh"),
    (8, 48, 40, 2, 5, True, 1e-12, "relu"),
]


def _hf_config(transformers, cls, patch, image, width, depth, heads, qkv_bias, eps, act, channels=3, labels=7):
    return cls(hidden_size=width, num_hidden_layers=depth, num_attention_heads=heads, intermediate_size=3 * width,
               image_size=image, patch_size=patch, num_channels=channels, qkv_bias=qkv_bias, layer_norm_eps=eps,
               hidden_act=act, num_labels=labels)


def _logits_match(reference, folder, image, channels=3, source_prefix=""):
    torch.manual_seed(1)
    x = torch.randn(3, channels, image, image)
    converted = load_pretrained(f"{source_prefix}{folder}")
    assert isinstance(converted, VisionTransformer) and not converted.training
    with torch.no_grad():
        expected = reference.eval()(pixel_values=x).logits
        got = converted(x)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=1e-4, rtol=0), (got - expected).abs().max()
    return converted


@pytest.mark.parametrize("patch, image, width, depth, heads, qkv_bias, eps, act", HF_CONFIGS)
def test_hugging_face_vit_logits_equal_the_study_conversion(tmp_path, patch, image, width, depth, heads, qkv_bias,
                                                            eps, act):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = _hf_config(transformers, transformers.ViTConfig, patch, image, width, depth, heads, qkv_bias, eps, act)
    reference = transformers.ViTForImageClassification(config)
    reference.save_pretrained(tmp_path)
    converted = _logits_match(reference, tmp_path, image)
    # The attention maps the analyses read: one (B, heads, T, T) per block, rows summing to 1.
    probs = converted.attention_probs(torch.randn(2, 3, image, image))
    assert len(probs) == depth and probs[0].shape == (2, heads, (image // patch) ** 2 + 1, (image // patch) ** 2 + 1)
    assert torch.allclose(probs[-1].sum(-1), torch.ones(2, heads, probs[-1].shape[-1]), atol=1e-5)


@pytest.mark.parametrize("teacher", [False, True])
@pytest.mark.parametrize("patch, image, width, depth, heads, qkv_bias, eps, act", HF_CONFIGS[:3])
def test_hugging_face_deit_logits_equal_the_study_conversion(tmp_path, teacher, patch, image, width, depth, heads,
                                                             qkv_bias, eps, act):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = _hf_config(transformers, transformers.DeiTConfig, patch, image, width, depth, heads, qkv_bias, eps, act)
    cls = (transformers.DeiTForImageClassificationWithTeacher if teacher
           else transformers.DeiTForImageClassification)
    reference = cls(config)
    reference.save_pretrained(tmp_path)
    converted = _logits_match(reference, tmp_path, image, source_prefix="hf:")
    assert converted.num_prefix_tokens == 2  # class and distillation tokens


def test_hugging_face_single_channel_and_transformers_5_parameter_names(tmp_path):
    """A grey-image ViT whose weights carry the names transformers 5 uses in memory (layers.N.attention.q_proj)."""
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import save_file

    torch.manual_seed(0)
    config = _hf_config(transformers, transformers.ViTConfig, 4, 16, 32, 2, 4, True, 1e-12, "gelu", channels=1)
    reference = transformers.ViTForImageClassification(config)
    reference.save_pretrained(tmp_path)
    state = {k: v.contiguous() for k, v in reference.state_dict().items()}
    save_file(state, tmp_path / "model.safetensors")
    assert any(".layers.0." in key for key in read_state_dict(tmp_path / "model.safetensors")) or transformers.__version__ < "5"
    _logits_match(reference, tmp_path, 16, channels=1)


def test_hugging_face_preprocessing_comes_from_the_image_processor_config(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    reference = transformers.DeiTForImageClassificationWithTeacher(
        _hf_config(transformers, transformers.DeiTConfig, 8, 32, 32, 1, 4, True, 1e-12, "gelu"))
    reference.save_pretrained(tmp_path)
    transformers.DeiTImageProcessor(size={"height": 40, "width": 40}, crop_size={"height": 32, "width": 32},
                                    image_mean=[0.4, 0.5, 0.6], image_std=[0.2, 0.3, 0.25]).save_pretrained(tmp_path)
    checkpoint = open_checkpoint(f"hf:{tmp_path}")
    p = checkpoint.preprocessing
    assert (p.resize, p.crop, p.interpolation) == ((40, 40), (32, 32), "bicubic")
    assert p.mean == (0.4, 0.5, 0.6) and p.std == (0.2, 0.3, 0.25)
    assert checkpoint.weights.name == "model.safetensors" and checkpoint.attention_maps


def test_hugging_face_unsupported_config_and_keys_are_one_line(tmp_path):
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import save_file

    torch.manual_seed(0)
    config = _hf_config(transformers, transformers.ViTConfig, 8, 32, 32, 1, 4, True, 1e-12, "gelu")
    transformers.ViTForImageClassification(config).save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())

    (tmp_path / "config.json").write_text(json.dumps({**raw, "hidden_act": "quick_gelu"}))
    with pytest.raises(StudyError, match="hidden_act 'quick_gelu' is not supported"):
        load_pretrained(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({**raw, "architectures": ["ViTForMaskedImageModeling"]}))
    with pytest.raises(StudyError, match="ViTForMaskedImageModeling.*not supported"):
        load_pretrained(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps(raw))
    state = read_state_dict(tmp_path / "model.safetensors")
    save_file({**state, "vit.pooler.dense.weight": torch.zeros(32, 32)}, tmp_path / "model.safetensors")
    with pytest.raises(StudyError, match="'vit.pooler.dense.weight' has no counterpart") as error:
        load_pretrained(str(tmp_path))
    assert "\n" not in str(error.value)
    with pytest.raises(StudyError, match="not a Hugging Face save_pretrained folder"):
        load_pretrained(str(tmp_path / "missing"))


@pytest.mark.parametrize("name, study_vit", [("vit_tiny_patch16_224", True), ("deit_tiny_distilled_patch16_224", True),
                                             ("resnet18", False)])
@pytest.mark.slow
def test_timm_model_with_local_safetensors(tmp_path, name, study_vit):
    import timm
    from safetensors.torch import save_file

    torch.manual_seed(0)
    reference = timm.create_model(name, pretrained=False, num_classes=5).eval()
    save_file({k: v.contiguous() for k, v in reference.state_dict().items()}, tmp_path / "w.safetensors")
    checkpoint = open_checkpoint(f"timm:{name}", tmp_path / "w.safetensors")
    assert checkpoint.attention_maps is study_vit and not checkpoint.model.training
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        assert torch.allclose(checkpoint.model(x), reference(x), atol=1e-4, rtol=0)
    # The preprocessing is timm's own evaluation transform, pixel for pixel, on a non-square image.
    from timm.data import create_transform, resolve_data_config

    picture = Image.fromarray(np.random.default_rng(0).integers(0, 256, (260, 300, 3), dtype=np.uint8))
    expected = create_transform(**resolve_data_config(model=reference))(picture)
    assert torch.allclose(checkpoint.preprocessing.batch([picture])[0], expected, atol=1e-5)


def test_timm_state_dict_loads_weights_only_and_refuses_code(tmp_path):
    import timm

    torch.manual_seed(0)
    reference = timm.create_model("resnet18", pretrained=False, num_classes=3).eval()
    torch.save({"state_dict": reference.state_dict()}, tmp_path / "w.pth")
    model = load_pretrained("timm:resnet18", tmp_path / "w.pth")
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.allclose(model(x), reference(x), atol=1e-5)
    (tmp_path / "evil.pth").write_bytes(pickle.dumps(_Payload()))
    with pytest.raises(StudyError, match="weights_only=True"):
        load_pretrained("timm:resnet18", tmp_path / "evil.pth")
    with pytest.raises(StudyError, match="needs a local weights file"):
        load_pretrained("timm:resnet18")
    with pytest.raises(StudyError, match="unknown timm model"):
        load_pretrained("timm:no_such_net", tmp_path / "w.pth")


class _Payload:
    """A pickled object: loading it would import this module, which weights_only refuses."""


def test_study_checkpoint(tmp_path):
    from study.models import build_model
    from study.train.artifacts import save_trained
    from study.train.spec import RunSpec

    torch.manual_seed(0)
    model = build_model("vit", 10, 28, 1, patch_size=7, embed_dim=32, depth=2, num_heads=2)
    spec = RunSpec(model_name="vit", arch="vit", arch_args={"patch_size": 7, "embed_dim": 32, "depth": 2, "num_heads": 2},
                   num_classes=10, image_size=28, in_chans=1, fraction=1.0, seed=0, params=0, forward_flops=0,
                   mean=(0.3,), std=(0.35,))
    save_trained(tmp_path / "model.pt", model, spec)
    checkpoint = open_checkpoint(f"study:{tmp_path / 'model.pt'}")
    x = torch.randn(2, 1, 28, 28)
    with torch.no_grad():
        assert torch.equal(checkpoint.model(x), model.eval()(x))
    assert checkpoint.preprocessing.mean == (0.3,) and checkpoint.preprocessing.crop == (28, 28)


@pytest.mark.parametrize("processor", ["ViTImageProcessor", "DeiTImageProcessor"])
def test_hugging_face_preprocessing_matches_the_image_processor(tmp_path, processor):
    """Within one grey level: transformers resizes tensors, the study resizes with Pillow (as timm does)."""
    transformers = pytest.importorskip("transformers")
    from study.pretrained.huggingface import preprocessing

    reference = getattr(transformers, processor)()
    reference.save_pretrained(tmp_path)
    picture = Image.fromarray(np.random.default_rng(0).integers(0, 256, (260, 300, 3), dtype=np.uint8))
    expected = reference(images=picture, return_tensors="pt")["pixel_values"][0]
    got = preprocessing(tmp_path, {"image_size": 224}).batch([picture])[0]
    assert got.shape == expected.shape == (3, 224, 224)
    assert (got - expected).abs().max() <= 1 / 255 / 0.5 + 1e-6  # one level of 255, divided by std 0.5
