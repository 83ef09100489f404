"""Corruptions that change pixel values in place: noise, brightness and contrast, stripes, fog, spatter.

Each function maps float32 images ``x`` ``(N, C, H, W)`` in [0, 1] to corrupted ones (the caller clamps
and converts back), at ``severity`` 1–5, drawing any randomness from ``rng``
(:class:`~study.robustness.probes.streams.ImageStreams`). Every function makes the same draws at every
severity, so severities differ only in their parameters. Parameter tables are indexed by severity − 1;
"MNIST-C: severity k" marks the default severity of that corruption in Mu & Gilmer's code
(``corruptions.py`` of google-research/mnist-c), whose tables (shared with Hendrycks & Dietterich's
ImageNet-C code) these follow unless a comment says otherwise.
"""

from __future__ import annotations

import math

import kornia
import torch
from torch import Tensor

from study.robustness.probes.streams import ImageStreams
from study.core.errors import StudyError

# Poisson photon counts per unit intensity: fewer photons, more relative noise. MNIST-C: severity 5.
SHOT_NOISE = (60, 25, 12, 5, 3)
# Share of pixels (per channel) replaced by 0 or 1 with equal odds. MNIST-C: severity 4.
IMPULSE_NOISE = (0.03, 0.06, 0.09, 0.17, 0.27)
# Standard deviation of additive Gaussian noise. Not in MNIST-C's final 15; its table.
GAUSSIAN_NOISE = (0.08, 0.12, 0.18, 0.26, 0.38)
# Added to the HSV value channel (to the intensity for grey images). MNIST-C: severity 5.
BRIGHTNESS = (0.1, 0.2, 0.3, 0.4, 0.5)
# Factor on the deviation from each image's per-channel mean. Not in MNIST-C's final 15; its table.
CONTRAST = (0.4, 0.3, 0.2, 0.1, 0.05)
# Share of the columns inverted, in one band at each side. MNIST-C (7 + 7 of 28 columns): severity 5.
STRIPE = (0.1, 0.2, 0.3, 0.4, 0.5)
# (fog strength t, plasma roughness r): x -> (x + t·plasma)·max(x)/(max(x) + t). MNIST-C: severity 5.
# t is MNIST-C's except at severity 4 (2.5 there, as at 3: only the texture changed, not the amount of
# fog); r = 1/wibble-decay of its diamond-square map (2, 2, 1.7, 1.5, 1.4), see `fog`.
FOG = ((1.5, 0.5), (2.0, 0.5), (2.5, 0.59), (2.75, 0.67), (3.0, 0.71))
# The plasma map is grown at twice the image side and its top-left quarter kept, as MNIST-C crops a
# 256-px map to 28 px: the haze then varies less within the image than a map of the image's own size,
# whose largest blob spans it. 4x cost 4.8 s per 2,000 images (one CPU thread), 2x 1.1 s, 1x 0.25 s.
FOG_MAP_SCALE = 2
# (mean, sd of the liquid noise, its blur sigma, threshold, blur sigma of the stain mask). Severities
# 1-3 are MNIST-C's; its 4-5 switch to fine stains that cover less (12% and 19% of the image, against
# 23% at its 3; its default is 4), so 4-5 here continue 1-3 with a lower threshold. Mean stained
# share of a 28 or 32 px image: 5%, 15%, 23%, 30%, 39%. Stains are mud: grey 63/255 (MNIST-C), and
# (63, 42, 20)/255 on colour images (ImageNet-C).
SPATTER = ((0.65, 0.3, 4.0, 0.69, 0.6), (0.65, 0.3, 3.0, 0.68, 0.6), (0.65, 0.3, 2.0, 0.68, 0.5),
           (0.65, 0.3, 2.0, 0.67, 0.5), (0.65, 0.3, 2.0, 0.66, 0.5))
MUD_GREY = (63 / 255,)
MUD_COLOUR = (63 / 255, 42 / 255, 20 / 255)
# Stain-mask values below this are dropped, giving stains sharp edges (MNIST-C's 0.8).
STAIN_EDGE = 0.8


def gaussian_filter(x: Tensor, sigma: float, border: str = "replicate") -> Tensor:
    """Gaussian blur of standard deviation ``sigma`` px, with a kernel of radius ⌈3σ⌉ (99.7% of the mass): the
    filter the corruptions build on (the corruption ``gaussian_blur`` takes a severity). ``replicate`` matches
    scikit-image's default ``mode='nearest'``, used by the reference code."""
    size = 2 * math.ceil(3.0 * sigma) + 1
    return kornia.filters.gaussian_blur2d(x, (size, size), (sigma, sigma), border_type=border)


