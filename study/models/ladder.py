"""The ladder's rungs: the study's ViT, changed one ingredient at a time towards a CNN.

Why: the controls compare whole models (a ConvMixer differs from the ViT in its mixing, position, norm and pooling at
once). ConvNeXt (Liu et al., 2022) turned a ResNet into a transformer-like network one change at a time and measured
each step; the ladder runs that design backwards, from the ViT to the ResNet, so that each step's effect is one
change's. PoolFormer (Yu et al., 2022) supplies the frame: a block is a token mixer and a channel MLP, each after a
norm and inside a residual, and the mixer can be attention, pooling or a convolution.

:class:`MetaViT` is the study's :class:`~study.models.vit.VisionTransformer` with four more keywords; with their
defaults it *is* that ViT (same modules, parameter names, initial draws, outputs):

* ``class_token`` (timm's keyword): ``False`` drops the class token. The head then reads the mean of the patch tokens
  (``global_pool='avg'``, required), and the position embedding covers the patch tokens only.
* ``token_mixer``: ``'attention'`` (the ViT's multi-head self-attention); ``'local_attention'``, the same attention
  (same modules and parameters) with each token attending only to the tokens of its ``attn_window`` × ``attn_window``
  neighbourhood on the grid (:class:`LocalAttention`): *local* mixing that is not a convolution, the weights still
  chosen per image by the query-key match; ``'mean'``, every token's mixer output
  is the mean of all tokens minus the token itself: fixed *global* mixing, nothing to learn, a bag of patches;
  ``'pool'``, PoolFormer's 3×3 average pooling of the token grid minus the token (timm's ``Pooling``): fixed *local*
  mixing; ``'dwconv'``, a depthwise 3×3 convolution of the grid and then ``mixer_act`` (``'gelu'``, ConvMixer's
  mixer, whose BatchNorm is the block's norm here; ``'none'``, the convolution alone): learned local mixing. The two fixed mixers subtract the token as PoolFormer's does, so
  that the residual adds it back once: the step from ``mean`` to ``pool`` changes only global to local.
* ``norm``: ``'layernorm'`` (the ViT's, over each token's channels) or ``'batchnorm'`` (a CNN's, over each channel
  across the batch and the tokens: :class:`TokenBatchNorm`), in every block and before the head.
* ``stem``: ``'patch'`` (the ViT's p×p stride-p patchify) or ``'conv'`` (Xiao et al.'s overlapping stride-2 3×3
  convolutions, :class:`study.models.convstem.ConvStem`), both giving the same token grid.

The grid mixers (``local_attention``, ``pool``, ``dwconv``) need every token on the grid: no class token. A mixer without attention has
no attention maps (:meth:`MetaViT.attention_probs` refuses), but its tokens still go to the CKA analysis.
Blocks that are not the ViT's (another mixer or norm) are :class:`MixerBlock`, whose mixer is ``token_mixer`` as in
timm's MetaFormer; blocks with the ViT's norm and an attention mixer keep timm's ViT names (``attn``), so the
attention rungs' state dicts, the local one's too (its mask is not in them), load into timm's ViT.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.init import trunc_normal_  # the truncated normal timm and the study's ViT draw with

from study.core.errors import StudyError
from study.models.convstem import ConvStem
from study.models.vit import Attention, DropPath, Mlp, VisionTransformer, _layer_norm, init_linear_timm

TOKEN_MIXERS = ("attention", "local_attention", "mean", "pool", "dwconv")
ATTENTION_MIXERS = ("attention", "local_attention")  # the mixers with attention maps
GRID_MIXERS = ("local_attention", "pool", "dwconv")  # mixers that read the tokens as an image: no prefix token
MIXER_ACTS = ("gelu", "none")  # after the depthwise convolution
NORMS = ("layernorm", "batchnorm")
STEMS = ("patch", "conv")


class TokenBatchNorm(nn.BatchNorm1d):
    """BatchNorm of tokens ``(B, T, D)``: each of the D channels normalised over the batch and the tokens, as a
    CNN's BatchNorm2d normalises a channel over the batch and the pixels."""

    def forward(self, x: Tensor) -> Tensor:
        # (B, T, D) -> (B, D, T): BatchNorm1d's channels are dim 1 -> back to (B, T, D)
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


