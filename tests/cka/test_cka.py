"""CKA maths checked against independent computations written here (numpy, loops, U-statistics)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.spatial.distance import pdist, squareform

from study.cka import estimators as cka_module
from study.cka.estimators import MinibatchCKA, hsic0, hsic1, linear_cka
from study.cka.figures import CKAPanel, cka_frame, cka_grid, cka_heatmap, cka_to_reference
from study.curves.figures import data_efficiency_figure
from study.outputs.figure_style import save_figure
from study.core.errors import StudyError
from study.train.spec import RunSpec


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def correlated(rng: np.random.Generator, n: int, p: int, q: int, noise: float = 1.0):
    """X (n, p) and Y (n, q) sharing a 3-dim latent signal."""
    latent = rng.normal(size=(n, 3))
    x = latent @ rng.normal(size=(3, p)) + noise * rng.normal(size=(n, p))
    y = latent @ rng.normal(size=(3, q)) + noise * rng.normal(size=(n, q))
    return x, y


# ---------------------------------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------------------------------


def feature_space_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith et al. (2019) eq. for linear CKA in feature space, columns centred."""
    x = x - x.mean(0)
    y = y - y.mean(0)
    return np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))


def hsic0_with_h(k: np.ndarray, l: np.ndarray) -> float:
    n = len(k)
    h = np.eye(n) - np.ones((n, n)) / n
    return np.trace(k @ h @ l @ h) / (n - 1) ** 2


def hsic1_u_statistic(k: np.ndarray, l: np.ndarray) -> float:
    """Song et al. (2012) unbiased HSIC as the U-statistic over distinct index 4-tuples (O(n⁴))."""
    n = len(k)
    total = 0.0
    count = 0
    for i, j, q, r in itertools.permutations(range(n), 4):
        total += k[i, j] * l[i, j] + k[i, j] * l[q, r] - 2 * k[i, j] * l[i, q]
        count += 1
    return total / count


def u_centre(gram: np.ndarray) -> np.ndarray:
    """U-centring (Székely & Rizzo 2014), the form Kornblith et al.'s code uses for debiased CKA."""
    n = len(gram)
    g = gram.copy()
    np.fill_diagonal(g, 0)
    u = g - g.sum(0, keepdims=True) / (n - 2) - g.sum(1, keepdims=True) / (n - 2) + g.sum() / (
        (n - 1) * (n - 2)
    )
    np.fill_diagonal(u, 0)
    return u


def debiased_cka_u_centred(kx: np.ndarray, ky: np.ndarray) -> float:
    a, b = u_centre(kx), u_centre(ky)
    return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))


def rbf_gram_scipy(x: np.ndarray, threshold: float) -> np.ndarray:
    distances = pdist(x)  # distinct pairs
    sigma = threshold * np.median(distances)
    return np.exp(-squareform(distances) ** 2 / (2 * sigma**2))


# ---------------------------------------------------------------------------------------------------
# Full-batch linear CKA
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("debiased", [False, True])
def test_self_similarity_is_one(rng, debiased):
    x = rng.normal(size=(40, 7))
    assert linear_cka(x, x, debiased=debiased) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("debiased", [False, True])
def test_invariant_to_orthogonal_transform_and_isotropic_scaling(rng, debiased):
    x, y = correlated(rng, 60, 8, 5)
    q, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    base = linear_cka(x, y, debiased=debiased)
    assert 0.05 < base < 0.95
    assert linear_cka(3.7 * x @ q, y, debiased=debiased) == pytest.approx(base, abs=1e-12)
    assert linear_cka(x, 0.01 * y, debiased=debiased) == pytest.approx(base, abs=1e-12)


@pytest.mark.parametrize("debiased", [False, True])
def test_not_invariant_to_arbitrary_invertible_linear_map(rng, debiased):
    x = rng.normal(size=(80, 6))
    u, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    v, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    ill_conditioned = u @ np.diag(np.logspace(0, -3, 6)) @ v  # condition number 1000
    # Same information, but CKA is not invariant to invertible linear maps (unlike CCA).
    assert linear_cka(x, x @ ill_conditioned, debiased=debiased) < 0.8


