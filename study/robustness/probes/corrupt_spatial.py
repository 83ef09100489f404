"""Corruptions that move or spread pixels: blurs, affine warps, shifts, drawn lines, edge maps.

Same contract as :mod:`study.robustness.probes.corrupt_pixels`: float32 ``(N, C, H, W)`` in [0, 1] in,
severity 1–5, randomness from ``rng`` with the same draws at every severity. "MNIST-C: severity k" marks the
default severity in Mu & Gilmer's code. Warps resample bilinearly about the image centre with zero (black)
fill, as MNIST-C's ``skimage.transform.warp`` does; shifts are whole pixels and exact.
"""

from __future__ import annotations

import math

import kornia
import torch
import torch.nn.functional as F
from torch import Tensor

from study.robustness.probes.corrupt_pixels import gaussian_filter
from study.robustness.probes.shift import translation
from study.robustness.probes.streams import ImageStreams

# Gaussian blur sigma in px. Not in MNIST-C's final 15; H&D's table in its code (5 leaves a blob on 28 px).
GAUSSIAN_BLUR = (1.0, 2.0, 3.0, 4.0, 6.0)
# (blur sigma, largest displacement in px, scrambling passes). Severities 3-5 are MNIST-C's 1-3 (its
# default 1 already smears a 28-px item; its 4-5 leave a cloud); 1-2 are CIFAR-10-C's 3 and 5, the same
# construction tuned by Hendrycks & Dietterich for 32-px images.
GLASS_BLUR = ((0.4, 1, 1), (0.4, 1, 2), (0.7, 1, 2), (0.9, 2, 1), (1.0, 2, 3))
GLASS_PASSES = max(passes for _, _, passes in GLASS_BLUR)  # drawn at every severity
GLASS_MOVE = 0.5  # chance that a pixel takes a neighbour's value in a pass (MNIST-C's coin flip per swap)
# Length in px of the line kernel, at a random angle in [−45°, 45°] per image (MNIST-C's range).
MOTION_BLUR = (3, 5, 7, 9, 11)
MOTION_ANGLE = 45.0
# Weight of the Canny edge map blended over the image; 1 is MNIST-C's pure edge map (severity 5).
CANNY_EDGES = (0.2, 0.4, 0.6, 0.8, 1.0)
# Shear angle in radians, random sign per image. MNIST-C: severity 2.
SHEAR = (0.2, 0.4, 0.6, 0.8, 1.0)
# Zoom factor: the content shrinks about the centre to this size. MNIST-C: severity 3.
SCALE = (0.9, 0.8, 0.7, 0.6, 0.5)
# Rotation in radians (11°–57°), random sign per image. MNIST-C: severity 2.
ROTATE = (0.2, 0.4, 0.6, 0.8, 1.0)
# Shift in px along x and along y, each with a random sign per image. MNIST-C: severity 3.
TRANSLATE = (1, 2, 3, 4, 5)
# Dotted lines / zigzags drawn per image. MNIST-C draws one of either: severity 1.
DOTTED_LINE = (1, 2, 3, 4, 5)
ZIGZAG = (1, 2, 3, 4, 5)
LINES_DRAWN = 5  # drawn at every severity; severity s keeps the first s
# A stroke's intensity falls linearly from 1 on its centre line to 0 at this distance (px): about 3 px
# wide, like MNIST-C's profile (log(1 − d/2.3) + 1, which reaches 0 at d ≈ 1.45 px).
STROKE_REACH = 1.5
DASH = 2  # px: dotted lines are drawn in 2-px column bands, off, on, off, ... (MNIST-C)
ZIGZAG_STEP = 2.0  # px along the axis to the first corner, then 2x this between corners (MNIST-C's a)
ZIGZAG_AMPLITUDE = 2.0  # px from the axis to each corner (MNIST-C's b)
ZIGZAG_MARGIN = 2  # the zigzag's axis runs from column 2 to column W − 3 (MNIST-C: 2 to 25 of 28)
ZIGZAG_DROP = 5  # the axis's right end lies up to 5 px above or 4 px below its left end (MNIST-C)


# --------------------------------------------------------------------------------------------------
# Blurs and edges
# --------------------------------------------------------------------------------------------------