def _norm(kind: str, dim: int) -> nn.Module:
    return _layer_norm(dim) if kind == "layernorm" else TokenBatchNorm(dim)


class _OnGrid(nn.Module):
    """Run a module that takes images ``(B, D, h, w)`` on tokens ``(B, h·w, D)`` in raster order."""

    def __init__(self, module: nn.Module, grid: tuple[int, int]) -> None:
        super().__init__()
        self.module = module
        self.grid = grid

    def forward(self, x: Tensor) -> Tensor:
        batch, tokens, dim = x.shape
        # (B, N, D) -> (B, D, N) -> (B, D, h, w): the patch grid, rows first as PatchEmbed flattened it
        image = x.transpose(1, 2).reshape(batch, dim, *self.grid)
        # (B, D, h, w) -> (B, D, N) -> (B, N, D)
        return self.module(image).flatten(2).transpose(1, 2)


class GlobalMean(nn.Module):
    """Fixed global mixing: each token's output is the mean of all tokens minus the token (PoolFormer's form with
    the whole grid as the pool)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.mean(dim=1, keepdim=True) - x  # (B, 1, D) broadcast over the T tokens -> (B, T, D)


class DepthwiseMixer(nn.Module):
    """Learned local mixing: a depthwise 3×3 convolution of the grid (one filter per channel), then GELU (``act``
    ``'gelu'``) or nothing (``'none'``)."""

    def __init__(self, dim: int, kernel_size: int = 3, act: str = "gelu") -> None:
        super().__init__()
        self.conv = nn.Conv2d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim)
        self.act = nn.GELU() if act == "gelu" else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.conv(x))  # (B, D, h, w) -> (B, D, h, w)


def window_mask(grid: tuple[int, int], window: int) -> Tensor:
    """``(T, T)`` bool, T = h·w tokens in raster order: True where the key lies in the query's ``window`` × ``window``
    neighbourhood (Chebyshev distance on the grid at most ``window // 2``; cut at the grid's edges)."""
    rows, cols = torch.meshgrid(torch.arange(grid[0]), torch.arange(grid[1]), indexing="ij")
    rows, cols = rows.flatten(), cols.flatten()  # (T,) each token's grid row and column, raster order
    # (T, 1) - (1, T) -> (T, T): query-key offsets along each axis
    apart = torch.maximum((rows[:, None] - rows[None, :]).abs(), (cols[:, None] - cols[None, :]).abs())
    return apart <= window // 2


class LocalAttention(Attention):
    """The ViT's attention with each query's keys cut to its grid neighbourhood (:func:`window_mask`): the logits of
    the other keys are -inf before the softmax, so each row of probabilities sums to 1 over the neighbourhood. The
    mask is a non-persistent buffer: the state dict is :class:`~study.models.vit.Attention`'s, and with a window
    that covers the grid this is that attention exactly (tests/models/test_ladder.py)."""

    def __init__(self, dim: int, num_heads: int, grid: tuple[int, int], window: int, qkv_bias: bool = True,
                 attn_drop: float = 0.0, proj_drop: float = 0.0) -> None:
        super().__init__(dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=proj_drop)
        self.window = window
        self.register_buffer("mask", window_mask(grid, window), persistent=False)  # (T, T)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if self.uniform:  # the ablation, kept local: each query's neighbourhood weighted evenly
            batch, heads, _, _ = q.shape
            even = self.mask.to(q.dtype) / self.mask.sum(dim=-1, keepdim=True)  # (T, T): each row 1/|window|
            probs = even.expand(batch, heads, -1, -1)  # (B, H, T, T)
        else:
            logits = (q * self.scale) @ k.transpose(-2, -1)  # (B, H, T, D/H) @ (B, H, D/H, T) -> (B, H, T, T)
            probs = logits.masked_fill(~self.mask, float("-inf")).softmax(dim=-1)  # (T, T) mask over every (B, H)
        return self.attn_drop(probs) @ v, probs

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self._split_heads(x)
        if (self.fused_attn if self.fused_attn is not None else not x.is_cpu) and not self.uniform:
            dropout_p = self.attn_drop.p if self.training else 0.0
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, dropout_p=dropout_p)  # (B, H, T, D/H)
        else:
            out, _ = self._attend(q, k, v)
        return self._merge_heads(out)