def test_feature_space_formula_matches_gram_formula(rng):
    x, y = correlated(rng, 50, 30, 12)
    x += 5.0  # a large mean: centring must happen
    assert linear_cka(x, y) == pytest.approx(feature_space_cka(x, y), abs=1e-12)


def test_hsic0_matches_centring_matrix_formula(rng):
    x, y = correlated(rng, 20, 4, 6)
    k, l = x @ x.T, y @ y.T
    assert float(hsic0(torch.tensor(k), torch.tensor(l))) == pytest.approx(hsic0_with_h(k, l), rel=1e-12)


def test_hsic1_matches_u_statistic_over_distinct_quadruples(rng):
    x, y = correlated(rng, 7, 3, 4)
    k, l = x @ x.T, y @ y.T
    k[np.diag_indices(7)] += 11.0  # the diagonal must not matter
    assert float(hsic1(torch.tensor(k), torch.tensor(l))) == pytest.approx(
        hsic1_u_statistic(k, l), rel=1e-10
    )


def test_debiased_cka_matches_u_centred_grams_and_differs_from_biased(rng):
    x, y = correlated(rng, 30, 40, 25, noise=2.0)
    expected = debiased_cka_u_centred(x @ x.T, y @ y.T)
    assert linear_cka(x, y, debiased=True) == pytest.approx(expected, abs=1e-12)
    # With few examples and many features the biased estimator is inflated.
    assert linear_cka(x, y) > linear_cka(x, y, debiased=True) + 0.05


def test_accepts_tensors_and_flattens_trailing_dims(rng):
    x = rng.normal(size=(12, 3, 4, 5))
    y = rng.normal(size=(12, 10))
    flat = linear_cka(x.reshape(12, -1), y)
    assert linear_cka(torch.tensor(x, dtype=torch.float32), torch.tensor(y)) == pytest.approx(flat, abs=1e-6)


def test_full_batch_errors(rng):
    with pytest.raises(StudyError, match="at least 4"):
        linear_cka(rng.normal(size=(3, 5)), rng.normal(size=(3, 5)), debiased=True)
    with pytest.raises(StudyError, match="same images"):
        linear_cka(rng.normal(size=(5, 5)), rng.normal(size=(6, 5)))
    with pytest.raises(StudyError, match="constant"):
        linear_cka(np.ones((8, 3)), rng.normal(size=(8, 5)))


# ---------------------------------------------------------------------------------------------------
# Minibatch CKA
# ---------------------------------------------------------------------------------------------------


def as_feats(**arrays: np.ndarray) -> dict[str, torch.Tensor]:
    return {name: torch.tensor(value, dtype=torch.float64) for name, value in arrays.items()}


def test_single_batch_equals_debiased_full_batch(rng):
    x1, y1 = correlated(rng, 64, 20, 9)
    x2 = rng.normal(size=(64, 2, 5))
    metric = MinibatchCKA(["x1", "x2"], ["y1"], gram_dtype=torch.float64)
    metric.update(as_feats(x1=x1, x2=x2), as_feats(y1=y1))
    result = metric.compute()
    assert result.shape == (2, 1)
    assert result[0, 0] == pytest.approx(linear_cka(x1, y1, debiased=True), abs=1e-6)
    assert result[1, 0] == pytest.approx(linear_cka(x2, y1, debiased=True), abs=1e-6)


def test_averages_hsic_terms_then_takes_the_ratio(rng):
    # Batches with very different scales and agreement: ratio of means ≠ mean of ratios.
    x_a = 10.0 * rng.normal(size=(16, 6))
    y_a = x_a + 0.1 * rng.normal(size=(16, 6))
    x_b, y_b = rng.normal(size=(16, 6)), rng.normal(size=(16, 6))
    metric = MinibatchCKA(["x"], ["y"], gram_dtype=torch.float64)
    terms = []
    for x, y in [(x_a, y_a), (x_b, y_b)]:
        metric.update(as_feats(x=x), as_feats(y=y))
        a, b = u_centre(x @ x.T), u_centre(y @ y.T)
        terms.append([(a * b).sum(), (a * a).sum(), (b * b).sum()])
    xy, xx, yy = np.mean(terms, axis=0)
    expected = xy / np.sqrt(xx * yy)
    per_batch_mean = np.mean([t[0] / np.sqrt(t[1] * t[2]) for t in terms])
    assert metric.compute()[0, 0] == pytest.approx(expected, abs=1e-6)
    assert abs(expected - per_batch_mean) > 0.1