def gaussian_blur(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Gaussian blur of standard deviation σ px (H&D)."""
    return gaussian_filter(x, GAUSSIAN_BLUR[severity - 1])


def glass_blur(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Frosted glass (H&D; MNIST-C): blur, scramble pixels locally, blur again.

    H&D swap pixels with random neighbours in a sequential loop (MNIST-C: each pixel with probability
    ½), which no batched operation reproduces; here, in each pass, each pixel with probability
    ``GLASS_MOVE`` takes the value found at a random offset of at most ``delta`` px per axis (a gather:
    a local scramble that may repeat or drop a value, where a swap would not).
    """
    sigma, delta, passes = GLASS_BLUR[severity - 1]
    count, channels, height, width = x.shape
    uniforms = rng.rand(GLASS_PASSES, 3, height, width)  # (N, P, 3, H, W): row and column offset, move
    rows = torch.arange(height, device=x.device).view(1, height, 1)
    cols = torch.arange(width, device=x.device).view(1, 1, width)
    x = gaussian_filter(x, sigma)
    for index in range(passes):
        # uniforms in [0, 1) -> integer offsets in [−delta, delta], the same draws at every severity
        offset = (uniforms[:, index, :2] * (2 * delta + 1)).floor().long() - delta  # (N, 2, H, W)
        offset = offset * (uniforms[:, index, 2:] < GLASS_MOVE)  # pixels that stay get offset 0
        source_rows = (rows + offset[:, 0]).clamp(0, height - 1)  # (N, H, W)
        source_cols = (cols + offset[:, 1]).clamp(0, width - 1)  # (N, H, W)
        source = (source_rows * width + source_cols).view(count, 1, height * width)  # (N, 1, H·W)
        # (N, C, H, W) -> (N, C, H·W), gathered at each pixel's source, -> (N, C, H, W)
        x = x.flatten(2).gather(2, source.expand(count, channels, -1)).view(count, channels, height, width)
    return gaussian_filter(x, sigma)


def motion_blur(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Camera shake: a straight line kernel of ``k`` px at a random angle per image (Kornia's
    ``motion_blur``, bilinear kernel, black border). H&D use ImageMagick's one-sided Gaussian kernel,
    which Kornia does not have; the line kernel is the usual tensor equivalent."""
    angle = (rng.rand() * 2.0 - 1.0) * MOTION_ANGLE  # (N,) degrees in [−45, 45)
    centred = torch.zeros_like(angle)  # direction 0: uniform weights along the line, centred on the pixel
    return kornia.filters.motion_blur(x, MOTION_BLUR[severity - 1], angle, centred, border_type="constant",
                                      mode="bilinear")


def canny_edges(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """The Canny edge map (MNIST-C: the image replaced by it), blended in with weight ``a``.

    ``kornia.filters.canny`` with its defaults (σ = 1, thresholds 0.1 / 0.2 of a [0, 1] image, as
    scikit-image's ``canny`` used by MNIST-C); colour images are converted to grey first. MNIST-C has one
    level; the blend weight gives five, with severity 5 MNIST-C's.
    """
    _, edges = kornia.filters.canny(x)  # (N, 1, H, W) in {0, 1}
    weight = CANNY_EDGES[severity - 1]
    return (1.0 - weight) * x + weight * edges


# --------------------------------------------------------------------------------------------------
# Affine warps and shifts
# --------------------------------------------------------------------------------------------------


def warp(x: Tensor, inverse: Tensor) -> Tensor:
    """Resample ``x`` so that output pixel ``p`` takes the input at ``inverse @ (p − c) + c``.

    ``inverse`` ``(N, 2, 2)`` acts on ``(column, row)`` offsets from the centre ``c = ((W−1)/2, (H−1)/2)``
    (13.5 px on 28 px, as MNIST-C), the inverse map ``skimage.transform.warp`` takes. Bilinear, zero fill.
    """
    count, _, height, width = x.shape
    rows, cols = torch.meshgrid(torch.arange(height, dtype=x.dtype, device=x.device),
                                torch.arange(width, dtype=x.dtype, device=x.device), indexing="ij")
    centre = torch.tensor([(width - 1) / 2, (height - 1) / 2], dtype=x.dtype, device=x.device)
    offsets = torch.stack([cols, rows], dim=-1) - centre  # (H, W, 2): (column, row) from the centre
    source = torch.einsum("nij,hwj->nhwi", inverse.to(x), offsets) + centre  # (N, H, W, 2)
    # pixel coordinates -> grid_sample's [−1, 1], with −1 and 1 the centres of the corner pixels
    size = torch.tensor([width - 1, height - 1], dtype=x.dtype, device=x.device)
    grid = source / size * 2.0 - 1.0
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True)


def shear(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Shear by an angle ``θ`` of random sign: the inverse map ``[[1, −sin θ], [0, cos θ]]`` of MNIST-C
    (``skimage.transform.AffineTransform(shear=θ)``), rows slanted and slightly compressed."""
    theta = SHEAR[severity - 1] * rng.signs()  # (N,)
    zeros = torch.zeros_like(theta)
    inverse = torch.stack([torch.stack([torch.ones_like(theta), -theta.sin()], -1),
                           torch.stack([zeros, theta.cos()], -1)], -2)  # (N, 2, 2)
    return warp(x, inverse)


def scale(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Shrink the content about the centre to ``z`` of its size (MNIST-C's inverse map ``I / z``)."""
    inverse = torch.eye(2).expand(x.shape[0], 2, 2) / SCALE[severity - 1]  # (N, 2, 2)
    return warp(x, inverse)


def rotate(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Rotate about the centre by ``θ`` radians of random sign (MNIST-C)."""
    theta = ROTATE[severity - 1] * rng.signs()  # (N,)
    cos, sin = theta.cos(), theta.sin()
    inverse = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)  # (N, 2, 2)
    return warp(x, inverse)


def translate(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """Shift ``s`` px along x and ``s`` px along y, each direction's sign random per image (MNIST-C),
    with zero fill: the images are grouped by their four sign pairs and shifted exactly."""
    step = TRANSLATE[severity - 1]
    signs = rng.signs(2).long()  # (N, 2): x sign, y sign
    out = torch.empty_like(x)
    layout = x.permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C), translation's layout
    for sign_x in (-1, 1):
        for sign_y in (-1, 1):
            chosen = (signs[:, 0] == sign_x) & (signs[:, 1] == sign_y)  # (N,)
            if chosen.any():
                moved = translation(layout[chosen], sign_x * step, sign_y * step)  # (n, H, W, C)
                out[chosen] = moved.permute(0, 3, 1, 2)  # -> (n, C, H, W)
    return out


# --------------------------------------------------------------------------------------------------
# Drawn lines
# --------------------------------------------------------------------------------------------------


def strokes(starts: Tensor, ends: Tensor, height: int, width: int) -> Tensor:
    """Ink of straight segments ``starts[:, s] -> ends[:, s]`` (``(N, S, 2)``, (column, row) px): at each
    pixel, the largest ``1 − d / STROKE_REACH`` over segments, with ``d`` its distance to the segment."""
    device = starts.device
    rows, cols = torch.meshgrid(torch.arange(height, dtype=torch.float32, device=device),
                                torch.arange(width, dtype=torch.float32, device=device), indexing="ij")
    pixels = torch.stack([cols, rows], dim=-1)  # (H, W, 2)
    ink = torch.zeros(starts.shape[0], height, width, device=device)  # (N, H, W)
    for index in range(starts.shape[1]):  # a loop over segments keeps memory at one (N, H, W) map
        start, end = starts[:, index, None, None], ends[:, index, None, None]  # (N, 1, 1, 2)
        along = end - start  # (N, 1, 1, 2)
        relative = pixels - start  # (N, H, W, 2)
        # the closest point of the segment: projection clamped to the segment (zero length: its start)
        t = ((relative * along).sum(-1) / (along * along).sum(-1).clamp_min(1e-12)).clamp(0.0, 1.0)  # (N, H, W)
        distance = (relative - t[..., None] * along).norm(dim=-1)  # (N, H, W)
        ink = torch.maximum(ink, (1.0 - distance / STROKE_REACH).clamp_min(0.0))
    return ink


def dotted_line(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """``s`` dotted lines added (white, then clamped): each crosses the image from the left edge at a
    random row to the right edge at another, drawn only in every other 2-px band of columns (MNIST-C)."""
    count, _, height, width = x.shape
    ends_rows = rng.integers(0, height - 1, LINES_DRAWN, 2).float()  # (N, L, 2): rows at the left, right
    lines = DOTTED_LINE[severity - 1]
    left = torch.stack([torch.zeros_like(ends_rows[..., 0]), ends_rows[..., 0]], -1)[:, :lines]  # (N, s, 2)
    right = torch.stack([torch.full_like(ends_rows[..., 1], width - 1.0), ends_rows[..., 1]], -1)[:, :lines]
    ink = strokes(left, right, height, width)  # (N, H, W)
    dashes = (torch.arange(width, device=x.device) // DASH) % 2 == 1  # (W,): off, on, off, ... bands
    return x + (ink * dashes)[:, None]  # (N, 1, H, W) over every channel


def zigzag_corners(rows: Tensor, drops: Tensor, width: int) -> Tensor:
    """Corners ``(N, K, 2)`` of zigzags whose axis runs from ``(ZIGZAG_MARGIN, row)`` to
    ``(width − 1 − ZIGZAG_MARGIN, row + drop)``: the first corner ``a = ZIGZAG_STEP`` px along the axis,
    then one every ``2a``, at ``±ZIGZAG_AMPLITUDE`` px across it, alternating; the last corner is the
    axis's end. Every zigzag gets the same K corners; those past the end collapse onto it (segments of
    zero length)."""
    first, last = float(ZIGZAG_MARGIN), float(width - 1 - ZIGZAG_MARGIN)
    along = torch.stack([torch.full_like(rows, last - first), drops], -1)  # (N, 2): axis vector
    length = along.norm(dim=-1, keepdim=True)  # (N, 1)
    longest = math.hypot(last - first, ZIGZAG_DROP)
    corners = int(longest // (2 * ZIGZAG_STEP)) + 2  # enough for the longest axis
    # distance along the axis of corner j: 0, a, 3a, 5a, ..., clamped to the axis's end
    steps = torch.tensor([0.0] + [(2 * j - 1) * ZIGZAG_STEP for j in range(1, corners)] + [longest])
    distance = torch.minimum(steps.to(rows.device), length)  # (N, K)
    sign = torch.tensor([0.0] + [(-1.0) ** (j + 1) for j in range(1, corners)] + [0.0], device=rows.device)
    across = torch.where(distance < length, sign * ZIGZAG_AMPLITUDE, torch.zeros_like(distance))  # (N, K)
    unit = along / length  # (N, 2)
    normal = torch.stack([-unit[:, 1], unit[:, 0]], -1)  # (N, 2): the axis turned by 90°
    origin = torch.stack([torch.full_like(rows, first), rows], -1)  # (N, 2)
    # (N, 1, 2) + (N, K, 1)·(N, 1, 2) + (N, K, 1)·(N, 1, 2) -> (N, K, 2)
    return origin[:, None] + distance[..., None] * unit[:, None] + across[..., None] * normal[:, None]


def zigzag(x: Tensor, severity: int, rng: ImageStreams) -> Tensor:
    """``s`` zigzag lines added (white, then clamped), each about the width of the image at a random
    row and slope (MNIST-C's zigzag: corners at 2, 6, 10, … px along the axis, 2 px across it; drop of
    −5 to +4 px)."""
    count, _, height, width = x.shape
    rows = rng.integers(0, height - 1, LINES_DRAWN).float()  # (N, L)
    drops = rng.integers(-ZIGZAG_DROP, ZIGZAG_DROP, LINES_DRAWN).float()  # (N, L)
    lines = ZIGZAG[severity - 1]
    # (N, L) -> (N·s,) zigzags, each with K corners -> (N, s·(K − 1)) segments
    corners = zigzag_corners(rows[:, :lines].reshape(-1), drops[:, :lines].reshape(-1), width)  # (N·s, K, 2)
    corners = corners.view(count, lines, -1, 2)  # (N, s, K, 2)
    starts = corners[:, :, :-1].reshape(count, -1, 2)  # (N, s·(K−1), 2)
    ends = corners[:, :, 1:].reshape(count, -1, 2)
    return x + strokes(starts, ends, height, width)[:, None]  # (N, 1, H, W) over every channel