def token_mixer(kind: str, dim: int, num_heads: int, grid: tuple[int, int], qkv_bias: bool = True,
                attn_drop: float = 0.0, proj_drop: float = 0.0, window: int = 3, act: str = "gelu") -> nn.Module:
    """The mixer a block applies across tokens ``(B, T, D) -> (B, T, D)``."""
    if kind == "attention":
        return Attention(dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=proj_drop)
    if kind == "local_attention":
        return LocalAttention(dim, num_heads, grid, window, qkv_bias=qkv_bias, attn_drop=attn_drop,
                              proj_drop=proj_drop)
    if kind == "mean":
        return GlobalMean()
    if kind == "pool":
        from timm.models.metaformer import Pooling  # PoolFormer's pool(x) - x, count_include_pad=False

        return _OnGrid(Pooling(pool_size=3), grid)
    return _OnGrid(DepthwiseMixer(dim, act=act), grid)


class MixerBlock(nn.Module):
    """Pre-norm block with any token mixer (PoolFormer's MetaFormer): ``x + Mixer(Norm(x))`` then
    ``x + Mlp(Norm(x))``; the ViT's :class:`~study.models.vit.Block` with ``attn`` generalised to ``token_mixer``."""

    def __init__(self, dim: int, num_heads: int, grid: tuple[int, int], mixer: str, norm: str,
                 mlp_ratio: float = 4.0, qkv_bias: bool = True, proj_drop: float = 0.0, attn_drop: float = 0.0,
                 drop_path: float = 0.0, window: int = 3, act: str = "gelu") -> None:
        super().__init__()
        self.norm1 = _norm(norm, dim)
        self.token_mixer = token_mixer(mixer, dim, num_heads, grid, qkv_bias, attn_drop, proj_drop, window, act)
        self.drop_path1 = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = _norm(norm, dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop=proj_drop)
        self.drop_path2 = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.drop_path1(self.token_mixer(self.norm1(x)))
        return x + self.drop_path2(self.mlp(self.norm2(x)))

    def forward_with_attention(self, x: Tensor) -> tuple[Tensor, Tensor | None]:
        """:meth:`forward`, and the attention probabilities ``(B, H, T, T)`` where the mixer is attention."""
        if not isinstance(self.token_mixer, Attention):
            return self.forward(x), None
        mixed, probs = self.token_mixer.forward_with_attention(self.norm1(x))
        x = x + self.drop_path1(mixed)
        return x + self.drop_path2(self.mlp(self.norm2(x))), probs


