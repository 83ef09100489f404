"""The controls' statistics, figure, report sentences and the findings table, on a synthetic per-run table whose
contrasts are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from study.controls import contrasts as C
from study.controls.conditions import grid_pairs
from study.controls.figures import controls_figure
from study.controls.report import grid_sentences, uniform_sentences
from study.report.glance import comparison_rows, uniform_rows

CONDITIONS = [("clean", "clean", 0.0), ("rearrangement", "shuffle", 7.0), ("rearrangement", "shuffle", 4.0),
              ("occlusion", "aligned", 0.75), ("occlusion", "offset", 0.75), ("translation", "x", 4.0),
              ("translation", "x", 1.0)]
FRACTIONS = {0.005: 285, 0.01: 570, 0.02: 1140}
# top-1 per model and condition; the ViT wins by 20 points under the 7x7 shuffle (on its grid) and nowhere else
BASE = {"resnet": 0.80, "vit": 0.70, "vit@uniform": 0.40, "convmixer": 0.70}
ON_GRID_BONUS = {"vit": 0.20, "vit@uniform": 0.0, "convmixer": 0.20, "resnet": 0.0}


def per_run_table(seeds: int = 4, noise: float = 0.01) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for model, base in BASE.items():
        for fraction, images in FRACTIONS.items():
            for seed in range(seeds):
                for probe, variant, level in CONDITIONS:
                    top1 = base + (ON_GRID_BONUS[model] if (probe, level) == ("rearrangement", 7.0) else 0.0)
                    top1 += rng.normal(0, noise)
                    rows.append({"model": model, "fraction": fraction, "seed": seed, "probe": probe,
                                 "variant": variant, "level": level, "top1": top1, "train_images": images,
                                 "under_trained": False, "step_bound": False})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def pooled():
    table = per_run_table()
    pairs = C.comparison_pairs(table["model"].unique(), [("vit", "resnet"), ("convmixer", "vit"), ("x", "vit")])
    diffs = C.paired_differences(table, pairs)
    return table, pairs, diffs, C.pooled_contrasts(diffs, 0.95, 0.05)


def test_pairs_keep_scored_models_and_add_uniform_attention(pooled):
    _, pairs, _, _ = pooled
    assert pairs == [("vit", "resnet"), ("convmixer", "vit"), ("vit@uniform", "vit")]


def test_pooled_contrasts_recover_the_known_effects(pooled):
    _, _, _, table = pooled
    at = table.set_index(["comparison", "probe", "level"])
    assert at.loc[("vit - resnet", "clean", 0.0), "mean"] == pytest.approx(-10.0, abs=1.0)
    assert at.loc[("vit - resnet", "clean", 0.0), "verdict"] == "supported"
    assert at.loc[("vit - resnet", "rearrangement", 7.0), "mean"] == pytest.approx(10.0, abs=1.0)
    assert at.loc[("convmixer - vit", "rearrangement", 7.0), "verdict"] == "no effect"  # 0 points, CI inside ±5
    assert at.loc[("vit@uniform - vit", "clean", 0.0), "mean"] == pytest.approx(-30.0, abs=1.0)
    families = table.groupby("comparison")["family"].first()
    assert families["vit@uniform - vit"] == "uniform attention" and families["vit - resnet"] == "controls"


def test_grid_table_sets_each_on_grid_probe_beside_its_controls(pooled):
    table, _, _, pooled_table = pooled
    pairs = grid_pairs(table, patch_grid=7, patch_size=4)
    assert [p.label for p in pairs] == ["7x7 shuffle", "75% occluded", "4-px shift"]
    on_off = C.grid_table(pooled_table, pairs)
    shuffle = on_off[(on_off["comparison"] == "vit - resnet") & (on_off["probe"] == "7x7 shuffle")].iloc[0]
    assert shuffle["on_verdict"] == "supported" and shuffle["off_grid"] == "4x4 shuffle"
    assert shuffle["off_mean"] == pytest.approx(-10.0, abs=1.0)  # off the grid the ResNet still leads
    rows = comparison_rows(pooled_table, on_off)
    verdict = next(r["verdict"] for r in rows if r["claim"] == "vit and resnet differ under 7x7 shuffle")
    assert verdict == "supported: vit ahead on the patch grid only"
    sentences = grid_sentences(pooled_table, on_off)
    assert any("off the grid, 4x4 shuffle" in s for s in sentences)
    fig = controls_figure(pooled_table, pairs)
    assert len(fig.axes) == 4


def test_uniform_attention_rows_and_sentences(pooled):
    table, pairs, _, pooled_table = pooled
    rows = uniform_rows(pooled_table)
    assert rows and rows[0]["verdict"] == "supported: vit's own attention ahead"
    fractions = C.fraction_contrasts(table, pairs, 0.95)
    sentences = uniform_sentences(fractions)
    assert len(sentences) == 2 and "clean: 285 images -" in sentences[0] and "shuffle: 285 images -" in sentences[1]


def test_power_table_reports_what_the_seeds_detect(pooled):
    _, _, diffs, _ = pooled
    power = C.power_table(diffs, [("rearrangement", "shuffle", 7.0)], 0.05, 0.8, 0.05, family=2)
    row = power[(power["comparison"] == "vit - resnet") & (power["condition"] == "clean")].iloc[0]
    assert row["sd_points"] == pytest.approx(np.sqrt(2) * 1.0, rel=0.4)  # two runs' noise of 1 point each
    assert row["power"] > 0.99 and row["seeds_needed"] == 2
