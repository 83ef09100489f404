"""The model registry (study/archs.py): each family's declared traits are what its built models do, every family with
attention maps gives them, a family registered from outside is built and listed like the study's own, and asking the
registry imports neither torch nor any model file it does not build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import study.archs as archs
from study.archs import CNN, FAMILIES, MODEL_NAMES, VIT_FAMILY, Family, Traits, traits
from study.core.errors import StudyError
from study.models import architecture_args, attention_probs, build_model, check_archs, representations
from tests.conftest import random_images

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread

ROOT = Path(__file__).resolve().parents[2]
SIDE = 16
SMALL_VIT = {"patch_size": 4, "embed_dim": 16, "depth": 2, "num_heads": 2, "mlp_ratio": 2.0}
# Small arch_args per family (the study's defaults are sized for 28-px images and 12 blocks), and for the ladder
# one rung of each kind of traits: the ViT, no class token, no attention, local attention.
SMALL = {
    "vit": [SMALL_VIT], "deit": [SMALL_VIT], "convit": [{**SMALL_VIT, "local_up_to_layer": 1}],
    "vit_convstem": [SMALL_VIT], "resnet18": [{}], "resnet8": [{"width": 4}], "resnet20": [{"width": 4}],
    "convmixer": [{"dim": 16, "depth": 1, "kernel_size": 3, "patch_size": 4}],
    "swin": [{"embed_dim": 8, "depths": [1, 1], "num_heads": [2, 2], "window_size": 2, "patch_size": 4,
              "mlp_ratio": 2.0}],
    "mlp": [{"hidden": [8]}],
    "ladder": [SMALL_VIT, {**SMALL_VIT, "class_token": False, "global_pool": "avg"},
               {**SMALL_VIT, "class_token": False, "global_pool": "avg", "token_mixer": "pool"},
               {**SMALL_VIT, "class_token": False, "global_pool": "avg", "token_mixer": "local_attention"}],
}
CASES = [(name, args) for name in MODEL_NAMES for args in SMALL[name]]


def test_every_family_has_its_small_sizes_here():
    assert set(SMALL) == set(FAMILIES)


@pytest.mark.parametrize("name, arch_args", CASES)
def test_declared_traits_are_what_the_built_model_does(name, arch_args):
    declared = traits(name, arch_args)
    model = build_model(name, 10, SIDE, 1, **arch_args).eval()
    x = random_images(1, SIDE, batch=2)
    assert hasattr(model, "num_prefix_tokens") == declared.transformer  # timm's layout of a token sequence
    with torch.no_grad():
        if declared.transformer:
            patches = model.patch_embed.num_patches
            assert model.num_prefix_tokens == declared.prefix_tokens
            assert representations(model, x)["patch_embed"].shape[1] == patches + declared.prefix_tokens
        if declared.attention:
            maps = attention_probs(model, x)
            assert len(maps) == len(model.blocks) and maps[0].shape[-1] == patches + declared.prefix_tokens
        else:
            with pytest.raises(StudyError):
                attention_probs(model, x)


def test_every_family_with_attention_is_a_token_sequence_and_only_the_rungs_vary():
    for family in FAMILIES.values():
        if family.traits.attention:
            assert family.traits.transformer and family.traits.prefix_tokens >= 1
        assert (family.varies is not None) == (family.name == "ladder")


def test_the_vit_family_is_the_families_every_model_of_which_is_a_vit():
    """What the robustness probes' patch grid and the report's ViT roles read: the ladder is not in it (its rungs
    may drop the class token or attention), and it is what the study has always read."""
    assert VIT_FAMILY == ("vit", "deit", "convit", "vit_convstem")
    assert all(FAMILIES[name].is_vit for name in VIT_FAMILY)
    assert traits("deit").prefix_tokens == 2 and traits("timm:resnet50") == archs.TIMM_TRAITS


def test_an_unknown_name_is_refused_in_one_line():
    with pytest.raises(StudyError, match="unknown model 'vitt'; choose one of vit, deit") as refused:
        traits("vitt")
    assert "\n" not in str(refused.value)


class ToyNet(nn.Module):
    """A family defined outside the study: a pooled linear classifier with one keyword."""

    def __init__(self, img_size: int, in_chans: int, num_classes: int, hidden: int = 3) -> None:
        super().__init__()
        self.img_size = img_size
        self.body = nn.Sequential(nn.Conv2d(in_chans, hidden, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def test_a_family_registered_once_is_built_listed_and_asked(monkeypatch):
    toy = Family("toy", f"{__name__}:ToyNet", CNN, defaults={"hidden": 5})
    monkeypatch.setitem(FAMILIES, "toy", toy)
    model = build_model("toy", 7, 12, 2)
    assert isinstance(model, ToyNet) and model.img_size == 12 and model.head.out_features == 7
    assert model.head.in_features == 5  # the registry line's default over the constructor's
    assert build_model("toy", 7, 12, 2, hidden=4).head.in_features == 4
    with pytest.raises(StudyError, match="unknown override 'width' for model 'toy'; allowed: hidden"):
        build_model("toy", 7, 12, 2, width=4)
    assert architecture_args("toy") == {"hidden": 5}
    assert traits("toy") == Traits(transformer=False, prefix_tokens=0, attention=False)
    check_archs({"m": "toy"}, "params")  # no StudyError: a registered family is a known arch


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_constructor_takes_timms_size_keywords(name):
    import importlib
    import inspect

    module, attribute = FAMILIES[name].constructor.split(":")
    target = getattr(importlib.import_module(module), attribute)
    functions = [c.__init__ for c in target.__mro__ if "__init__" in vars(c)] if isinstance(target, type) else [target]
    taken = {key for function in functions for key in inspect.signature(function).parameters}  # a class's bases too
    assert {"img_size", "in_chans", "num_classes"} <= taken


def test_asking_the_registry_imports_no_torch_and_building_imports_only_that_family():
    probe = ("import sys, study.archs as a\n"
             "a.traits('ladder', {'token_mixer': 'mean'}), a.VIT_FAMILY\n"
             "print('torch' in sys.modules)\n"
             "from study.models import build_model\n"
             "build_model('resnet8', 10, 8, 1, width=2)\n"
             "print(' '.join(m for m in ('timm', 'study.models.vit', 'study.models.ladder', 'study.models.controls')"
             " if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["False", ""]


def test_the_pipelines_import_walk_finds_every_constructor_module():
    """dvc.yaml's code deps come from a static import walk (tests/pipeline/stage_imports.py), which reads the
    registry's constructor strings: a family added here becomes a dependency of every stage that builds models."""
    from tests.pipeline.stage_imports import command_files, registry_modules

    modules = {family.constructor.split(":")[0] for family in FAMILIES.values()}
    assert registry_modules() == modules
    built = {str(path.relative_to(ROOT)) for path in command_files("train")}
    assert {module.replace(".", "/") + ".py" for module in modules} <= built
    assert not {module.replace(".", "/") + ".py" for module in modules} & {
        str(path.relative_to(ROOT)) for path in command_files("report")}  # the report asks the registry only
