"""Timing of :class:`~study.cka.estimators.MinibatchCKA` against a straightforward per-pair version.

Why: the CKA matrices of the study (all layer pairs, within and across models) must be cheap enough to
recompute on a 2-core CPU. The straightforward version recomputes both Grams for every layer pair in
float64 — the way many public implementations do it — and also serves as an accuracy reference for the
float32-Gram choice of ``MinibatchCKA``.

Features are random but correlated across layers (a shared low-rank signal plus noise), shaped like
ViT-Tiny/4 on 32×32 images (13 representations of 65 tokens × 192) and a 12-block ResNet on 32×32
(13 feature maps from 64×32×32 down to 512×4×4). Making the features is not timed.

Run: ``python -m benchmarks.cka [--images 2000 --batch 250 --threads 2 --no-naive]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from study.cka.estimators import MinibatchCKA

VIT_SHAPES = {f"vit.{i}": (65, 192) for i in range(13)}  # embeddings + 12 blocks
RESNET_SHAPES = {
    "resnet.stem": (64, 32, 32),
    **{f"resnet.layer1.{i}": (64, 32, 32) for i in range(3)},
    **{f"resnet.layer2.{i}": (128, 16, 16) for i in range(3)},
    **{f"resnet.layer3.{i}": (256, 8, 8) for i in range(3)},
    **{f"resnet.layer4.{i}": (512, 4, 4) for i in range(3)},
}
SIGNAL_RANK = 32  # dimension of the latent shared by all layers of one batch


def random_features(
    shapes: dict[str, tuple[int, ...]], latent: Tensor, generator: torch.Generator
) -> dict[str, Tensor]:
    """Per layer: a mix of the shared latent (n, r) and a private one, mapped to the layer's size.

    The shared weight falls from 1 to 0.2 along the layer list so that CKA values spread out; a
    little isotropic noise is added on top.
    """
    n, rank = latent.shape
    features = {}
    for weight, (name, shape) in zip(np.linspace(1.0, 0.2, len(shapes)), shapes.items()):
        p = int(np.prod(shape))
        mixed = weight * latent + (1.0 - weight) * torch.randn(n, rank, generator=generator)
        mixing = torch.randn(rank, p, generator=generator) / rank**0.5
        flat = mixed @ mixing + 0.5 * torch.randn(n, p, generator=generator)  # (n, p)
        features[name] = flat.reshape(n, *shape)  # (n, p) -> (n, *shape), as a hook would give
    return features


class NaiveMinibatchCKA:
    """Per-pair minibatch CKA: both Grams recomputed for every pair, float64, literal matrix formula."""

    def __init__(self, layers_a: list[str], layers_b: list[str]) -> None:
        self.layers_a, self.layers_b = layers_a, layers_b
        self.sums = np.zeros((len(layers_a), len(layers_b), 3))  # HSIC(K,L), HSIC(K,K), HSIC(L,L)

    def update(self, feats_a: dict[str, Tensor], feats_b: dict[str, Tensor]) -> None:
        for i, name_a in enumerate(self.layers_a):
            for j, name_b in enumerate(self.layers_b):
                k = _gram64(feats_a[name_a])
                l = _gram64(feats_b[name_b])
                self.sums[i, j] += [_hsic1(k, l), _hsic1(k, k), _hsic1(l, l)]

    def compute(self) -> np.ndarray:
        return self.sums[..., 0] / np.sqrt(self.sums[..., 1] * self.sums[..., 2])


def _gram64(features: Tensor) -> Tensor:
    x = features.reshape(features.shape[0], -1).double()  # (n, ...) -> (n, p)
    return x @ x.T


def _hsic1(k: Tensor, l: Tensor) -> float:
    """Song et al. (2012) unbiased HSIC, written as in the formula, with explicit matrix products."""
    n = k.shape[0]
    kt = k - torch.diag(torch.diag(k))
    lt = l - torch.diag(torch.diag(l))
    ones = torch.ones(n, 1, dtype=k.dtype)
    value = (
        torch.trace(kt @ lt)
        + (ones.T @ kt @ ones) * (ones.T @ lt @ ones) / ((n - 1) * (n - 2))
        - 2.0 / (n - 2) * (ones.T @ kt @ lt @ ones)
    ) / (n * (n - 3))
    return float(value)


def _timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(images: int, batch: int, naive: bool, seed: int = 0) -> dict[str, object]:
    """Time every implementation on the same batches; return timings and accuracy vs the naive one."""
    generator = torch.Generator().manual_seed(seed)
    vit, resnet = list(VIT_SHAPES), list(RESNET_SHAPES)
    implementations: dict[str, object] = {
        "minibatch_f32_vit_vs_resnet": MinibatchCKA(vit, resnet),
        "minibatch_f64_vit_vs_resnet": MinibatchCKA(vit, resnet, gram_dtype=torch.float64),
        "minibatch_f32_within_vit": MinibatchCKA(vit, vit),
    }
    if naive:
        implementations["naive_f64_vit_vs_resnet"] = NaiveMinibatchCKA(vit, resnet)
    seconds = dict.fromkeys(implementations, 0.0)
    for _ in range(images // batch):
        latent = torch.randn(batch, SIGNAL_RANK, generator=generator)
        feats_vit = random_features(VIT_SHAPES, latent, generator)
        feats_resnet = random_features(RESNET_SHAPES, latent, generator)
        for key, impl in implementations.items():
            feats_b = feats_vit if key.endswith("within_vit") else feats_resnet
            seconds[key] += _timed(lambda: impl.update(feats_vit, feats_b))
    results = {key: impl.compute() for key, impl in implementations.items()}
    report: dict[str, object] = {
        "seconds": seconds,
        "cka_vit_vs_resnet": results["minibatch_f32_vit_vs_resnet"],
    }
    reference = results.get("naive_f64_vit_vs_resnet", results["minibatch_f64_vit_vs_resnet"])
    report["max_abs_diff_f32_vs_f64_reference"] = float(
        np.abs(results["minibatch_f32_vit_vs_resnet"] - reference).max()
    )
    if naive:
        report["max_abs_diff_minibatch_f64_vs_naive"] = float(
            np.abs(results["minibatch_f64_vit_vs_resnet"] - reference).max()
        )
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-naive", action="store_true", help="skip the slow per-pair reference")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    report = run(args.images, args.batch, naive=not args.no_naive)
    print(
        f"{args.images} images in batches of {args.batch}, {args.threads} threads, "
        f"13 ViT-like × 13 ResNet-like layers ({len(VIT_SHAPES) * len(RESNET_SHAPES)} pairs)"
    )
    for key, value in report["seconds"].items():
        print(f"  {key:32s} {value:8.2f} s")
    for key in ("max_abs_diff_f32_vs_f64_reference", "max_abs_diff_minibatch_f64_vs_naive"):
        if key in report:
            print(f"  {key:40s} {report[key]:.2e}")
    cka = report["cka_vit_vs_resnet"]
    print(f"  CKA range (ViT vs ResNet, random correlated features): {cka.min():.3f} .. {cka.max():.3f}")


if __name__ == "__main__":
    main()
