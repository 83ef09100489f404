"""The controls' statistics, figure, report sentences and the findings table, on a synthetic per-run table whose
contrasts are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from study.controls import contrasts as C
from study.controls.conditions import grid_pairs
from study.controls.figures import controls_figure
from study.controls.report import ROWS, grid_sentences, retention_sentences, uniform_sentences

CONDITIONS = [("clean", "clean", 0.0), ("rearrangement", "shuffle", 7.0), ("rearrangement", "offset", 7.0),
              ("rearrangement", "shuffle", 4.0),
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
                    on_grid = (probe, variant, level) == ("rearrangement", "shuffle", 7.0)
                    top1 = base + (ON_GRID_BONUS[model] if on_grid else 0.0)
                    top1 += rng.normal(0, noise)
                    rows.append({"model": model, "fraction": fraction, "seed": seed, "probe": probe,
                                 "variant": variant, "level": level, "top1": top1, "train_images": images,
                                 "under_trained": False, "step_bound": False, "images": 1000})
    table = pd.DataFrame(rows)
    clean = table[table["probe"] == "clean"][["model", "fraction", "seed", "top1"]]
    table = table.merge(clean.rename(columns={"top1": "clean_top1"}), on=["model", "fraction", "seed"])
    return table.assign(retained=table["top1"] / table["clean_top1"])


@pytest.fixture(scope="module")
def pooled():
    table = per_run_table()
    pairs = C.comparison_pairs(table["model"].unique(), [("vit", "resnet"), ("convmixer", "vit"), ("x", "vit")])
    diffs = C.paired_differences(table, pairs)
    return table, pairs, diffs, C.pooled_contrasts(diffs, 0.95)


def test_pairs_keep_scored_models_and_add_uniform_attention(pooled):
    _, pairs, _, _ = pooled
    assert pairs == [("vit", "resnet"), ("convmixer", "vit"), ("vit@uniform", "vit")]


def test_pooled_contrasts_recover_the_known_effects(pooled):
    _, _, _, table = pooled
    at = table.set_index(["comparison", "probe", "level"])
    assert at.loc[("vit - resnet", "clean", 0.0), "mean"] == pytest.approx(-10.0, abs=1.0)
    assert "verdict" not in table  # exploratory: intervals only
    assert at.loc[("vit - resnet", "clean", 0.0), "mean_adj_high"] < 0
    shuffle = table[(table["comparison"] == "vit - resnet") & (table["variant"] == "shuffle") & (table["level"] == 7)]
    assert shuffle["mean"].iloc[0] == pytest.approx(10.0, abs=1.0)
    assert (table["mean_df"] == table["seeds"] - 1).all()  # the seed is the unit: never more
    assert (table["images"] == 1000).all()
    assert at.loc[("vit@uniform - vit", "clean", 0.0), "mean"] == pytest.approx(-30.0, abs=1.0)
    families = table.groupby("comparison")["family"].first()
    assert families["vit@uniform - vit"] == "uniform attention" and families["vit - resnet"] == "controls"


def test_grid_table_sets_each_on_grid_probe_beside_its_controls(pooled):
    table, _, _, pooled_table = pooled
    pairs = grid_pairs(table, patch_grid=7, patch_size=4)
    assert [p.label for p in pairs] == ["7x7 shuffle", "75% occluded", "4-px shift"]
    # the matched control first: the same shuffle offset by half a cell
    assert pairs[0].off_grid[:2] == (("rearrangement", "offset", 7.0), ("rearrangement", "shuffle", 4.0))
    _, _, diffs, _ = pooled
    on_off = C.grid_table(pooled_table, diffs, pairs, 0.95)
    shuffle = on_off[(on_off["comparison"] == "vit - resnet") & (on_off["probe"] == "7x7 shuffle")].iloc[0]
    assert shuffle["off_grid"] == "7x7 shuffle (offset)"
    assert shuffle["off_mean"] == pytest.approx(-10.0, abs=1.0)  # off the grid the ResNet still leads
    assert shuffle["interaction"] == pytest.approx(20.0, abs=1.0) and shuffle["interaction_ci_low"] > 0
    rows = ROWS.write(_sources_stub(pooled_table, on_off))
    row = next(r for r in rows if r["claim"] == "vit - resnet under the 7x7 shuffle")
    assert row["verdict"].startswith("exploratory") and "interaction +20" in row["control"]
    sentences = grid_sentences(pooled_table, on_off)
    assert any("off the grid, 7x7 shuffle (offset)" in s and "interaction" in s for s in sentences)
    fig = controls_figure(pooled_table, pairs)
    assert len(fig.axes) == 4


def _sources_stub(pooled_table, on_off):
    class Stub:
        def table(self, folder, name):
            return pooled_table

        def table_if_written(self, folder, name):
            from study import controls

            return on_off if name == controls.GRID else None
    return Stub()


def test_uniform_attention_rows_and_sentences(pooled):
    table, pairs, _, pooled_table = pooled
    rows = [r for r in ROWS.write(_sources_stub(pooled_table, None)) if "rely" in r["claim"]]
    assert rows and rows[0]["verdict"].startswith("exploratory") and "reliance" in rows[0]["control"]
    fractions = C.fraction_contrasts(table, pairs, 0.95)
    sentences = uniform_sentences(fractions)
    assert len(sentences) == 2 and "clean: 285 images -" in sentences[0] and "shuffle: 285 images -" in sentences[1]
    assert all("rely on their attention" in s for s in sentences)


def test_retention_under_the_shuffle_per_fraction(pooled):
    table, pairs, _, _ = pooled
    kept = C.retention_table(table, pairs, ("rearrangement", "shuffle", 7.0), ("rearrangement", "offset", 7.0), 0.95)
    assert set(kept["variant"]) == {"shuffle", "offset"} and set(kept["metric"]) == {"retained"}
    assert set(kept.loc[kept["on_grid"], "variant"]) == {"shuffle"}
    vit = kept[(kept["comparison"] == "vit - resnet") & kept["on_grid"]]
    # the ViT keeps 0.90 / 0.70 of its accuracy on its grid, the ResNet 0.80 / 0.80: +28.6 points of retention
    assert len(vit) == 3 and vit["diff_mean"].mean() == pytest.approx(0.2857, abs=0.03)
    sentences = retention_sentences(kept)
    assert any(s.startswith("vit - resnet, retained accuracy") for s in sentences)


def test_power_table_reports_what_the_seeds_detect(pooled):
    _, _, diffs, _ = pooled
    power = C.power_table(diffs, [("rearrangement", "shuffle", 7.0)], 0.05, 0.8, 0.05, family=2)
    row = power[(power["comparison"] == "vit - resnet") & (power["condition"] == "clean")].iloc[0]
    # two runs' noise of 1 point each, averaged over 3 fractions: a seed's mean has SD √2/√3 points
    assert row["seed_sd_points"] == pytest.approx(np.sqrt(2 / 3), rel=0.6)
    from study.stats.power import paired_power, seeds_for_power

    sd = row["seed_sd_points"] / 100  # the power is the t-test's on the seeds' means, at the seed-level SD
    assert row["power"] == pytest.approx(paired_power(4, 0.05, sd, 0.05, 2)) and row["power"] > 0.99
    assert row["seeds_needed"] == seeds_for_power(0.05, sd, 0.8, 0.05, 2) <= 4


def test_the_position_hypothesis_row_reads_the_twins_retention_per_fraction(pooled):
    from study.controls.report import _position_row

    table, pairs, _, _ = pooled
    kept = C.retention_table(table, pairs, ("rearrangement", "shuffle", 7.0), ("rearrangement", "shuffle", 4.0), 0.95)
    row = _position_row(kept[kept["comparison"] == "vit - resnet"])
    assert row["verdict"].startswith("exploratory") and row["claim"].startswith("Position embedding")
    assert row["evidence"].startswith("7x7 shuffle: 285 images +2") and row["evidence"].count("images") == 3
    # off the grid (a 4x4 shuffle, also variant "shuffle") both keep all of their accuracy: within noise
    off = kept[(kept["comparison"] == "vit - resnet") & ~kept["on_grid"]]
    assert off["diff_mean"].abs().max() < 0.03 and set(off["level"]) == {4.0}
    assert row["control"].startswith("4x4 shuffle: 285 images") and row["control"].count("images") == 3
