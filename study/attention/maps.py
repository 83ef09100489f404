"""What ViT attention looks at: attention rollout and mean attention distance.

* Attention rollout (Abnar & Zuidema, 2020, "Quantifying Attention Flow in Transformers", §3): per layer
  fuse the heads, add the residual connection as ``Â = 0.5·A + 0.5·I``, renormalise each row to sum to
  1, and multiply up the layers, input layer first: ``R = Â_L ⋯ Â_2 Â_1``. Row i of R says how much the
  output token i draws on each input token.
* Mean attention distance (Dosovitskiy et al., 2021, "An Image is Worth 16x16 Words", Fig. 7 and
  App. D.7; Raghu et al., 2021, Fig. 3): per head, the attention-weighted pixel distance between a
  query patch and the key patches, averaged over query patches and images. Uniform attention gives the
  grid's mean pairwise distance (:func:`uniform_attention_distance`), the reference line for plots.

Token layout throughout: ``[prefix tokens (class, and distillation for DeiT), patch_1 … patch_N]`` with
patches in row-major order over a (gh, gw) grid, as in timm.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

import torch
from torch import Tensor

from study.core.errors import StudyError

HeadFusion = Literal["mean", "max", "min"]


# --------------------------------------------------------------------------------------------------
# Attention rollout
# --------------------------------------------------------------------------------------------------


def attention_rollout(
    attentions: Sequence[Tensor], head_fusion: HeadFusion = "mean", discard_ratio: float = 0.0
) -> Tensor:
    """Rollout (B, T, T) from per-layer attention probabilities, each (B, heads, T, T), input layer first.

    ``head_fusion`` reduces the heads by their mean (the paper's choice), max or min.

    ``discard_ratio`` (default 0, off) is NOT part of the paper: it is a heuristic popularised by a
    public rollout implementation (jacobgil/vit-explain) to sharpen the maps. Here it means: in every
    layer's fused matrix and every row, among the T−1 columns other than column 0 (the class token,
    which is never discarded), the ``floor(discard_ratio · (T−1))`` smallest weights are set to zero
    (ties broken by ``torch.topk``), before the identity is added and the rows renormalised. That public
    implementation instead zeroes the smallest fraction of the whole flattened T × T matrix and protects
    only the class-to-class entry, so its results differ.

    Computed in float64; returned in the dtype of the input.
    """
    _check_rollout_inputs(attentions, head_fusion, discard_ratio)
    rollout: Tensor | None = None
    for attn in attentions:
        fused = _fuse_heads(attn.detach().to(torch.float64), head_fusion)  # (B, T, T)
        if discard_ratio > 0:
            fused = _discard_lowest(fused, discard_ratio)
        eye = torch.eye(fused.shape[-1], dtype=fused.dtype, device=fused.device)
        residual = 0.5 * fused + 0.5 * eye  # (B, T, T); the identity broadcasts over the batch
        # keepdim: divide row i by its own sum. Without it, (B, T) would broadcast along the last dim
        # and divide column j by row j's sum — the bug of a widely copied implementation.
        residual = residual / residual.sum(dim=-1, keepdim=True)  # (B, T, T)
        # Later layers multiply from the left: R_l = Â_l · R_{l−1}.
        rollout = residual if rollout is None else residual @ rollout
    assert rollout is not None  # guaranteed by _check_rollout_inputs
    return rollout.to(attentions[0].dtype)


def _check_rollout_inputs(
    attentions: Sequence[Tensor], head_fusion: str, discard_ratio: float
) -> None:
    if len(attentions) == 0:
        raise StudyError("attention_rollout needs at least one layer's attention")
    if head_fusion not in ("mean", "max", "min"):
        raise StudyError(f"unknown head_fusion {head_fusion!r}; use 'mean', 'max' or 'min'")
    if not 0.0 <= discard_ratio < 1.0:
        raise StudyError(f"discard_ratio must be in [0, 1), got {discard_ratio}")
    shape = tuple(attentions[0].shape)
    if len(shape) != 4 or shape[-1] != shape[-2]:
        raise StudyError(f"attention has shape {shape}; expected (batch, heads, tokens, tokens)")
    for layer, attn in enumerate(attentions):
        if tuple(attn.shape) != shape:
            raise StudyError(
                f"layer {layer} attention has shape {tuple(attn.shape)}, layer 0 has {shape}; "
                "pass all layers of one model for the same images"
            )


def _fuse_heads(attn: Tensor, head_fusion: HeadFusion) -> Tensor:
    """(B, heads, T, T) -> (B, T, T)."""
    if head_fusion == "mean":
        return attn.mean(dim=1)
    if head_fusion == "max":
        return attn.amax(dim=1)
    return attn.amin(dim=1)


def _discard_lowest(fused: Tensor, ratio: float) -> Tensor:
    """Zero the lowest ``ratio`` of each row's weights outside column 0 (see attention_rollout)."""
    tokens = fused.shape[-1]
    count = math.floor(ratio * (tokens - 1))
    if count == 0:
        return fused
    others = fused[..., 1:]  # (B, T, T−1): every column except the class token's
    lowest = others.topk(count, dim=-1, largest=False).indices  # (B, T, count)
    kept = others.scatter(-1, lowest, 0.0)  # (B, T, T−1)
    return torch.cat([fused[..., :1], kept], dim=-1)  # (B, T, 1) + (B, T, T−1) -> (B, T, T)


