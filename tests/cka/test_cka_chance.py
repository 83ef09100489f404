"""CKA's chance level (initial weights), depth means without the input embedding, data-scaled heatmaps and the
report's sentences: known answers, and the chance columns recomputed directly from init.pt files."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from study.cka import similarity as S
from study.cka.estimators import MinibatchCKA, linear_cka
from study.cka.depth import across_depth_mean
from study.cka.figures import CKAPanel, cka_across_depth, cka_grid, cka_to_reference, outward_limits
from study.outputs.figure_style import save_figure
from study.runs.load import normalised_images
from study.core.errors import StudyError
from study.models import build_model, representations
from study.cka.report import cka_findings
from study.train.artifacts import load_trained, save_trained
from study.train.spec import RunSpec

CPU = torch.device("cpu")


def test_cka_of_independent_wide_representations_is_near_zero_and_of_itself_one():
    # The unbiased estimator's chance value for independent features is 0; the biased one sits far above it when
    # features outnumber examples, which is why the study uses HSIC1.
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(200, 2000)), rng.normal(size=(200, 2000))
    assert abs(linear_cka(x, y, debiased=True)) < 0.02
    assert linear_cka(x, y) > 0.5
    assert linear_cka(x, x, debiased=True) == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------------------------------------------
# The chance level recomputed from init.pt files of tiny models
# ---------------------------------------------------------------------------------------------------

ARCHS = {"vit": ("vit", {"patch_size": 4, "embed_dim": 16, "depth": 2, "num_heads": 2, "mlp_ratio": 2.0}),
         "resnet": ("resnet8", {"width": 4})}
SEEDS, FRACTIONS = [0, 1, 2], [0.5, 1.0]


def write_run(folder: Path, name: str, fraction: float, seed: int) -> None:
    """init.pt: the weights seed ``seed`` draws; model.pt: those weights moved by a fraction-specific step."""
    arch, args = ARCHS[name]
    torch.manual_seed(seed)
    model = build_model(arch, 10, 8, 1, **args)
    spec = RunSpec(model_name=name, arch=arch, arch_args=args, num_classes=10, image_size=8, in_chans=1,
                   fraction=fraction, seed=seed, params=0, forward_flops=0, mean=(0.5,), std=(0.25,))
    save_trained(folder / "init.pt", model, spec)
    generator = torch.Generator().manual_seed(1000 * seed + int(100 * fraction))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * p.std().nan_to_num(0.1) * torch.randn(p.shape, generator=generator))
    save_trained(folder / "model.pt", model, spec)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    for name in ARCHS:
        for fraction in FRACTIONS:
            for seed in SEEDS:
                write_run(runs / name / f"f{fraction}_s{seed}", name, fraction, seed)
    models = {(n, f, s): load_trained(runs / n / f"f{f}_s{s}" / "model.pt") for n in ARCHS for f in FRACTIONS
              for s in SEEDS}
    initial = {(n, s): load_trained(runs / n / f"f1.0_s{s}" / "init.pt") for n in ARCHS for s in SEEDS}
    images = np.random.default_rng(0).integers(0, 256, size=(48, 8, 8, 1), dtype=np.uint8)
    result = S.cka_study(models, images, 16, "linear", 1.0, CPU, SEEDS, initial)
    return result, models, initial, images


def direct_cka(a: tuple, b: tuple, images: np.ndarray, batch: int = 16) -> np.ndarray:
    """Layer × layer minibatch CKA of two loaded models, computed alone (not in the study's shared accumulator)."""
    (model_a, spec_a), (model_b, spec_b) = a, b
    with torch.no_grad():
        first_a = representations(model_a, normalised_images(images[:4], spec_a, CPU))
        first_b = representations(model_b, normalised_images(images[:4], spec_b, CPU))
        acc = MinibatchCKA(list(first_a), list(first_b))
        for start in range(0, len(images), batch):
            chunk = images[start : start + batch]
            acc.update(representations(model_a, normalised_images(chunk, spec_a, CPU)),
                       representations(model_b, normalised_images(chunk, spec_b, CPU)))
    return acc.compute()


def test_chance_column_equals_cka_between_two_seeds_init_pt(study):
    result, _, initial, images = study
    chance = result["chance"]
    assert list(chance.columns) == S.CHANCE_COLUMNS
    assert len(chance) == len(SEEDS) * (4 + 4)  # vit: patch_embed, 2 blocks, norm; resnet8: stem and 3 stages
    for (name, seed, reference), rows in chance.groupby(["model", "seed", "reference_seed"]):
        expected = np.diag(direct_cka(initial[name, seed], initial[name, reference], images))
        np.testing.assert_allclose(rows.sort_values("relative_depth")["cka"], expected, atol=1e-6)
    assert dict(zip(chance["seed"], chance["reference_seed"])) == {0: 1, 1: 2, 2: 0}


def test_to_init_column_equals_cka_of_each_run_to_its_own_init_pt(study):
    result, models, initial, images = study
    for frame in (result["to_full"], result["ceiling"].assign(fraction=1.0)):
        for (name, fraction, seed), rows in frame.groupby(["model", "fraction", "seed"]):
            expected = np.diag(direct_cka(models[name, fraction, seed], initial[name, seed], images))
            np.testing.assert_allclose(rows.sort_values("relative_depth")["to_init"], expected, atol=1e-6)
            assert (rows["to_init"] < 1 - 1e-3).any()  # the step moved the weights


def test_across_models_chance_is_the_pair_at_initialisation(study):
    result, _, initial, images = study
    for seed in SEEDS:
        _, _, matrix = result["init_matrices"][seed]["resnet", "vit"]
        np.testing.assert_allclose(matrix, direct_cka(initial["resnet", seed], initial["vit", seed], images),
                                   atol=1e-6)
    per_seed = S.across_depth(result["matrices"], result["init_matrices"])
    expected = S.matched_depth(result["init_matrices"][1]["resnet", "vit"][2])
    np.testing.assert_allclose(per_seed[per_seed["seed"] == 1]["chance"], expected, atol=1e-12)


def test_layer_table_names_each_models_layers_and_marks_the_embedding(study):
    result = study[0]
    table = S.layer_table(result["layers"])
    vit = table[table["model"] == "vit"]
    assert list(vit["layer"]) == ["patch_embed", "blocks.0", "blocks.1", "norm"]
    assert list(vit["input_embedding"]) == [True, False, False, False]
    np.testing.assert_allclose(vit["relative_depth"], [0, 1 / 3, 2 / 3, 1])
    assert table[table["model"] == "resnet"]["layer"].iloc[0] == "stem"


def test_missing_init_pt_is_an_error(study):
    _, models, initial, images = study
    partial = {k: v for k, v in initial.items() if k != ("vit", 2)}
    with pytest.raises(StudyError, match=r"init.pt.*'vit', 2"):
        S.cka_study(models, images, 16, "linear", 1.0, CPU, SEEDS, partial)


# ---------------------------------------------------------------------------------------------------
# Depth means leave out the input embedding; summaries carry the chance level
# ---------------------------------------------------------------------------------------------------


def layers_frame(values: dict, embedding: float = 0.99, depths=(0.0, 0.5, 1.0)) -> pd.DataFrame:
    """Per-layer rows from {(model, fraction, seed, reference_seed): CKA after the embedding}; layer l0 (the
    embedding, at depth 0) has ``embedding``."""
    return pd.DataFrame([
        {"model": m, "fraction": f, "seed": s, "reference_seed": r, "layer": f"l{i}", "relative_depth": d,
         "cka": embedding if i == 0 else v}
        for (m, f, s, r), v in values.items() for i, d in enumerate(depths)
    ])


def test_past_embedding_mean_drops_the_first_layer_and_averages_the_rest_over_its_span():
    assert S.past_embedding_mean([0.99, 0.2, 0.6], [0.0, 0.5, 1.0]) == pytest.approx(0.4)  # mean of 0.2 -> 0.6
    assert S.depth_mean([0.99, 0.2, 0.6]) == pytest.approx(np.interp(S.DEPTH_GRID, [0, .5, 1], [.99, .2, .6]).mean())
    with pytest.raises(StudyError, match="after its input embedding"):
        S.past_embedding_mean([0.9], [0.0])


def test_summary_depth_mean_excludes_the_embedding_and_reports_the_chance_level():
    seeds = [0, 1, 2, 3, 4, 5]
    ref = S.reference_seeds(seeds)
    to_full = layers_frame({("m", 0.1, s, ref[s]): 0.5 for s in seeds})
    ceiling = layers_frame({("m", 1.0, s, ref[s]): 0.8 for s in seeds}).drop(columns="fraction")
    chance = layers_frame({("m", 0.0, s, ref[s]): c for s, c in zip(seeds, (0.3, 9, 0.4, 9, 0.5, 9))}
                          ).drop(columns="fraction")  # the 9s: seeds 1, 3, 5 against their cyclic reference, left out
    row = S.to_full_summary(to_full, ceiling, 0.95, chance).iloc[0]
    assert row["mean_cka"] == pytest.approx(0.5) and row["ceiling_mean"] == pytest.approx(0.8)  # 0.99 left out
    assert row["embedding_layer"] == "l0" and row["averaged_layers"] == "l1, l2"
    assert row["chance_mean"] == pytest.approx(0.4) and row["chance_pairs"] == 3  # disjoint pairs 0-1, 2-3, 4-5
    assert row["chance_ci_low"] < 0.4 < row["chance_ci_high"]
    no_chance = S.to_full_summary(to_full, ceiling, 0.95).iloc[0]
    assert np.isnan(no_chance["chance_mean"]) and no_chance["chance_pairs"] == 0


def test_beside_puts_each_rows_noise_and_chance_level_of_the_same_seed_pair_and_layer():
    to_full = layers_frame({("m", 0.1, 0, 1): 0.5, ("m", 0.1, 1, 0): 0.6})
    ceiling = layers_frame({("m", 1.0, 0, 1): 0.8, ("m", 1.0, 1, 0): 0.9}).drop(columns="fraction")
    chance = layers_frame({("m", 0.0, 0, 1): 0.3, ("m", 0.0, 1, 0): 0.2}, embedding=0.95).drop(columns="fraction")
    table = S.beside(S.beside(to_full, ceiling, "ceiling"), chance, "chance").set_index(["seed", "layer"])
    assert len(table) == 6
    assert table.loc[(1, "l2"), ["cka", "ceiling", "chance"]].tolist() == [0.6, 0.9, 0.2]
    assert table.loc[(0, "l0"), ["cka", "ceiling", "chance"]].tolist() == [0.99, 0.99, 0.95]


def test_matched_depth_mean_takes_only_points_past_both_embeddings():
    mask = S.in_depth_mean(6, 4)  # first layers after the embedding at 0.2 and 1/3
    np.testing.assert_array_equal(S.DEPTH_GRID[mask], S.DEPTH_GRID[4:])
    embedding_high = np.full((6, 4), 0.5)
    embedding_high[0, :], embedding_high[:, 0] = 0.99, 0.99
    matrices = {s: {("a", "b"): (list("uvwxyz"), list("pqrs"), embedding_high + 0.01 * s)} for s in (0, 1, 2)}
    initial = {s: {("a", "b"): (list("uvwxyz"), list("pqrs"), np.full((6, 4), 0.2))} for s in (0, 1, 2)}
    per_seed = S.across_depth(matrices, initial)
    assert list(per_seed.columns) == S.ACROSS_COLUMNS
    summary = S.across_depth_summary(per_seed, pd.DataFrame(columns=S.CEILING_COLUMNS), 0.95)
    row = across_depth_mean(summary, per_seed).iloc[0]
    assert row["cka_mean"] == pytest.approx(0.51) and row["depth_from"] == pytest.approx(0.4)
    assert row["depth_max"] == pytest.approx(0.51) and row["chance_mean"] == pytest.approx(0.2)
    # Over the whole grid the embedding would lift the mean.
    assert per_seed.groupby("seed")["cka"].mean().mean() > 0.52


# ---------------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------------


def test_outward_limits_round_the_data_range_out_to_005():
    assert outward_limits([np.array([0.612, 0.987])]) == (0.6, 1.0)
    assert outward_limits([np.array([0.6, 0.95]), np.array([np.nan, 0.7])]) == (0.6, 0.95)
    assert outward_limits([np.array([0.8, 0.8])]) == (0.8, 0.85)
    with pytest.raises(StudyError, match="finite"):
        outward_limits([np.array([np.nan])])


def test_heatmaps_share_a_data_scaled_colour_range_with_a_colour_bar():
    labels = ["a", "b", "c"]
    panels = [CKAPanel(np.linspace(0.72, 1.0, 9).reshape(3, 3), labels, labels, "x", "x", "x"),
              CKAPanel(np.linspace(0.61, 0.9, 9).reshape(3, 3), labels, labels, "x vs y", "x", "y")]
    fig = cka_grid(panels)
    assert [ax.images[0].get_clim() for ax in fig.axes[:2]] == [(0.6, 1.0), (0.6, 1.0)]
    assert len(fig.axes) == 3 and "0.60–1.00" in fig.axes[2].get_ylabel()  # the colour bar says its range


def test_cka_to_reference_draws_noise_and_chance_levels_and_names_the_layers():
    to_full = layers_frame({("vit", f, s, 1 - s): 0.5 + f for f in (0.1, 0.5) for s in (0, 1)})
    ceiling = layers_frame({("vit", 1.0, s, 1 - s): 0.95 for s in (0, 1)}).drop(columns="fraction")
    chance = layers_frame({("vit", 0.0, s, 1 - s): 0.3 for s in (0, 1)}).drop(columns="fraction")
    ax = cka_to_reference(to_full, ceiling, chance=chance).axes[0]
    chance_line = ax.lines[-1]
    assert chance_line.get_linestyle() == ":" and np.allclose(chance_line.get_ydata(), [0.99, 0.3, 0.3])
    assert ax.lines[-2].get_linestyle() == "--"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["l0", "l1", "l2"]
    assert ax.get_ylim() == pytest.approx((0.3, 1.025))  # from the lowest value (chance), not from 0


def test_cka_across_depth_figure_draws_pair_ceilings_chance_and_the_excluded_stretch(tmp_path):
    grid = S.DEPTH_GRID
    summary = pd.DataFrame({"model_a": "resnet", "model_b": "vit", "relative_depth": grid,
                            "in_depth_mean": S.in_depth_mean(6, 4), "seeds": 3, "cka_mean": 0.7, "ci_low": 0.65,
                            "ci_high": 0.75, "ceiling_a": 0.9, "ceiling_b": 0.85, "chance_mean": 0.4,
                            "confidence": 0.95})
    fig = cka_across_depth(summary)
    ax = fig.axes[0]
    assert len(ax.lines) == 4 and ax.lines[-1].get_linestyle() == ":"
    assert ax.get_xlim() == (0, 1) and ax.get_ylim()[0] == pytest.approx(0.4)
    paths = save_figure(fig, tmp_path / "cka_across_depth", summary)
    assert paths[0].read_bytes().startswith(b"\x89PNG") and paths[1].read_bytes().startswith(b"%PDF")



def test_many_pairs_wrap_onto_rows_of_at_most_four_panels():
    """A study of 8 models has 28 pairs: in one row their panels collapse to nothing (matplotlib's warning in the
    priors preset's first run); in rows of 4 each keeps its width."""
    from study.cka.figures import MAX_COLUMNS

    models = [f"m{i}" for i in range(6)]
    pairs = [(a, b) for i, a in enumerate(models) for b in models[i + 1:]]  # 15 pairs -> 4 rows
    summary = pd.concat([pd.DataFrame({"model_a": a, "model_b": b, "relative_depth": S.DEPTH_GRID,
                                       "in_depth_mean": S.in_depth_mean(6, 4), "seeds": 3, "cka_mean": 0.7,
                                       "ci_low": 0.65, "ci_high": 0.75, "ceiling_a": 0.9, "ceiling_b": 0.85,
                                       "chance_mean": 0.4, "confidence": 0.95}) for a, b in pairs])
    fig = cka_across_depth(summary)
    assert len(fig.axes) == len(pairs) and MAX_COLUMNS == 4
    lefts = sorted({round(ax.get_position().x0, 3) for ax in fig.axes})
    assert len(lefts) == MAX_COLUMNS  # four columns, the rest on further rows
    assert len({round(ax.get_position().y0, 3) for ax in fig.axes}) == 4
    assert all(ax.get_position().width > 0.1 for ax in fig.axes)

# ---------------------------------------------------------------------------------------------------
# Report sentences
# ---------------------------------------------------------------------------------------------------


def test_every_cka_sentence_gives_its_noise_and_chance_level():
    seeds = [0, 1, 2, 3, 4, 5]
    ref = S.reference_seeds(seeds)
    to_full = layers_frame({("vit", 0.1, s, ref[s]): 0.61 + 0.001 * s for s in seeds})
    ceiling = layers_frame({("vit", 1.0, s, ref[s]): 0.9 + 0.01 * s for s in seeds}).drop(columns="fraction")
    chance = layers_frame({("vit", 0.0, s, ref[s]): 0.34 + 0.01 * s for s in seeds}).drop(columns="fraction")
    summary = S.to_full_summary(to_full, ceiling, 0.95, chance)
    across = pd.DataFrame([{"model_a": "resnet", "model_b": "vit", "seeds": 3, "cka_mean": 0.55, "ci_low": 0.5,
                            "ci_high": 0.6, "confidence": 0.95, "depth_from": 0.4, "depth_min": 0.5, "depth_max": 0.6,
                            "ceiling_a": 0.92, "ceiling_b": 0.9, "chance_mean": 0.33}])
    first, second = cka_findings(summary, across)
    # the levels over the disjoint pairs 0-1, 2-3, 4-5: ceiling 0.92, chance 0.36; the gap paired over all 6 seeds
    assert re.search(r"is 0\.61 \(95% CI [\d.]+ to [\d.]+\) vs 0\.92 \(CI 0\.\d\d to 0\.9\d\) between seeds and "
                     r"0\.36 \(CI 0\.\d\d to 0\.\d\d\) at initialisation", first)
    assert "after the input embedding (l0, left out)" in first and "below the cross-seed ceiling by 0.31" in first
    assert "vs 0.92 (resnet) and 0.90 (vit) between seeds and 0.33 at initialisation" in second
    assert "relative depth 0.40–1 (past both input embeddings)" in second
