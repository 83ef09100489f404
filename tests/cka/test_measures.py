"""The readings of a model's layers that CKA compares (study.cka.measures): block updates, the residual
branch and pooled features against direct computations, and the report's rule for values at the chance level."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from study.models import build_model, representations
from study.cka import similarity as S
from study.cka.estimators import linear_cka
from study.cka.measures import MEASURES, POOLED, block_updates, pooled_features
from study.cka.report import above_chance, cka_findings
from study.train.spec import RunSpec

CPU = torch.device("cpu")
VIT = ("vit", {"patch_size": 4, "embed_dim": 16, "depth": 3, "num_heads": 2, "mlp_ratio": 2.0})
RESNET = ("resnet8", {"width": 4})


def model(arch: tuple[str, dict], seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(arch[0], 10, 8, 1, **arch[1]).eval()


def images(n: int = 32) -> torch.Tensor:
    return torch.randn(n, 1, 8, 8, generator=torch.Generator().manual_seed(0))  # (n, C, H, W)


@torch.no_grad()
def test_vit_block_updates_are_block_output_minus_input_without_the_final_norm():
    vit, x = model(VIT, 0), images()
    stream, updates = representations(vit, x), block_updates(vit, x)
    assert list(updates) == ["patch_embed", "blocks.0", "blocks.1", "blocks.2"]
    torch.testing.assert_close(updates["patch_embed"], stream["patch_embed"])
    torch.testing.assert_close(updates["blocks.0"], stream["blocks.0"] - stream["patch_embed"])
    torch.testing.assert_close(updates["blocks.2"], stream["blocks.2"] - stream["blocks.1"])


@torch.no_grad()
def test_update_cka_of_near_identity_blocks_at_init_is_defined_and_finite():
    # At init a ViT's blocks are close to the identity (std-0.02 linear weights): the updates are small next to the
    # stream, yet not constant, so their CKA is defined.
    a, b, x = model(VIT, 0), model(VIT, 1), images()
    ua, ub, stream = block_updates(a, x), block_updates(b, x), representations(a, x)
    assert ua["blocks.0"].norm() < 0.5 * stream["blocks.0"].norm()
    for layer in ua:
        value = linear_cka(ua[layer], ub[layer], debiased=True)
        assert math.isfinite(value) and -1.0 <= value <= 1.0 + 1e-9


@torch.no_grad()
def test_resnet_updates_are_each_blocks_residual_branch_and_leave_the_forward_unchanged():
    net, x = model(RESNET, 0), images()
    expected = {}
    for name in ("layer1.0", "layer2.0", "layer3.0"):
        block = net.get_submodule(name)
        entering = representations(net, x)[{"layer1.0": "stem", "layer2.0": "layer1.0", "layer3.0": "layer2.0"}[name]]
        expected[name] = block.bn2(block.conv2(block.relu(block.bn1(block.conv1(entering)))))
    updates = block_updates(net, x)
    assert list(updates) == ["stem", "layer1.0", "layer2.0", "layer3.0"]
    for name, branch in expected.items():
        torch.testing.assert_close(updates[name], branch)  # the branch alone, not the in-place sum with the shortcut
    torch.testing.assert_close(net(x), model(RESNET, 0)(x))  # the hooks are gone afterwards
    assert not any(module._forward_hooks for module in net.modules())


@pytest.mark.parametrize("arch", [VIT, RESNET])
@torch.no_grad()
def test_pooled_features_are_what_the_head_reads_after_the_input_embedding(arch):
    net, x = model(arch, 0), images()
    pooled = pooled_features(net, x)
    assert list(pooled)[1] == POOLED and list(pooled)[0] == next(iter(representations(net, x)))
    torch.testing.assert_close(net.head(pooled[POOLED]) if hasattr(net, "head") else net.fc(pooled[POOLED]), net(x))


@torch.no_grad()
def test_pooled_cka_in_the_study_equals_linear_cka_of_the_pooled_vectors_computed_directly():
    names = {"vit": VIT, "resnet": RESNET}
    spec = {name: RunSpec(model_name=name, arch=arch, arch_args=args, num_classes=10, image_size=8, in_chans=1,
                          fraction=1.0, seed=0, params=0, forward_flops=0, mean=(0.5,), std=(0.25,))
            for name, (arch, args) in names.items()}
    models = {(name, 1.0, seed): (model(arch, 10 * seed + 3), spec[name]) for name, arch in names.items()
              for seed in (0, 1)}
    initial = {(name, seed): (model(arch, seed), spec[name]) for name, arch in names.items() for seed in (0, 1)}
    pictures = np.random.default_rng(0).integers(0, 256, size=(24, 8, 8, 1), dtype=np.uint8)
    result = S.cka_study(models, pictures, 24, "linear", 1.0, CPU, [0, 1], initial, MEASURES["pooled"])
    ceiling = result["ceiling"].set_index(["model", "seed", "layer"])["cka"]
    chance = result["chance"].set_index(["model", "seed", "layer"])["cka"]
    for name in names:
        x = S.normalised_images(pictures, spec[name], CPU)
        head = {key: pooled_features(m, x)[POOLED] for key, (m, _) in {**models, **{
            (n, 0.0, s): v for (n, s), v in initial.items()}}.items() if key[0] == name}
        # One batch of all the images: minibatch CKA is then linear CKA with the unbiased HSIC.
        assert ceiling[name, 0, POOLED] == pytest.approx(
            linear_cka(head[name, 1.0, 0], head[name, 1.0, 1], debiased=True), abs=1e-6)
        assert chance[name, 0, POOLED] == pytest.approx(
            linear_cka(head[name, 0.0, 0], head[name, 0.0, 1], debiased=True), abs=1e-6)


# ---------------------------------------------------------------------------------------------------
# The report's rule: no claim where the chance level is not below the values
# ---------------------------------------------------------------------------------------------------

def summary_row(model: str, fraction: float, cka: float, chance: float) -> dict:
    return {"model": model, "fraction": fraction, "seeds": 3, "embedding_layer": "patch_embed",
            "averaged_layers": "blocks.0", "mean_cka": cka, "ci_low": cka - 0.02, "ci_high": cka + 0.02,
            "ceiling_mean": 0.90, "ceiling_ci_low": 0.85, "ceiling_ci_high": 0.95, "ceiling_pairs": 3,
            "chance_mean": chance, "chance_ci_low": chance - 0.01, "chance_ci_high": chance + 0.01,
            "chance_pairs": 3, "gap_to_ceiling_mean": 0.90 - cka, "gap_ci_low": 0.01, "gap_ci_high": 0.2,
            "gap_confidence": 0.9875, "gap_p_holm": 0.01, "gap_significant": True, "confidence": 0.95}


def test_above_chance_needs_the_interval_above_the_chance_level():
    assert above_chance(0.80, 0.50) and not above_chance(0.80, 0.99) and not above_chance(0.80, 0.80)
    assert above_chance(math.nan, math.nan)  # no chance level measured: the sentence says so instead
    assert not above_chance(math.nan, 0.5)


def test_findings_claim_nothing_against_the_ceiling_where_chance_is_not_below_the_values():
    to_full = pd.DataFrame([summary_row("vit", 0.1, 0.60, 0.99), summary_row("vit", 0.5, 0.70, 0.99),
                            summary_row("resnet", 0.1, 0.60, 0.30)])
    readings = pd.concat([to_full.assign(reading="stream"), to_full.assign(reading="pooled")])
    sentences = cka_findings(to_full, None, readings=readings)
    vit = [s for s in sentences if "vit" in s]
    resnet = [s for s in sentences if "resnet" in s]
    assert len(vit) == 1 and "cannot separate these fractions" in vit[0] and "below the cross-seed" not in vit[0]
    assert "pooled, 0.99 at initialisation vs 0.60–0.70 trained" in vit[0]
    assert "neither lies above its chance level" in vit[0]
    assert len(resnet) == 1 and "below the cross-seed ceiling by 0.30" in resnet[0]