def cls_rollout_map(
    rollout: Tensor, num_prefix_tokens: int, grid_size: tuple[int, int], token_index: int = 0
) -> Tensor:
    """(B, gh, gw) map of a prefix token's rollout row over the patches (prefix columns dropped).

    ``token_index`` 0 is the class token; 1 is DeiT's distillation token. Values are not renormalised:
    they are the share of the token's rollout that lands on each patch.
    """
    _check_tokens(rollout.shape[-1], num_prefix_tokens, grid_size)
    if not 0 <= token_index < num_prefix_tokens:
        raise StudyError(
            f"token_index {token_index} is not a prefix token (there are {num_prefix_tokens})"
        )
    row = rollout[:, token_index, num_prefix_tokens:]  # (B, N): the token's row, patch columns only
    return row.reshape(row.shape[0], *grid_size)  # (B, N) -> (B, gh, gw), patches row-major


def cls_attention_maps(
    attn: Tensor, num_prefix_tokens: int, grid_size: tuple[int, int], token_index: int = 0
) -> Tensor:
    """(B, heads, gh, gw) maps of one layer's per-head attention from a prefix token to the patches."""
    _check_tokens(attn.shape[-1], num_prefix_tokens, grid_size)
    rows = attn[:, :, token_index, num_prefix_tokens:]  # (B, heads, N)
    return rows.reshape(*rows.shape[:2], *grid_size)  # (B, heads, N) -> (B, heads, gh, gw)


def _check_tokens(tokens: int, num_prefix_tokens: int, grid_size: tuple[int, int]) -> None:
    gh, gw = grid_size
    if tokens != num_prefix_tokens + gh * gw:
        raise StudyError(
            f"{tokens} tokens do not match {num_prefix_tokens} prefix tokens + a {gh}×{gw} patch grid; "
            "check num_prefix_tokens (1 for ViT, 2 for distilled DeiT) and the grid size"
        )


# --------------------------------------------------------------------------------------------------
# Mean attention distance
# --------------------------------------------------------------------------------------------------


def patch_distances(grid_size: tuple[int, int], patch_size: int) -> Tensor:
    """(N, N) float64 pixel distances between patch centres, patches row-major over the grid."""
    gh, gw = grid_size
    rows = torch.arange(gh, dtype=torch.float64).repeat_interleave(gw)  # (N,) grid row of patch k
    cols = torch.arange(gw, dtype=torch.float64).repeat(gh)  # (N,) grid column of patch k
    centres = torch.stack([rows, cols], dim=1) * patch_size  # (N, 2); the half-patch offset cancels
    return torch.cdist(centres, centres)


