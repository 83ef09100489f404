"""What ``models.<name>.arch_args`` may hold: every architecture lists the keys its builder takes, with defaults
(``architecture_args``, printed by ``study models --available``), and a parameters file's models are all built
before any work (``check_models``, run by ``study check``), so that a misspelt key or an impossible value fails in
one line naming the model, the key and what is allowed."""

from __future__ import annotations

import pytest

from study.core.errors import StudyError
from study.models import MODEL_NAMES, architecture_args, build_model, check_models

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_listed_key_is_taken_with_its_listed_default_and_no_other_key_is(name):
    listed = architecture_args(name)
    assert listed and all(isinstance(key, str) for key in listed)
    model = build_model(name, 10, 28, 1, **listed)  # every key at its listed default builds
    assert sum(p.numel() for p in model.parameters()) > 0
    with pytest.raises(StudyError) as refused:
        build_model(name, 10, 28, 1, not_a_key=1)
    assert f"allowed: {', '.join(sorted(listed))}" in str(refused.value)  # the keys listed are the keys allowed


def test_defaults_come_from_the_study_then_the_builders_signature():
    vit = architecture_args("vit")
    assert list(vit)[:5] == ["patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio"]  # the study's own first
    assert vit["patch_size"] == 4 and vit["qkv_bias"] is True and vit["pos_embed"] == "learn"  # signature defaults
    assert architecture_args("convit")["local_up_to_layer"] == 10
    assert architecture_args("resnet8") == {"stem_stride": 1, "width": 16, "zero_init_residual": False}
    with pytest.raises(StudyError, match="unknown model 'resnet50'"):
        architecture_args("resnet50")


@pytest.mark.parametrize("arch_args, fragments", [
    ({"patch_sise": 4}, ("models.small.arch_args: unknown override 'patch_sise' for model 'vit'",
                         "allowed: attn_drop_rate, depth", "patch_size")),
    ({"embed_dim": 30, "num_heads": 4}, ("models.small.arch_args: embed_dim 30 is not divisible by num_heads 4",)),
    ({"patch_size": 5}, ("models.small.arch_args: patch size (5, 5) does not divide image size (28, 28)",)),
])
def test_a_bad_key_or_value_fails_in_one_line_naming_the_model(arch_args, fragments):
    models = {"ok": ("resnet8", {"width": 8}), "small": ("vit", {"embed_dim": 32, "depth": 1, **arch_args})}
    with pytest.raises(StudyError) as refused:
        check_models(models, 10, 28, 1, "p.yaml")
    message = str(refused.value)
    assert message.startswith("p.yaml: ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    check_models({"ok": models["ok"]}, 10, 28, 1, "p.yaml")  # the good model alone passes
