"""The report's "why" sentences claim a difference only where the tables' intervals support one.

Tables are built here by the analysis functions from synthetic per-seed values whose answer is known:
noise only, a clear effect, or too few seeds to infer anything.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from study.attention import locality
from study.cka import similarity as S
from study.cka.depth import across_depth_mean
from study.attention.report import attention_findings
from study.cka import report as cka_report
from study.cka.report import cka_findings
from study.outputs.tables import read_table

CONFIDENCE = 0.95


def write_cka_tables(tables: Path, gap: float, seeds: list[int], noise: float = 0.01) -> None:
    """Per-layer CKA (constant over 3 layers) of fraction 0.1 to another seed's full model: the
    ceiling minus ``gap``, plus per-seed noise; the ceiling itself differs by seed pair."""
    rng = np.random.default_rng(0)
    reference = S.reference_seeds(seeds)

    def frame(values: dict, fraction: float | None) -> pd.DataFrame:
        return pd.DataFrame([
            {"model": "vit", "fraction": fraction, "seed": s, "reference_seed": reference[s], "layer": f"l{i}",
             "relative_depth": d, "cka": v}
            for s, v in values.items() for i, d in enumerate(S.relative_depths(3))
        ])

    ceiling_values = {s: 0.9 - 0.02 * i for i, s in enumerate(seeds)}
    ceiling = frame(ceiling_values, None).drop(columns="fraction")
    to_full = frame({s: ceiling_values[s] - gap + noise * rng.normal() for s in seeds}, 0.1)
    folder = tables / "cka"
    folder.mkdir(parents=True, exist_ok=True)
    S.to_full_summary(to_full, ceiling, CONFIDENCE).to_csv(folder / "cka_to_full.csv", index=False)
    ceiling.to_csv(folder / "cka_ceiling.csv", index=False)
    matrices = {s: {("resnet", "vit"): (["a", "b"], ["c", "d", "e"], np.full((2, 3), 0.4 + 0.01 * s))} for s in seeds}
    per_seed = S.across_depth(matrices)
    per_seed.to_csv(folder / "cka_across_depth_seeds.csv", index=False)
    S.across_depth_summary(per_seed, ceiling, CONFIDENCE).to_csv(folder / "cka_across_depth.csv", index=False)


def cka(tables: Path, reference: float = 1.0) -> list[str]:
    """The CKA sentences from the tables as the report stage reads them: the cka stage's, and its own depth
    average of cross-model CKA."""
    folder = tables / "cka"
    if (folder / "cka_across_depth.csv").is_file():
        across = across_depth_mean(pd.read_csv(folder / "cka_across_depth.csv"),
                                   pd.read_csv(folder / "cka_across_depth_seeds.csv"))
        across.to_csv(folder / "cka_across_depth_mean.csv", index=False)  # read back, as the renderer does
    return cka_findings(read_table(folder / "cka_to_full.csv"), read_table(folder / "cka_across_depth_mean.csv"),
                        reference=reference)


def cka_limitations(tables: Path) -> list[str]:
    return cka_report.cka_limitations(read_table(tables / "cka" / "cka_to_full.csv"), None)


def attention(tables: Path) -> list[str]:
    folder = tables / "attention"
    return attention_findings(read_table(folder / "attention_layers.csv"), read_table(folder / "attention_contrasts.csv"))


def write_attention_tables(tables: Path, change: float, seeds: list[int]) -> None:
    """First-block most-local head near uniform (13.5 px) at init and at 10% data, ``change`` px away from
    that at full data; per-seed noise of a few tenths of a pixel."""
    noise = [0.2, -0.15, 0.05, -0.1, 0.12][: len(seeds)]
    nan = float("nan")
    rows = []
    for seed, e in zip(seeds, noise):
        for state, fraction, most_local in ((locality.INIT, nan, 13.5 + e), (locality.TRAINED, 0.1, 13.5 - e),
                                            (locality.TRAINED, 1.0, 13.5 + change + e / 2)):
            for layer in (0, 1):
                for head, distance in enumerate([most_local, 14.0, 14.5, 15.0]):
                    rows.append({"model": "vit", "state": state, "fraction": fraction, "seed": seed, "layer": layer,
                                 "head": head, "distance": distance, "entropy": 2.5, "uniform_distance": 14.06,
                                 "uniform_entropy": math.log(16)})
    heads = pd.DataFrame(rows, columns=locality.HEAD_COLUMNS)
    layers = locality.layer_statistics(heads)
    folder = tables / "attention"
    folder.mkdir(parents=True, exist_ok=True)
    locality.head_table(heads, CONFIDENCE).to_csv(folder / "attention_heads.csv", index=False)
    locality.layer_table(layers, CONFIDENCE).to_csv(folder / "attention_layers.csv", index=False)
    locality.contrasts(layers, CONFIDENCE).to_csv(folder / "attention_contrasts.csv", index=False)


# --- CKA -------------------------------------------------------------------------------------------------


def test_cka_noise_only_gives_no_detectable_difference(tmp_path):
    write_cka_tables(tmp_path, gap=0.0, seeds=[0, 1, 2, 3, 4])
    text = " ".join(cka(tmp_path))
    assert "no detectable difference from the cross-seed ceiling" in text
    assert "below the cross-seed" not in text and "above the cross-seed" not in text


def test_cka_clear_gap_is_claimed_with_its_interval(tmp_path):
    write_cka_tables(tmp_path, gap=0.3, seeds=[0, 1, 2, 3, 4])
    findings = cka(tmp_path)
    claim = next(s for s in findings if "below the cross-seed ceiling" in s)
    assert "At 10% of the data, vit's CKA" in claim and "by 0.30" in claim and "Holm-adjusted" in claim
    assert any("At matched relative depth, resnet and vit trained on full data have CKA" in s for s in findings)


def test_cka_sentences_name_the_largest_fraction_when_it_is_not_full_data(tmp_path):
    write_cka_tables(tmp_path, gap=0.3, seeds=[0, 1, 2, 3, 4])
    findings = cka(tmp_path, reference=0.1)
    assert any("trained on the largest fraction (10% of the data)" in s for s in findings)
    assert not any("full data" in s or "full-data" in s for s in findings)


def test_cka_with_two_seeds_is_descriptive_only(tmp_path):
    write_cka_tables(tmp_path, gap=0.3, seeds=[0, 1])
    text = " ".join(cka(tmp_path))
    assert "with 2 seeds no difference is inferred" in text
    assert "below" not in text and "above" not in text and "no detectable" not in text
    assert any("single pair of seeds" in s for s in cka_limitations(tmp_path))


def test_cka_with_one_seed_says_it_is_not_measured(tmp_path):
    (tmp_path / "cka").mkdir()
    pd.DataFrame(columns=S.SUMMARY_COLUMNS).to_csv(tmp_path / "cka" / "cka_to_full.csv", index=False)
    assert cka(tmp_path) == [
        "CKA to a model trained on full data is not measured: it compares against a model of another seed, and the "
        "study has one."]
    assert any("one training seed" in s for s in cka_limitations(tmp_path))


# --- attention -------------------------------------------------------------------------------------------


def test_attention_noise_only_gives_no_detectable_difference(tmp_path):
    write_attention_tables(tmp_path, change=0.0, seeds=[0, 1, 2, 3, 4])
    text = " ".join(attention(tmp_path))
    assert "no detectable difference from initialisation" in text
    assert "no detectable difference from 10% of the data" in text
    assert "closer" not in text and "farther" not in text


def test_attention_clear_change_is_claimed_against_init_and_smallest_fraction(tmp_path):
    write_attention_tables(tmp_path, change=-6.0, seeds=[0, 1, 2, 3, 4])
    findings = attention(tmp_path)
    first = next(s for s in findings if "most local head" in s)
    assert "closer (more local) than at initialisation" in first
    assert "closer (more local) than at 10% of the data" in first
    assert "(uniform attention: 14.06 px)" in first
    local = next(s for s in findings if "heads attend below" in s)
    assert "1.0 of 4 heads" in local and "0.0 at initialisation" in local


def test_attention_with_two_seeds_is_descriptive_only(tmp_path):
    write_attention_tables(tmp_path, change=-6.0, seeds=[0, 1])
    text = " ".join(attention(tmp_path))
    assert "with 2 seeds no difference is inferred" in text
    assert "closer" not in text and "no detectable" not in text and "CI" not in text