def test_minibatch_close_to_full_batch_on_large_batches(rng):
    x, y = correlated(rng, 2000, 30, 20, noise=1.5)
    metric = MinibatchCKA(["x"], ["y"])
    for start in range(0, 2000, 500):
        metric.update(as_feats(x=x[start : start + 500]), as_feats(y=y[start : start + 500]))
    minibatch = metric.compute()[0, 0]
    full = linear_cka(x, y, debiased=True)
    assert minibatch == pytest.approx(full, abs=0.02)
    assert minibatch != pytest.approx(full, abs=1e-9)  # a different estimator, not the same number
    assert metric.num_batches == 4 and metric.num_examples == 2000


def test_within_model_reuses_grams_and_is_symmetric(rng, monkeypatch):
    x, y = correlated(rng, 32, 10, 10)
    feats = as_feats(a=x, b=y, c=x + y)
    calls = []
    original = MinibatchCKA._gram
    monkeypatch.setattr(MinibatchCKA, "_gram", lambda self, f: calls.append(1) or original(self, f))
    within = MinibatchCKA(["a", "b", "c"], ["a", "b", "c"])
    within.update(feats, feats)
    within.update(feats)  # feats_b omitted = same dict
    assert len(calls) == 6  # three layers, two batches: one Gram per layer per batch
    result = within.compute()
    np.testing.assert_allclose(np.diag(result), 1.0, atol=1e-6)
    np.testing.assert_allclose(result, result.T, atol=1e-12)
    # A separate copy of the dict gives the same numbers (computed the long way).
    separate = MinibatchCKA(["a", "b", "c"], ["a", "b", "c"])
    separate.update(feats, dict(feats))
    separate.update(feats, dict(feats))
    np.testing.assert_allclose(separate.compute(), result, atol=1e-12)


def test_float32_grams_close_to_float64(rng):
    x, y = correlated(rng, 100, 500, 300)
    x += 50.0  # a large mean, as after ReLU: centring keeps float32 accurate
    results = []
    for dtype in (torch.float32, torch.float64):
        metric = MinibatchCKA(["x"], ["y"], gram_dtype=dtype)
        metric.update(as_feats(x=x), as_feats(y=y))
        results.append(metric.compute()[0, 0])
    assert results[0] == pytest.approx(results[1], abs=1e-5)


def test_rbf_matches_independent_gram_and_self_similarity(rng):
    x, y = correlated(rng, 40, 6, 4)
    metric = MinibatchCKA(["x"], ["x", "y"], kernel="rbf", rbf_threshold=0.8, gram_dtype=torch.float64)
    metric.update(as_feats(x=x), as_feats(x=x, y=y))
    result = metric.compute()
    expected = debiased_cka_u_centred(rbf_gram_scipy(x, 0.8), rbf_gram_scipy(y, 0.8))
    assert result[0, 0] == pytest.approx(1.0, abs=1e-12)
    assert result[0, 1] == pytest.approx(expected, abs=1e-9)