class MetaViT(VisionTransformer):
    """The study's ViT with ``class_token``, ``token_mixer``, ``norm``, ``stem``, ``attn_window`` and ``mixer_act``
    (module docstring); every other
    keyword is the ViT's. Defaults: the ViT itself. The registry states a rung's traits from the same keywords (no
    prefix token without ``class_token``, attention maps only with the attention mixer: ``study.archs``), and
    tests/models/test_registry.py holds the two to each other."""

    def __init__(self, class_token: bool = True, token_mixer: str = "attention", norm: str = "layernorm",
                 stem: str = "patch", attn_window: int = 3, mixer_act: str = "gelu", **kwargs) -> None:
        for label, value, allowed in (("token_mixer", token_mixer, TOKEN_MIXERS), ("norm", norm, NORMS),
                                      ("stem", stem, STEMS), ("mixer_act", mixer_act, MIXER_ACTS)):
            if value not in allowed:
                raise StudyError(f"{label} {value!r} is not supported; use one of {allowed}")
        if not isinstance(attn_window, int) or isinstance(attn_window, bool) or attn_window < 1 or attn_window % 2 == 0:
            raise StudyError(f"attn_window must be an odd whole number of tokens (3: each token's 3x3 neighbourhood), "
                             f"got {attn_window!r}")
        if attn_window != 3 and token_mixer != "local_attention":
            raise StudyError("attn_window sets local_attention's neighbourhood; set token_mixer: local_attention "
                             "or drop attn_window")
        if mixer_act != "gelu" and token_mixer != "dwconv":
            raise StudyError("mixer_act follows the depthwise convolution; set token_mixer: dwconv or drop mixer_act")
        if not isinstance(class_token, bool):
            raise StudyError(f"class_token must be true or false, got {class_token!r}")
        if not class_token and kwargs.get("global_pool", "token") != "avg":
            raise StudyError("class_token: false needs global_pool: avg (without a class token the head reads the "
                             "mean of the patch tokens)")
        if token_mixer in GRID_MIXERS and class_token:
            raise StudyError(f"token_mixer {token_mixer!r} mixes the token grid, which a class token is not on; "
                             "set class_token: false (and global_pool: avg)")
        super().__init__(**kwargs)
        self.class_token, self.token_mixer, self.norm_kind, self.stem = class_token, token_mixer, norm, stem
        if class_token and token_mixer == "attention" and norm == "layernorm" and stem == "patch":
            return  # the ViT, drawn exactly as VisionTransformer draws it
        dim, grid = self.embed_dim, self.patch_embed.grid_size
        if stem == "conv":
            patchify = self.patch_embed
            self.patch_embed = ConvStem(patchify.img_size, patchify.patch_size, patchify.proj.in_channels, dim)
        if not class_token:
            self.num_prefix_tokens = 0  # an instance attribute over the class's 1: pooling and analyses read it
            self.cls_token = None
            if self.pos_embed is not None:  # one position per patch token only, as timm without a class token
                self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches, dim))
        if token_mixer == "local_attention" and norm == "layernorm":
            # The ViT's blocks, each attention masked to its window: timm's names kept. Built aside from the global
            # generator, so that the draws below are the global-attention rung's (its twin, same parameters).
            with torch.random.fork_rng(devices=[]):
                for block in self.blocks:
                    attn = block.attn
                    block.attn = LocalAttention(dim, self.num_heads, grid, attn_window,
                                                qkv_bias=attn.qkv.bias is not None, attn_drop=attn.attn_drop.p,
                                                proj_drop=attn.proj_drop.p)
        elif token_mixer != "attention" or norm != "layernorm":
            first = self.blocks[0]
            drop_paths = [0.0 if isinstance(b.drop_path1, nn.Identity) else b.drop_path1.p for b in self.blocks]
            self.blocks = nn.Sequential(*[
                MixerBlock(dim, self.num_heads, grid, token_mixer, norm, mlp_ratio=self.mlp_ratio,
                           qkv_bias=first.attn.qkv.bias is not None, proj_drop=first.mlp.drop1.p,
                           attn_drop=first.attn.attn_drop.p, drop_path=rate, window=attn_window, act=mixer_act)
                for rate in drop_paths])
        if norm == "batchnorm":
            if isinstance(self.norm, nn.LayerNorm):
                self.norm = TokenBatchNorm(dim)
            if isinstance(self.fc_norm, nn.LayerNorm):
                self.fc_norm = nn.BatchNorm1d(dim)  # on the pooled (B, D) vector
        self._init_weights()  # every module drawn again, in the ViT's order

    def _init_weights(self) -> None:
        if self.pos_embed is not None:
            trunc_normal_(self.pos_embed, std=0.02)
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)
        self.apply(init_linear_timm)

    def _embed(self, x: Tensor) -> Tensor:
        if self.cls_token is not None:
            return super()._embed(x)
        tokens = self.patch_embed(x)  # (B, N, D): the patch tokens alone, no prefix token
        return tokens if self.pos_embed is None else self.pos_drop(tokens + self.pos_embed)  # + (1, N, D)

    def attention_probs(self, x: Tensor) -> list[Tensor]:
        if self.token_mixer not in ATTENTION_MIXERS:
            raise StudyError(f"this rung mixes tokens by {self.token_mixer!r}, not attention: it has no attention "
                             "maps")
        return super().attention_probs(x)


__all__ = ["ATTENTION_MIXERS", "GRID_MIXERS", "MIXER_ACTS", "LocalAttention", "MetaViT", "MixerBlock", "NORMS",
           "STEMS", "TOKEN_MIXERS", "TokenBatchNorm", "window_mask"]
