"""ConViT's gates (study.priors.gates) and the report's sentences about priors (study.priors.report), on small
tables with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from study.priors import gates as G
from study.models import VIT_FAMILY, build_model
from study.priors.report import arms_of, gate_sentences, prior_sentences, priors_title, scramble_sentences

VIT = {"arch": "vit", "arch_args": {"depth": 2}, "lr": 1e-3, "scramble": None}
MODELS = {
    "resnet": {"arch": "resnet8", "arch_args": {}, "lr": 0.1, "scramble": None},
    "vit": VIT,
    "convit": {**VIT, "arch": "convit"},
    "deit": {**VIT, "arch": "deit"},
    "resnet_scrambled": {"arch": "resnet8", "arch_args": {}, "lr": 0.1, "scramble": {"cell": 4, "seed": 0}},
    "convit_scrambled": {**VIT, "arch": "convit", "scramble": {"cell": 4, "seed": 0}},
}


def test_arms_name_the_plain_vit_the_cnn_the_priors_and_each_scrambled_models_natural_twin():
    arms = arms_of(MODELS, list(MODELS), VIT_FAMILY)
    assert (arms["vit"], arms["cnn"], arms["priors"]) == ("vit", "resnet", ["convit", "deit"])
    assert arms["twins"] == {"resnet_scrambled": "resnet", "convit_scrambled": "convit"}
    assert priors_title(arms) == "; priors: convit, deit; scrambled images"


def test_a_study_without_an_architectural_prior_or_scrambled_images_has_no_priors_section():
    default = {k: MODELS[k] for k in ("resnet", "vit", "deit")}
    arms = arms_of(default, list(default), VIT_FAMILY)
    assert arms["priors"] == [] and arms["twins"] == {} and priors_title(arms) == ""
    assert prior_sentences(pd.DataFrame(columns=["comparison"]), arms) == []
    assert scramble_sentences(pd.DataFrame(columns=["comparison"]), arms) == []


def _gap(comparison, train_images, mean, low, high, significant, bound=np.nan):
    return {"comparison": comparison, "fraction": train_images / 1000, "train_images": train_images, "seeds": 3,
            "gap_mean": mean, "adj_ci_low": low, "adj_ci_high": high, "significant": significant, "inference": True,
            "equivalence_bound": bound, "under_trained_a": 0, "under_trained_b": 0}


def test_prior_sentences_give_the_gain_over_the_vit_and_its_share_of_the_gap():
    gaps = pd.DataFrame([_gap("vit - resnet", 100, -0.10, -0.15, -0.05, True),
                         _gap("convit - vit", 100, 0.04, 0.01, 0.07, True),
                         _gap("deit - vit", 100, 0.01, -0.02, 0.04, False, 0.04)])
    arms = arms_of(MODELS, list(MODELS), VIT_FAMILY)
    text = " ".join(prior_sentences(gaps, arms))
    assert "at 100 images +4.0 points, convit ahead (adjusted CI +1.0 to +7.0)" in text
    assert "convit closes 40% at 100 images" in text and "deit closes 10% at 100 images" in text
    assert "differences beyond ±4.0 points excluded" in text  # deit's null result carries its bound


def test_scramble_sentences_compare_each_scrambled_model_with_its_twin_and_with_the_vit():
    gaps = pd.DataFrame([_gap("resnet_scrambled - resnet", 100, -0.20, -0.30, -0.10, True),
                         _gap("resnet_scrambled - vit", 100, -0.05, -0.12, 0.02, False, 0.12)])
    text = " ".join(scramble_sentences(gaps, arms_of(MODELS, list(MODELS), VIT_FAMILY)))
    assert ("Cost of scrambled images to resnet: resnet_scrambled − resnet: at 100 images -20.0 points, resnet "
            "ahead") in text
    assert "resnet_scrambled − vit: at 100 images no detectable difference" in text


def test_gates_are_read_from_every_gpsa_block_and_head_and_their_change_is_paired_by_seed():
    model = build_model("convit", 10, 8, 1, patch_size=2, embed_dim=16, depth=3, num_heads=2, local_up_to_layer=2)
    rows = G.gate_rows({("convit", 0.5, 0): model, ("vit", 0.5, 0): build_model("vit", 10, 8, 1, patch_size=2,
                                                                                 embed_dim=16, depth=2, num_heads=2)})
    assert len(rows) == 2 * 2 and set(rows["model"]) == {"convit"}  # 2 GPSA blocks x 2 heads; the ViT has none
    assert np.allclose(rows["gate"], 1 / (1 + np.exp(-1)))  # every gate starts at σ(1)
    # Known answer: block 0 falls by 0.1 in every seed, block 1 does not move on average.
    def gate(f, s, b):  # block 0 at fraction 0.2: 0.1 lower; block 1 at 0.2: seed noise of mean 0
        return 0.7 - (0.1 if (f == 0.2 and b == 0) else 0.0) + 0.01 * (s - 1) * (b == 1) * (f == 0.2)

    table = pd.DataFrame([{"model": "convit", "fraction": f, "seed": s, "block": b, "head": h, "gate": gate(f, s, b)}
                          for f in (0.1, 0.2) for s in range(3) for b in range(2) for h in range(2)])
    contrasts = G.gate_contrasts(table, 0.95)
    assert list(contrasts["block"]) == [0, 1]
    assert contrasts["difference"].tolist() == pytest.approx([-0.1, 0.0], abs=1e-12)
    summary = G.gate_summary(table, 0.95).assign(train_images=lambda d: (d["fraction"] * 1000).astype(int))
    # every block's interval brackets its mean; block 1 at 0.2 has seed noise, so a width; block 0 has none
    assert (summary["ci_low"] <= summary["gate_mean"]).all() and (summary["gate_mean"] <= summary["ci_high"]).all()
    noisy = summary[(summary["block"] == 1) & (summary["fraction"] == 0.2)].iloc[0]
    assert noisy.ci_high - noisy.ci_low == pytest.approx(2 * 4.302653 * 0.01 / np.sqrt(3), rel=1e-5)
    text = " ".join(gate_sentences(summary, contrasts))
    assert "block 0: 0.700 at 100 images, 0.600 at 200 images, falls by -0.100" in text
    assert "block 1: 0.700 at 100 images, 0.700 at 200 images, no detectable change" in text


def test_the_question_names_what_the_study_trains():
    from study.report.render import question

    default = question({"distill": {"student": "deit"}, "arms": {"vit": "vit", "cnn": "resnet", "priors": [],
                                                                   "twins": {}}})
    assert "We train a from-scratch ViT, a DeiT-style ViT distilled from a CNN teacher, and a ResNet under " \
           "identical budgets on nested fractions of the training set, then compare" in default
    priors = question({"distill": None, "arms": {"vit": "vit", "cnn": "resnet", "priors": ["convit", "vit_convstem"],
                                                 "twins": {"resnet_scrambled": "resnet", "convit_scrambled": "convit"}}})
    assert "DeiT" not in priors
    assert "We train a from-scratch ViT, ViTs given a CNN's priors (convit, vit_convstem), and a ResNet" in priors
    assert "training set, with resnet_scrambled and convit_scrambled on scrambled images, then compare" in priors
    assert "We train a from-scratch ViT and a ResNet under" in question({"distill": None, "arms": None})