def test_rbf_invariant_to_rotation_and_scale_and_approaches_linear_for_wide_kernels(rng):
    x, y = correlated(rng, 50, 5, 5)
    q, _ = np.linalg.qr(rng.normal(size=(5, 5)))

    def rbf_cka(a, b, threshold):
        metric = MinibatchCKA(["a"], ["b"], kernel="rbf", rbf_threshold=threshold, gram_dtype=torch.float64)
        metric.update(as_feats(a=a), as_feats(b=b))
        return metric.compute()[0, 0]

    narrow = rbf_cka(x, y, 0.5)
    assert rbf_cka(4.0 * x @ q, y, 0.5) == pytest.approx(narrow, abs=1e-9)
    # exp(−d²/2σ²) ≈ 1 − d²/2σ² for large σ, and −d²/2 U-centres to the linear Gram.
    assert rbf_cka(x, y, 100.0) == pytest.approx(linear_cka(x, y, debiased=True), abs=1e-4)
    assert abs(narrow - linear_cka(x, y, debiased=True)) > 1e-3


def test_minibatch_errors(rng):
    metric = MinibatchCKA(["x"], ["y"])
    with pytest.raises(StudyError, match="at least 4"):
        metric.update(as_feats(x=rng.normal(size=(3, 4))), as_feats(y=rng.normal(size=(3, 4))))
    with pytest.raises(StudyError, match="missing"):
        metric.update(as_feats(x=rng.normal(size=(8, 4))), as_feats(z=rng.normal(size=(8, 4))))
    with pytest.raises(StudyError, match="batch size"):
        metric.update(as_feats(x=rng.normal(size=(8, 4))), as_feats(y=rng.normal(size=(9, 4))))
    with pytest.raises(StudyError, match="before any update"):
        metric.compute()
    with pytest.raises(StudyError, match="kernel"):
        MinibatchCKA(["x"], ["y"], kernel="cosine")
    constant = MinibatchCKA(["x"], ["y"])
    constant.update(as_feats(x=np.ones((8, 4))), as_feats(y=rng.normal(size=(8, 4))))
    with pytest.raises(StudyError, match="'x'"):
        constant.compute()


def test_no_nan_for_smallest_valid_batch(rng):
    metric = MinibatchCKA(["x"], ["y"])
    metric.update(as_feats(x=rng.normal(size=(4, 3))), as_feats(y=rng.normal(size=(4, 3))))
    assert np.isfinite(metric.compute()).all()
    assert cka_module.MIN_BATCH == 4


# ---------------------------------------------------------------------------------------------------
# CKA figures (smoke tests)
# ---------------------------------------------------------------------------------------------------


def test_cka_figures_render_and_save(tmp_path, rng):
    labels = [f"block{i}" for i in range(5)]
    matrix = rng.uniform(0.62, 0.9, size=(5, 5))
    np.fill_diagonal(matrix, 1.0)  # within one model: every layer with itself
    fig = cka_heatmap(matrix, labels, labels, "within ViT", "ViT", "ViT")
    image = fig.axes[0].images[0]
    # The colour scale spans the data, rounded outward to 0.05, not [0, 1].
    assert image.origin == "lower" and image.get_clim() == (0.6, 1.0)
    panels = [
        CKAPanel(matrix, labels, labels, "within ViT", "ViT", "ViT"),
        CKAPanel(rng.uniform(size=(5, 3)), labels, labels[:3], "ViT vs ResNet", "ViT", "ResNet"),
    ]
    grid = cka_grid(panels)
    data = cka_frame(panels)
    assert len(data) == 25 + 15
    paths = save_figure(grid, tmp_path / "figs" / "cka_grid", data)
    assert [p.suffix for p in paths] == [".png", ".pdf", ".csv"]
    assert all(p.stat().st_size > 0 for p in paths)
    assert paths[0].read_bytes().startswith(b"\x89PNG") and paths[1].read_bytes().startswith(b"%PDF")
    pd.testing.assert_frame_equal(pd.read_csv(paths[2]), data, check_dtype=False)
    assert not list((tmp_path / "figs").glob(".*tmp"))  # no temporary files left behind

    reference = pd.DataFrame(
        [
            {"model": m, "fraction": f, "seed": s, "relative_depth": d, "cka": 1 - f * d * 0.5 + 0.01 * s}
            for m in ("vit", "resnet")
            for f in (0.03, 0.1, 0.3)
            for s in (0, 1)
            for d in np.linspace(0, 1, 6)
        ]
    )
    fig = cka_to_reference(reference)
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) == 3
    with pytest.raises(StudyError, match="relative_depth"):
        cka_to_reference(reference.drop(columns="relative_depth"))