def mean_attention_distance(
    attn: Tensor,
    grid_size: tuple[int, int],
    patch_size: int,
    num_prefix_tokens: int,
    per_image: bool = False,
) -> Tensor:
    """Mean attention distance in pixels per head, (heads,), from one layer's (B, heads, T, T) attention.

    Prefix tokens are dropped as queries and as keys, and each query's weights are renormalised over
    the patch keys, so attention parked on the class token does not shrink the distance. A query with
    no weight on any patch contributes 0. ``per_image=True`` returns (B, heads) instead, so callers
    can average exactly over many batches.
    """
    _check_tokens(attn.shape[-1], num_prefix_tokens, grid_size)
    patches = attn.detach().to(torch.float64)[:, :, num_prefix_tokens:, num_prefix_tokens:]  # (B, H, N, N)
    mass = patches.sum(dim=-1, keepdim=True)  # (B, H, N, 1)
    weights = patches / mass.clamp_min(torch.finfo(torch.float64).tiny)  # rows sum to 1 (or 0)
    distances = patch_distances(grid_size, patch_size).to(weights.device)  # (N, N)
    per_query = (weights * distances).sum(dim=-1)  # (B, H, N): Σ_j a_ij d(i, j)
    per_head_image = per_query.mean(dim=-1)  # (B, H)
    return per_head_image if per_image else per_head_image.mean(dim=0)


def uniform_attention_distance(grid_size: tuple[int, int], patch_size: int) -> float:
    """Mean attention distance of uniform attention: the mean pixel distance over all ordered patch
    pairs (i, j) of the grid, i = j included.

    Closed form by grid offsets: (Δr, Δc) occurs (gh − |Δr|)(gw − |Δc|) times among the N² pairs, so
    the mean is Σ (gh − |Δr|)(gw − |Δc|)·p·sqrt(Δr² + Δc²) / N², a sum over (2gh−1)(2gw−1) offsets.
    """
    gh, gw = grid_size
    total = 0.0
    for dr in range(-(gh - 1), gh):
        for dc in range(-(gw - 1), gw):
            total += (gh - abs(dr)) * (gw - abs(dc)) * math.hypot(dr, dc)
    return patch_size * total / (gh * gw) ** 2


# --------------------------------------------------------------------------------------------------
# Attention entropy
# --------------------------------------------------------------------------------------------------


def mean_attention_entropy(
    attn: Tensor, grid_size: tuple[int, int], num_prefix_tokens: int, per_image: bool = False
) -> Tensor:
    """Mean attention entropy in nats per head, (heads,), from one layer's (B, heads, T, T) attention.

    The weights are those of :func:`mean_attention_distance`: prefix tokens dropped as queries and as
    keys, each query's weights renormalised over the patch keys. Per query patch i the entropy is
    ``−Σ_j p_ij log p_ij`` (with 0·log 0 = 0), then averaged over query patches (and images). Uniform
    attention over the N patches gives log N (:func:`uniform_attention_entropy`), attention to one
    patch 0: entropy says how spread a head is, distance how far it looks. ``per_image=True`` returns
    (B, heads).
    """
    _check_tokens(attn.shape[-1], num_prefix_tokens, grid_size)
    patches = attn.detach().to(torch.float64)[:, :, num_prefix_tokens:, num_prefix_tokens:]  # (B, H, N, N)
    mass = patches.sum(dim=-1, keepdim=True)  # (B, H, N, 1)
    weights = patches / mass.clamp_min(torch.finfo(torch.float64).tiny)  # rows sum to 1 (or 0)
    per_query = -torch.special.xlogy(weights, weights).sum(dim=-1)  # (B, H, N); xlogy(0, 0) = 0
    per_head_image = per_query.mean(dim=-1)  # (B, H)
    return per_head_image if per_image else per_head_image.mean(dim=0)


def uniform_attention_entropy(grid_size: tuple[int, int]) -> float:
    """Entropy (nats) of uniform attention over the grid's N = gh·gw patches: log N."""
    gh, gw = grid_size
    return math.log(gh * gw)
