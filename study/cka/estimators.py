"""Centred kernel alignment (CKA): how similar two layers' representations of the same images are.

Two entry points:

* :func:`linear_cka` — full-batch linear CKA of Kornblith et al. (2019), "Similarity of Neural Network
  Representations Revisited", with the biased HSIC₀ or (``debiased=True``) the unbiased HSIC₁ of
  Song et al. (2012), as in Kornblith et al.'s reference code. For a few thousand examples.
* :class:`MinibatchCKA` — minibatch CKA of Nguyen, Raghu & Kornblith (2021), "Do Wide and Deep Networks
  Learn the Same Things?", §3.1: per batch, HSIC₁ of every layer pair and of every layer with itself;
  the three HSIC terms are averaged over batches and only then combined into CKA. Averaging per-batch CKA
  values instead would be a different (biased) quantity.

Definitions (Kornblith et al. 2019, §3; HSIC₁ as Nguyen, Raghu & Kornblith 2021 use it): with Grams ``K = XXᵀ`` and ``L = YYᵀ`` (n × n),
``CKA = HSIC(K, L) / sqrt(HSIC(K, K) · HSIC(L, L))``;
``HSIC₀ = tr(KHLH) / (n−1)²`` with ``H = I − 11ᵀ/n``; and with ``K̃, L̃`` the Grams with zeroed diagonals,
``HSIC₁ = [tr(K̃L̃) + (1ᵀK̃1)(1ᵀL̃1)/((n−1)(n−2)) − (2/(n−2))·1ᵀK̃L̃1] / (n(n−3))``, which needs n ≥ 4.

Precision choice of :class:`MinibatchCKA`: the Gram ``XXᵀ`` costs n²·p and dominates the run time
(p is 10⁴–10⁵ flattened features), so it is computed in float32 (about 2× faster than float64 on CPU,
far more on GPUs) from features whose batch mean has been subtracted first — HSIC₁ is exactly invariant
to that shift, and removing it keeps large post-ReLU means from swamping the float32 dot products.
Everything after the Gram (zeroed diagonal, HSIC terms, sums over batches) is float64, because HSIC₁
is a difference of large terms. ``benchmarks.cka`` measures the effect against an all-float64 reference.

One module although over 300 lines: :func:`linear_cka` is the full-batch reference that :class:`MinibatchCKA` is
checked against, and both are built from the same Gram and HSIC definitions above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from study.core.errors import StudyError

Kernel = Literal["linear", "rbf"]

# HSIC₁ divides by n(n−3) and (n−1)(n−2): it is undefined for fewer than 4 examples.
MIN_BATCH = 4


# --------------------------------------------------------------------------------------------------
# Features -> Grams
# --------------------------------------------------------------------------------------------------


def flatten_examples(features: Tensor | np.ndarray, dtype: torch.dtype) -> Tensor:
    """Return features as an (n, p) tensor of ``dtype``: the first dim indexes examples."""
    x = torch.as_tensor(features)
    if x.ndim < 2:
        raise StudyError(
            f"features have shape {tuple(x.shape)}; pass at least 2-D (examples × features) data"
        )
    # (n, d1, d2, ...) -> (n, d1·d2·...): CKA compares whole per-example representations.
    return x.reshape(x.shape[0], -1).to(dtype)


def _centred_linear_gram(x: Tensor) -> Tensor:
    """(n, p) features -> (n, n) Gram of the column-centred features (same dtype as ``x``)."""
    x = x - x.mean(dim=0, keepdim=True)
    return x @ x.T


def _rbf_gram(linear_gram: Tensor, threshold: float) -> Tensor:
    """(n, n) centred linear Gram -> float64 RBF Gram with σ = threshold × median pairwise distance.

    ``‖xᵢ − xⱼ‖² = Gᵢᵢ + Gⱼⱼ − 2Gᵢⱼ`` reuses the linear Gram instead of a second n²·p pass. The median
    is over the n(n−1)/2 distinct pairs (i < j); Kornblith et al.'s reference code takes the median of
    the full n × n matrix, diagonal zeros included, which gives a slightly smaller σ.
    """
    g = linear_gram.to(torch.float64)
    norms = torch.diagonal(g)  # (n,)
    sq_dist = (norms[:, None] + norms[None, :] - 2.0 * g).clamp_min(0.0)  # (n, n)
    sq_dist.fill_diagonal_(0.0)
    n = g.shape[0]
    rows, cols = torch.triu_indices(n, n, offset=1, device=g.device)
    sigma = threshold * _median(sq_dist[rows, cols].sqrt())  # 0-d tensor: no host sync
    # σ = 0 only if all examples coincide; the NaNs it would produce are caught in compute().
    return torch.exp(-sq_dist / (2.0 * sigma * sigma))


def _median(values: Tensor) -> Tensor:
    """Median of a 1-D tensor, averaging the two middle values for an even count (as numpy does)."""
    ordered = torch.sort(values).values
    m = ordered.numel()
    return 0.5 * (ordered[(m - 1) // 2] + ordered[m // 2])


# --------------------------------------------------------------------------------------------------
# HSIC estimators on single Grams (full batch)
# --------------------------------------------------------------------------------------------------


def hsic0(k: Tensor, l: Tensor) -> Tensor:
    """Biased HSIC₀ = tr(KHLH)/(n−1)² of two (n, n) Grams (Gretton et al., 2005)."""
    n = k.shape[0]
    # HKH: subtract row and column means, add back the grand mean.
    kc = k - k.mean(0, keepdim=True) - k.mean(1, keepdim=True) + k.mean()
    lc = l - l.mean(0, keepdim=True) - l.mean(1, keepdim=True) + l.mean()
    # tr(HKH · HLH) = Σᵢⱼ (HKH)ᵢⱼ (HLH)ᵢⱼ for symmetric matrices; H is idempotent.
    return (kc * lc).sum() / (n - 1) ** 2


def hsic1(k: Tensor, l: Tensor) -> Tensor:
    """Unbiased HSIC₁ (Song et al., 2012) of two (n, n) Grams; needs n ≥ 4."""
    _check_batch_size(k.shape[0])
    a = _GramSummary.of(k[None])
    b = _GramSummary.of(l[None])
    return _hsic1_pairs(a, b)[0, 0]


def linear_cka(x: Tensor | np.ndarray, y: Tensor | np.ndarray, debiased: bool = False) -> float:
    """Linear CKA between two representations of the same n examples, computed in float64.

    ``x`` (n × p) and ``y`` (n × q); arrays with more dims are flattened per example. ``debiased``
    uses the unbiased HSIC₁ estimator (needs n ≥ 4) in place of HSIC₀.
    """
    x64 = flatten_examples(x, torch.float64)
    y64 = flatten_examples(y, torch.float64)
    if x64.shape[0] != y64.shape[0]:
        raise StudyError(
            f"x has {x64.shape[0]} examples but y has {y64.shape[0]}; pass the same images to both"
        )
    k = _centred_linear_gram(x64)
    l = _centred_linear_gram(y64)
    hsic = hsic1 if debiased else hsic0
    denominator = math.sqrt(max(float(hsic(k, k)), 0.0) * max(float(hsic(l, l)), 0.0))
    if denominator == 0.0:
        raise StudyError("one representation is constant across the examples, so CKA is undefined")
    return float(hsic(k, l)) / denominator


# --------------------------------------------------------------------------------------------------
# Batched HSIC₁ for all layer pairs at once
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _GramSummary:
    """What HSIC₁ needs from a stack of m Grams of n examples, all float64.

    ``flat`` (m, n²) zero-diagonal Grams K̃, flattened; ``row_sums`` (m, n) = K̃1; ``totals`` (m,) = 1ᵀK̃1.
    """

    flat: Tensor
    row_sums: Tensor
    totals: Tensor
    n: int

    @staticmethod
    def of(grams: Tensor) -> "_GramSummary":
        """Summarise (m, n, n) Grams (any float dtype; cast to a float64 copy)."""
        m, n, _ = grams.shape
        zero_diag = grams.to(torch.float64, copy=True)
        torch.diagonal(zero_diag, dim1=-2, dim2=-1).zero_()
        row_sums = zero_diag.sum(dim=2)  # (m, n)
        return _GramSummary(
            flat=zero_diag.reshape(m, n * n),  # (m, n, n) -> (m, n²)
            row_sums=row_sums,
            totals=row_sums.sum(dim=1),  # (m,)
            n=n,
        )


def _hsic1_pairs(a: _GramSummary, b: _GramSummary) -> Tensor:
    """HSIC₁ of every Gram in ``a`` with every Gram in ``b``: (m_a, m_b), three matmuls in all."""
    n = a.n
    # tr(K̃L̃) = Σᵢⱼ K̃ᵢⱼ L̃ᵢⱼ because L̃ is symmetric.
    trace = a.flat @ b.flat.T  # (m_a, m_b)
    totals = torch.outer(a.totals, b.totals) / ((n - 1) * (n - 2))  # (m_a, m_b)
    # 1ᵀK̃L̃1 = (K̃1)ᵀ(L̃1) because K̃ is symmetric.
    cross = a.row_sums @ b.row_sums.T  # (m_a, m_b)
    return (trace + totals - 2.0 / (n - 2) * cross) / (n * (n - 3))


def _hsic1_self(a: _GramSummary) -> Tensor:
    """HSIC₁(K, K) of every Gram in ``a`` with itself: (m,), without the m × m cross terms."""
    n = a.n
    trace = (a.flat * a.flat).sum(dim=1)
    totals = a.totals * a.totals / ((n - 1) * (n - 2))
    cross = (a.row_sums * a.row_sums).sum(dim=1)
    return (trace + totals - 2.0 / (n - 2) * cross) / (n * (n - 3))


def _check_batch_size(n: int) -> None:
    if n < MIN_BATCH:
        raise StudyError(
            f"unbiased HSIC needs at least {MIN_BATCH} examples per batch, got {n}; "
            "use a larger batch size or drop the last incomplete batch (drop_last=True)"
        )


class MinibatchCKA:
    """Minibatch CKA (Nguyen, Raghu & Kornblith, 2021) between every layer of model a and model b.

    Call :meth:`update` once per batch with both models' features of the same images in the same
    order, then :meth:`compute`. For within-model CKA pass the same layer list twice and the same dict
    twice (or ``feats_b=None``): each Gram is then computed once.

    Every batch counts equally in the average, as in the paper; make batches equal-sized (drop the last
    incomplete batch) so that a small remainder does not weigh as much as a full batch.
    """

    def __init__(
        self,
        layers_a: Sequence[str],
        layers_b: Sequence[str],
        kernel: Kernel = "linear",
        rbf_threshold: float = 1.0,
        gram_dtype: torch.dtype = torch.float32,
    ) -> None:
        if kernel not in ("linear", "rbf"):
            raise StudyError(f"unknown CKA kernel {kernel!r}; use 'linear' or 'rbf'")
        if not layers_a or not layers_b:
            raise StudyError("MinibatchCKA needs at least one layer on each side")
        if rbf_threshold <= 0:
            raise StudyError(f"rbf_threshold must be positive, got {rbf_threshold}")
        self.layers_a = list(layers_a)
        self.layers_b = list(layers_b)
        self.kernel: Kernel = kernel
        self.rbf_threshold = rbf_threshold
        self.gram_dtype = gram_dtype
        self.num_batches = 0
        self.num_examples = 0
        # Sums over batches of HSIC₁(K_a, K_b), HSIC₁(K_a, K_a), HSIC₁(K_b, K_b); float64, on the
        # features' device, created at the first batch.
        self._sum_ab: Tensor | None = None
        self._sum_aa: Tensor | None = None
        self._sum_bb: Tensor | None = None

    def update(self, feats_a: Mapping[str, Tensor], feats_b: Mapping[str, Tensor] | None = None) -> None:
        """Add one batch: ``feats_*[layer]`` is (n, ...) for the same n images on both sides."""
        if feats_b is None:
            feats_b = feats_a
        n = self._batch_size(feats_a, feats_b)
        grams: dict[str, Tensor] = {}  # layer name -> Gram, shared between sides for one dict
        a = self._summarise(feats_a, self.layers_a, grams)
        if feats_b is feats_a and self.layers_b == self.layers_a:
            b = a
        else:
            b = self._summarise(feats_b, self.layers_b, grams if feats_b is feats_a else {})
        batch_ab = _hsic1_pairs(a, b)  # (m_a, m_b)
        batch_aa = _hsic1_self(a)  # (m_a,)
        batch_bb = batch_aa if b is a else _hsic1_self(b)  # (m_b,)
        if self._sum_ab is None:
            self._sum_ab, self._sum_aa, self._sum_bb = batch_ab, batch_aa, batch_bb
        else:
            self._sum_ab = self._sum_ab + batch_ab
            self._sum_aa = self._sum_aa + batch_aa
            self._sum_bb = self._sum_bb + batch_bb
        self.num_batches += 1
        self.num_examples += n

    def compute(self) -> np.ndarray:
        """CKA matrix (len(layers_a), len(layers_b)) from the batch-averaged HSIC₁ terms."""
        if self._sum_ab is None:
            raise StudyError("MinibatchCKA.compute() before any update(); feed at least one batch")
        # Ratio of means = ratio of sums: the 1/num_batches factors cancel.
        sum_ab = self._sum_ab.cpu().numpy()
        sum_aa = self._sum_aa.cpu().numpy()
        sum_bb = self._sum_bb.cpu().numpy()
        for name, value in [*zip(self.layers_a, sum_aa), *zip(self.layers_b, sum_bb)]:
            if not np.isfinite(value) or value <= 0.0:
                raise StudyError(
                    f"layer {name!r} has HSIC(K, K) = {value:.3g} (constant or non-finite features), "
                    "so CKA is undefined; check its features or leave it out of the layer list"
                )
        return sum_ab / np.sqrt(np.outer(sum_aa, sum_bb))

    # ----------------------------------------------------------------------------------------------

    def _batch_size(self, feats_a: Mapping[str, Tensor], feats_b: Mapping[str, Tensor]) -> int:
        """Check that every layer is present and all hold the same n ≥ 4 examples; return n."""
        sizes: dict[str, int] = {}
        for feats, layers, side in ((feats_a, self.layers_a, "a"), (feats_b, self.layers_b, "b")):
            missing = [name for name in layers if name not in feats]
            if missing:
                raise StudyError(
                    f"layers {missing} of model {side} are missing from this batch's features "
                    f"(got {sorted(feats)}); check the hook names — a hook that never fired records nothing"
                )
            for name in layers:
                sizes[f"{side}:{name}"] = int(feats[name].shape[0])
        if len(set(sizes.values())) != 1:
            raise StudyError(
                f"layers disagree on the batch size ({sizes}); feed both models the same images"
            )
        n = next(iter(sizes.values()))
        _check_batch_size(n)
        return n

    def _summarise(
        self, feats: Mapping[str, Tensor], layers: list[str], cache: dict[str, Tensor]
    ) -> _GramSummary:
        """Gram of each listed layer (from ``cache`` when already computed), stacked and summarised."""
        for name in layers:
            if name not in cache:
                cache[name] = self._gram(feats[name])
        stacked = torch.stack([cache[name] for name in layers])  # m × (n, n) -> (m, n, n)
        return _GramSummary.of(stacked)

    def _gram(self, features: Tensor) -> Tensor:
        """(n, ...) features -> (n, n) kernel Gram (linear in ``gram_dtype``; RBF in float64)."""
        with torch.no_grad():
            gram = _centred_linear_gram(flatten_examples(features.detach(), self.gram_dtype))
            if self.kernel == "rbf":
                gram = _rbf_gram(gram, self.rbf_threshold)
        return gram