def shot_noise(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Photon noise: each pixel a Poisson count of ``x·c`` photons, divided by ``c`` (H&D 2019)."""
    photons = SHOT_NOISE[severity - 1]
    return rng.poisson(x * photons) / photons


def impulse_noise(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Salt-and-pepper noise: a share of pixels (each channel apart) set to 0 or 1 with equal odds.

    The same uniforms decide at every severity, so a pixel hit at severity 2 is hit at severity 5."""
    hit = rng.rand(*x.shape[1:]) < IMPULSE_NOISE[severity - 1]  # (N, C, H, W)
    salt = rng.rand(*x.shape[1:]) < 0.5  # (N, C, H, W)
    return torch.where(hit, salt.to(x.dtype), x)


def gaussian_noise(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Additive Gaussian noise of standard deviation σ (then clamped to [0, 1])."""
    return x + GAUSSIAN_NOISE[severity - 1] * rng.randn(*x.shape[1:])


def brightness(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Brighter: ``c`` added to the HSV value, hue and saturation kept (H&D; MNIST-C on grey, where it is
    ``x + c``). Grey (C = 1) or RGB (C = 3) images only."""
    lift = BRIGHTNESS[severity - 1]
    if x.shape[1] == 1:
        return x + lift
    if x.shape[1] != 3:
        raise StudyError(f"brightness: needs 1 or 3 channels, got {x.shape[1]}")
    hsv = kornia.color.rgb_to_hsv(x)  # (N, 3, H, W): hue (radians), saturation, value
    value = (hsv[:, 2:] + lift).clamp(0.0, 1.0)
    return kornia.color.hsv_to_rgb(torch.cat([hsv[:, :2], value], dim=1))


def contrast(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Lower contrast: each image's deviation from its per-channel mean scaled by ``c`` (H&D)."""
    mean = x.mean(dim=(2, 3), keepdim=True)  # (N, C, 1, 1)
    return (x - mean) * CONTRAST[severity - 1] + mean


def stripe_width(width: int, severity: int) -> int:
    """Columns inverted at each side: half the severity's share of the width, rounded half up."""
    return int(STRIPE[severity - 1] / 2 * width + 0.5)


def stripe(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Invert (``1 − x``) a band of columns at the left and at the right edge (MNIST-C's "stripe": 7 + 7
    of 28 columns at severity 5; 1 + 1 at severity 1 on 28 px, 2 + 2 on 32 px)."""
    band = stripe_width(x.shape[-1], severity)
    out = x.clone()
    out[..., :band] = 1.0 - x[..., :band]
    out[..., x.shape[-1] - band:] = 1.0 - x[..., x.shape[-1] - band:]
    return out


def fog(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Fog: a plasma-fractal haze ``p`` added and the result rescaled to the image's maximum (H&D).

    The map is Kornia's diamond-square (``kornia.contrib.diamond_square``, also behind its
    ``RandomPlasma*`` augmentations), fed this image's stream: each level mixes the neighbours' mean with
    a uniform draw by a weight ``roughness^k``, so larger roughness keeps finer detail, as a smaller
    wibble decay does in H&D's map. It is grown at ``FOG_MAP_SCALE``× the image side, normalised to
    [0, 1] and cropped to the image, one map per image, shared by its channels.
    """
    strength, roughness = FOG[severity - 1]
    count, _, height, width = x.shape
    side = FOG_MAP_SCALE * max(height, width)

    def draw(shape, device=None, dtype=None):  # diamond_square asks for (N, ...) uniforms per level
        return rng.rand(*shape[1:]).to(dtype=dtype or torch.float32)

    plasma = kornia.contrib.diamond_square((count, 1, side, side), roughness=roughness, random_fn=draw,
                                           normalize_range=(0.0, 1.0), device=rng.device)
    plasma = plasma[..., :height, :width].to(x.dtype)  # (N, 1, side, side) -> (N, 1, H, W)
    peak = x.amax(dim=(1, 2, 3), keepdim=True)  # (N, 1, 1, 1)
    return (x + strength * plasma) * peak / (peak + strength)


def spatter(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Mud spatter (H&D; MNIST-C): smooth noise thresholded into blobs, blurred into a stain mask ``m``;
    the image becomes ``x·(1 − m) + mud·m``. Higher severities blur the noise less, so more blobs."""
    mean, spread, sigma_liquid, threshold, sigma_mask = SPATTER[severity - 1]
    liquid = mean + spread * rng.randn(1, *x.shape[2:])  # (N, 1, H, W), one layer for all channels
    liquid = gaussian_filter(liquid, sigma_liquid, border="reflect")
    stain = gaussian_filter((liquid > threshold).to(x.dtype), sigma_mask, border="reflect")
    stain = torch.where(stain >= STAIN_EDGE, stain, torch.zeros_like(stain))  # (N, 1, H, W)
    mud = torch.tensor(MUD_GREY if x.shape[1] == 1 else MUD_COLOUR, dtype=x.dtype, device=x.device)
    if mud.numel() != x.shape[1]:
        raise StudyError(f"spatter: needs 1 or 3 channels, got {x.shape[1]}")
    return x * (1.0 - stain) + mud.view(1, -1, 1, 1) * stain