def test_data_efficiency_figure_renders_one_line_per_model(rng):
    runs = pd.DataFrame(
        [
            {"model": m, "seed": s, "train_images": n,
             "test_top1": 0.5 + 0.05 * np.log10(n) + 0.01 * rng.normal()}
            for m in ("resnet18", "vit_tiny")
            for n in (1500, 5000, 50000)
            for s in range(3)
        ]
    )
    fig = data_efficiency_figure(runs, 0.95)
    ax = fig.axes[0]
    assert len(ax.lines) == 2 and ax.get_xscale() == "log"
    assert len(ax.collections) == 4  # per model: the dots and the confidence band


# ---------------------------------------------------------------------------------------------------
# The CKA study: another seed's full-data model, the noise ceiling, relative depth
# ---------------------------------------------------------------------------------------------------

from study.cka import similarity as S  # noqa: E402


class RandomFeatures(torch.nn.Module):
    """A stand-in model with known representations: two random tanh layers whose weights come from
    ``weights_seed``. Two instances with the same weights_seed compute identical features."""

    def __init__(self, weights_seed: int, layers: int = 3) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(weights_seed)
        self.weights = [torch.randn(64 if i == 0 else 16, 16, generator=g) / 4 for i in range(layers)]

    def representations(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = x.reshape(len(x), -1)  # (B, 1, 8, 8) -> (B, 64)
        out = {}
        for i, w in enumerate(self.weights):
            h = torch.tanh(h @ w)
            out[f"layer{i}"] = h
        return out


SPEC = RunSpec(model_name="m", arch="vit", arch_args={}, num_classes=10, image_size=8, in_chans=1, fraction=1.0,
               seed=0, params=0, forward_flops=0, mean=(0.0,), std=(1.0,))  # identity normalisation


def test_reference_seed_is_the_next_seed_cyclically():
    assert S.reference_seeds([0, 1, 2]) == {0: 1, 1: 2, 2: 0}
    assert S.reference_seeds([7, 3]) == {7: 3, 3: 7}
    assert S.reference_seeds([5]) == {}


def test_to_full_compares_with_another_seeds_full_model_not_the_same_seed(rng):
    # A fraction's model of seed s has exactly the weights of the full-data model of seed s. Compared
    # with its own seed (the old, same-initialisation design) every layer would give CKA 1; compared with
    # the next seed's full-data model it must give exactly that seed pair's ceiling, below 1.
    models = {(name, f, s): (RandomFeatures(100 * s + len(name)), SPEC)
              for name in ("a", "bb") for f in (0.5, 1.0) for s in (0, 1, 2)}
    images = rng.integers(0, 256, size=(64, 8, 8, 1), dtype=np.uint8)
    result = S.cka_study(models, images, 32, "linear", 1.0, torch.device("cpu"), seeds=[0, 1, 2])
    to_full, ceiling = result["to_full"], result["ceiling"]
    assert list(to_full.columns) == S.LAYER_COLUMNS and list(ceiling.columns) == S.CEILING_COLUMNS
    assert len(to_full) == 2 * 3 * 3 and len(ceiling) == 2 * 3 * 3
    assert dict(zip(to_full["seed"], to_full["reference_seed"])) == {0: 1, 1: 2, 2: 0}
    merged = to_full.merge(ceiling, on=["model", "seed", "reference_seed", "layer"], suffixes=("", "_ceiling"))
    np.testing.assert_allclose(merged["cka"], merged["cka_ceiling"], atol=1e-9)
    assert to_full["cka"].max() < 0.99
    # Without initial weights there is no chance level and no CKA to the initialisation.
    assert result["chance"].empty and result["init_matrices"] == {} and to_full["to_init"].isna().all()
    assert sorted(to_full["relative_depth"].unique()) == [0.0, 0.5, 1.0]
    # Within-model panels per seed: the diagonal is 1; across panels are the full-data pair of that seed.
    for seed, blocks in result["matrices"].items():
        assert set(blocks) == {("a", "a"), ("a", "bb"), ("bb", "bb")}
        np.testing.assert_allclose(np.diag(blocks["a", "a"][2]), 1.0, atol=1e-9)


def test_cka_study_with_one_seed_has_no_cross_seed_comparison(rng):
    models = {("a", f, 0): (RandomFeatures(1), SPEC) for f in (0.5, 1.0)}
    images = rng.integers(0, 256, size=(16, 8, 8, 1), dtype=np.uint8)
    result = S.cka_study(models, images, 8, "linear", 1.0, torch.device("cpu"), seeds=[0])
    assert result["to_full"].empty and result["ceiling"].empty
    assert S.to_full_summary(result["to_full"], result["ceiling"], 0.95).empty
    with pytest.raises(StudyError, match="full-data run"):
        S.cka_study(models, images, 8, "linear", 1.0, torch.device("cpu"), seeds=[0, 1])


def test_depth_mean_weighs_a_13_layer_and_a_4_layer_model_alike():
    # One curve over depth, piecewise linear with knots at 0, 1/3, 2/3, 1 (layers of both models).
    def curve(depth):
        return np.interp(depth, [0, 1 / 3, 2 / 3, 1], [1.0, 0.2, 0.2, 0.2])

    deep, shallow = curve(S.relative_depths(13)), curve(S.relative_depths(4))
    assert S.depth_mean(deep) == pytest.approx(S.depth_mean(shallow), abs=1e-12)
    assert abs(deep.mean() - shallow.mean()) > 0.04  # a plain mean over layers would not


def test_matched_depth_reads_the_matrix_along_equal_relative_depth():
    da, db = S.relative_depths(3), S.relative_depths(5)
    matrix = da[:, None] + 2 * db[None, :]  # bilinear, so interpolation is exact
    np.testing.assert_allclose(S.matched_depth(matrix), 3 * S.DEPTH_GRID, atol=1e-12)


def _layers_frame(values: dict, depths=(0.0, 0.5, 1.0)) -> pd.DataFrame:
    """Per-layer rows from {(model, fraction, seed, reference_seed): constant CKA over depth}."""
    return pd.DataFrame([
        {"model": m, "fraction": f, "seed": s, "reference_seed": r, "layer": f"l{i}", "relative_depth": d, "cka": v}
        for (m, f, s, r), v in values.items() for i, d in enumerate(depths)
    ])


def test_gap_to_ceiling_is_paired_by_seed_and_holm_adjusted():
    seeds = [0, 1, 2]
    reference = S.reference_seeds(seeds)
    ceiling_values = {0: 0.5, 1: 0.7, 2: 0.9}  # large spread between seed pairs ...
    ceiling = _layers_frame({("m", 1.0, s, reference[s]): ceiling_values[s] for s in seeds}).drop(columns="fraction")
    to_full = _layers_frame({
        **{("m", 0.1, s, reference[s]): ceiling_values[s] - 0.1 + 0.002 * s for s in seeds},  # ... a steady gap
        **{("m", 0.5, s, reference[s]): ceiling_values[s] + e for s, e in zip(seeds, (0.01, -0.01, 0.003))},
    })
    summary = S.to_full_summary(to_full, ceiling, 0.95).set_index("fraction")
    assert list(summary["seeds"]) == [3, 3]
    assert summary.loc[0.1, "gap_to_ceiling_mean"] == pytest.approx(0.098)
    assert bool(summary.loc[0.1, "gap_significant"]) and not bool(summary.loc[0.5, "gap_significant"])
    assert summary.loc[0.1, "gap_ci_low"] > 0.08  # unpaired, the ceiling's 0.5-0.9 spread would swamp it
    assert summary.loc[0.1, "gap_confidence"] > 0.95  # Holm: two fractions tested as one family
    # the noise level from disjoint seed pairs only: of the cyclic pairs 0-1, 1-2, 2-0, only 0-1 (seed 0's value)
    assert summary.loc[0.1, "ceiling_mean"] == pytest.approx(0.5) and summary.loc[0.1, "ceiling_pairs"] == 1
    assert np.isnan(summary.loc[0.1, "ceiling_ci_low"])


def test_noise_and_chance_levels_come_from_disjoint_seed_pairs():
    """Six seeds paired cyclically (0-1, 1-2, ..., 5-0) reuse every seed twice; the level takes 0-1, 2-3 and 4-5."""
    seeds = list(range(6))
    reference = S.reference_seeds(seeds)
    ceiling = _layers_frame({("m", 1.0, s, reference[s]): 0.5 + 0.1 * s for s in seeds}).drop(columns="fraction")
    to_full = _layers_frame({("m", 0.1, s, reference[s]): 0.3 for s in seeds})
    row = S.to_full_summary(to_full, ceiling, 0.95).iloc[0]
    assert row["ceiling_pairs"] == 3 and row["ceiling_mean"] == pytest.approx(np.mean([0.5, 0.7, 0.9]))


def test_two_seeds_give_one_ceiling_pair_and_no_ceiling_interval():
    ceiling = _layers_frame({("m", 1.0, 0, 1): 0.8, ("m", 1.0, 1, 0): 0.8}).drop(columns="fraction")
    to_full = _layers_frame({("m", 0.1, 0, 1): 0.6, ("m", 0.1, 1, 0): 0.7})
    row = S.to_full_summary(to_full, ceiling, 0.95).iloc[0]
    assert row["ceiling_pairs"] == 1 and np.isnan(row["ceiling_ci_low"])
    assert row["gap_to_ceiling_mean"] == pytest.approx(0.15)


def test_across_depth_summary_stands_beside_each_models_ceiling():
    matrices = {s: {("a", "b"): (["x", "y"], ["p", "q", "r"], np.full((2, 3), 0.3 + 0.1 * s))} for s in (0, 1, 2)}
    per_seed = S.across_depth(matrices)
    assert len(per_seed) == 3 * len(S.DEPTH_GRID)
    ceiling = pd.concat([
        _layers_frame({(m, 1.0, 0, 1): v, (m, 1.0, 1, 2): v, (m, 1.0, 2, 0): v}).drop(columns="fraction")
        for m, v in (("a", 0.9), ("b", 0.8))
    ])
    summary = S.across_depth_summary(per_seed, ceiling, 0.95)
    np.testing.assert_allclose(summary["cka_mean"], 0.4)
    np.testing.assert_allclose(summary["ceiling_a"], 0.9)
    np.testing.assert_allclose(summary["ceiling_b"], 0.8)
    assert (summary["ci_low"] < 0.4).all() and (summary["ci_high"] > 0.4).all()


def test_cka_to_reference_draws_the_cross_seed_ceiling():
    to_full = _layers_frame({("vit", f, s, 1 - s): 0.5 + f * 0.3 for f in (0.1, 0.5) for s in (0, 1)})
    ceiling = _layers_frame({("vit", 1.0, s, 1 - s): 0.95 for s in (0, 1)}).drop(columns="fraction")
    plain = cka_to_reference(to_full)
    with_ceiling = cka_to_reference(to_full, ceiling)
    assert len(with_ceiling.axes[0].lines) == len(plain.axes[0].lines) + 1
    dashed = with_ceiling.axes[0].lines[-1]
    assert dashed.get_linestyle() == "--" and np.allclose(dashed.get_ydata(), 0.95)


def test_cka_to_reference_names_a_largest_fraction_below_full_data_and_keeps_small_fractions_exact():
    to_full = _layers_frame({("vit", f, s, 1 - s): 0.5 + f for f in (0.005, 0.05) for s in (0, 1)})
    ceiling = _layers_frame({("vit", 0.1, s, 1 - s): 0.95 for s in (0, 1)}).drop(columns="fraction")
    fig = cka_to_reference(to_full, ceiling, reference=0.1)
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert labels == ["0.5%", "5%", "another seed,\n10% of the data"]
    assert fig.axes[0].get_ylabel() == "CKA to 10%-data model"
