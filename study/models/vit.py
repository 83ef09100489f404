"""The Vision Transformer (Dosovitskiy et al., 2021), written to be read and to be looked inside.

Why our own copy instead of ``timm.create_model``: the analyses need each layer's tokens and explicit
softmax attention probabilities, and we want them from a named method rather than from forward hooks,
monkey-patching or a global "fused attention off" switch. Everything else is timm's design on purpose: the
module names, parameter shapes and initialisation follow ``timm.models.vision_transformer`` (checked
against timm 1.0.31), so ``state_dict`` keys match exactly, timm weights load with ``strict=True``, and
``tests/models/test_models.py`` checks the logits against timm to 1e-5.

Data flow for one image of ``C×H×W`` with patch size ``p`` (``N = HW/p²`` patches, width ``D``)::

    image -> PatchEmbed (p×p conv, stride p) -> N tokens of width D
          -> prepend the class token, add a learned position embedding (unless pos_embed='none') -> T = N + 1
             tokens
          -> depth × pre-norm Block: x + Attention(LN(x)), then x + Mlp(LN(x))
          -> final LayerNorm -> pool (class token, or mean of patch tokens) -> linear head

On GPU, training and inference use fused attention (``F.scaled_dot_product_attention``); on CPU, and
in ``forward_with_attention`` (the analyses' path, which returns the probabilities), ``softmax(q kᵀ/√d) v``
is computed explicitly (see ``Attention.fused_attn``), except where the robustness stage scores on the CPU with
the fused kernel switched on (:func:`study.models.ablations.fused_attention`: faster for inference there). The patch size must divide the image sides: timm
silently crops the remainder, which would hide a config mistake.

One module (about 320 lines) because its parts are timm's ``vision_transformer`` parts, kept side by side so a
reader can hold them against timm's file and the ``state_dict`` keys stay one namespace.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.init import trunc_normal_  # the same truncated normal as timm.layers.trunc_normal_
from torch import Tensor, nn

from study.core.errors import StudyError


class DropPath(nn.Module):
    """timm's ``DropPath``: drop a sample's whole residual branch, scale survivors by 1/(1−rate).

    The arithmetic of torchvision's ``StochasticDepth(rate, mode="row")`` (``torchvision/ops/stochastic_depth.py``),
    which this model used before, op for op: one Bernoulli draw per sample into an ``(N, 1, …)`` tensor of the
    input's dtype, divided in place by the survival rate, then one multiply, so a seed draws the same masks and
    gives the same bytes. Written out because importing torchvision for it imports ``torch._dynamo`` too (over a
    second of a process's start on a 2-core CPU), and timm's would cost as much. No parameters or buffers:
    ``state_dict`` keys are unchanged.
    """

    def __init__(self, rate: float) -> None:
        super().__init__()
        self.p = rate

    def forward(self, x: Tensor) -> Tensor:
        if not 0.0 <= self.p <= 1.0:  # where torchvision checked it, so a bad rate fails as it did
            raise ValueError(f"drop probability has to be between 0 and 1, but got {self.p}")
        if not self.training or self.p == 0.0:
            return x
        survival_rate = 1.0 - self.p
        noise = torch.empty([x.shape[0]] + [1] * (x.ndim - 1), dtype=x.dtype, device=x.device)
        noise = noise.bernoulli_(survival_rate)
        if survival_rate > 0.0:
            noise.div_(survival_rate)
        return x * noise

    def extra_repr(self) -> str:
        return f"p={self.p}"


def to_2tuple(value: int | tuple[int, int]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


# timm and the original JAX ViT use LayerNorm eps=1e-6 (PyTorch's default is 1e-5); matching it is part
# of the 1e-5 logit parity with timm.
LAYER_NORM_EPS = 1e-6
GLOBAL_POOLS = ("token", "avg")
# timm's ``pos_embed`` values: a learned absolute position embedding, or none at all (the ablation of Dosovitskiy et
# al., 2021, App. D.4: without one the model sees a bag of patches, and only the patch contents say where they were).
POS_EMBEDS = ("learn", "none")


def _layer_norm(dim: int) -> nn.LayerNorm:
    return nn.LayerNorm(dim, eps=LAYER_NORM_EPS)


def init_linear_timm(module: nn.Module) -> None:
    """timm's default ViT init for linear layers: weights ~ truncated N(0, 0.02²), biases zero."""
    if isinstance(module, nn.Linear):
        trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


class PatchEmbed(nn.Module):
    """Cut the image into non-overlapping ``p×p`` patches and project each linearly to ``embed_dim``.

    A ``p×p`` convolution with stride ``p`` is exactly "flatten each patch, multiply by one shared
    matrix" (ViT eq. 1), done in one kernel. Sizes are ``(height, width)`` tuples, as in timm.
    """

    def __init__(self, img_size: int | tuple[int, int], patch_size: int | tuple[int, int], in_chans: int,
                 embed_dim: int) -> None:
        super().__init__()
        self.img_size: tuple[int, int] = to_2tuple(img_size)
        self.patch_size: tuple[int, int] = to_2tuple(patch_size)
        for side, patch in zip(self.img_size, self.patch_size):
            if not isinstance(patch, int) or patch < 1 or side % patch != 0:
                raise StudyError(
                    f"patch size {self.patch_size} does not divide image size {self.img_size}; "
                    "choose a patch_size that divides the image side")
        self.grid_size: tuple[int, int] = (self.img_size[0] // self.patch_size[0],
                                           self.img_size[1] // self.patch_size[1])
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=self.patch_size, stride=self.patch_size)

    def forward(self, x: Tensor) -> Tensor:
        if tuple(x.shape[-2:]) != self.img_size:
            raise StudyError(f"input images are {tuple(x.shape[-2:])} but the model was built for "
                             f"{self.img_size}; rebuild the model with the data's image size")
        x = self.proj(x)  # (B, D, H/p, W/p)
        # (B, D, H/p, W/p) -> (B, D, N) -> (B, N, D); patches in row-major (raster) order
        return x.flatten(2).transpose(1, 2)


class Attention(nn.Module):
    """Multi-head self-attention: ``softmax(q kᵀ / √d_head) v`` per head, heads concatenated, projected.

    ``fused_attn`` (timm's attribute) picks PyTorch's fused kernel; ``None`` means "on GPU only". On CPU
    the explicit two-matmul form is faster for the short sequences of small images: with 17 tokens, the
    default ViT trained 1.22x more images per second than with the CPU flash-attention kernel (2-core CPU,
    batch 128, AdamW; median of 5 alternating runs, range 1.09-1.32x). Both compute the same function
    (``tests/models/test_models.py`` compares them).

    ``uniform`` (False by default) is a test-time ablation, switched by ``study.models.ablations``: every query
    attends with probability 1/T to each of the T tokens, prefix tokens included, so a head's output is the mean
    of its values at every position. :meth:`forward` computes just that mean, without the ``(B, H, T, T)``
    probabilities (unless attention dropout is active, which acts on them); :meth:`forward_with_attention`
    returns the 1/T probabilities. It adds no parameter or buffer, so ``state_dict`` is unchanged. Subclasses with
    their own attention rule (ConViT's GPSA overrides ``_attend`` and ``forward``) do not read it.
    """

    fused_attn: bool | None = None
    uniform: bool = False

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True, attn_drop: float = 0.0,
                 proj_drop: float = 0.0) -> None:
        super().__init__()
        if dim % num_heads != 0:
            raise StudyError(f"embed_dim {dim} is not divisible by num_heads {num_heads}; "
                             "pick num_heads that divides embed_dim")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5  # 1/√d_head keeps logits O(1) (Vaswani et al., 2017, §3.2.1)
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)  # one matmul for q, k and v
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def _split_heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        batch, tokens, _ = x.shape
        # (B, T, 3D) -> (B, T, 3, H, D/H) -> (3, B, H, T, D/H): q, k, v slabs with heads split out
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, H, T, D/H)
        return q, k, v

    def _merge_heads(self, out: Tensor) -> Tensor:
        batch, _, tokens, _ = out.shape
        # (B, H, T, D/H) -> (B, T, H, D/H) -> (B, T, D): concatenate the heads' outputs
        out = out.transpose(1, 2).reshape(batch, tokens, self.num_heads * self.head_dim)
        return self.proj_drop(self.proj(out))

    def _attend(self, q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Explicit attention: output ``(B, H, T, D/H)`` and probabilities ``(B, H, T, T)`` (rows sum to 1)."""
        if self.uniform:
            batch, heads, tokens, _ = q.shape
            probs = q.new_full((batch, heads, tokens, tokens), 1.0 / tokens)  # (B, H, T, T): every row 1/T
        else:
            logits = (q * self.scale) @ k.transpose(-2, -1)  # (B, H, T, D/H) @ (B, H, D/H, T) -> (B, H, T, T)
            probs = logits.softmax(dim=-1)
        return self.attn_drop(probs) @ v, probs

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self._split_heads(x)
        dropout_p = self.attn_drop.p if self.training else 0.0
        if self.uniform and dropout_p == 0.0:
            # Rows of 1/T: each query's output is the mean of the values over the tokens, the same for every query.
            # (B, H, T, D/H) -> mean over T (B, H, 1, D/H) -> broadcast to the T queries (B, H, T, D/H)
            out = v.mean(dim=2, keepdim=True).expand_as(v)
        elif (self.fused_attn if self.fused_attn is not None else not x.is_cpu) and not self.uniform:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)  # (B, H, T, D/H)
        else:
            out, _ = self._attend(q, k, v)
        return self._merge_heads(out)

    def forward_with_attention(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Same output as :meth:`forward`, plus the softmax probabilities ``(B, H, T, T)``.

        The probabilities are returned before attention dropout, i.e. what the model attends to.
        """
        out, probs = self._attend(*self._split_heads(x))
        return self._merge_heads(out), probs


class Mlp(nn.Module):
    """The position-wise feed-forward network: Linear -> GELU -> Linear (hidden width = mlp_ratio × D)."""

    def __init__(self, in_features: int, hidden_features: int, drop: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()  # exact (erf) GELU, as in timm and the ViT paper
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden_features, in_features)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class Block(nn.Module):
    """Pre-norm transformer block (ViT eq. 2-3): ``x + Attn(LN(x))`` then ``x + Mlp(LN(x))``.

    ``DropPath`` (stochastic depth, Huang et al., 2016) drops a whole residual branch per sample in
    training; it is an identity when its rate is 0, as in timm.
    """

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, qkv_bias: bool = True,
                 proj_drop: float = 0.0, attn_drop: float = 0.0, drop_path: float = 0.0) -> None:
        super().__init__()
        self.norm1 = _layer_norm(dim)
        self.attn = Attention(dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=proj_drop)
        self.drop_path1 = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = _layer_norm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop=proj_drop)
        self.drop_path2 = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.drop_path1(self.attn(self.norm1(x)))
        return x + self.drop_path2(self.mlp(self.norm2(x)))

    def forward_with_attention(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`forward` through the explicit-softmax attention; also returns ``(B, H, T, T)`` probs."""
        attended, probs = self.attn.forward_with_attention(self.norm1(x))
        x = x + self.drop_path1(attended)
        return x + self.drop_path2(self.mlp(self.norm2(x))), probs


class VisionTransformer(nn.Module):
    """ViT classifier; keyword arguments and defaults are timm's (timm's ViT-Base/16 at 224²).

    Args beyond the architecture: ``global_pool`` is ``'token'`` (class token, the paper's choice) or
    ``'avg'`` (mean of patch tokens; then, as in timm, the final LayerNorm moves after pooling and is
    called ``fc_norm``). ``drop_rate`` is dropout before the head, ``pos_drop_rate`` after the position
    embedding, ``proj_drop_rate`` after the attention projection and in the MLP, ``attn_drop_rate`` on the
    attention probabilities, ``drop_path_rate`` the stochastic depth of the last block (linear from 0).
    ``pos_embed`` is ``'learn'`` (the paper's) or ``'none'``: then, as timm's ``pos_embed='none'``, the model has
    no ``pos_embed`` parameter (the attribute is ``None``), the tokens enter block 0 without positions, and
    ``pos_drop`` is skipped as timm skips it. ``'learn'`` builds and initialises exactly what it did before the
    option existed (same parameters, same random draws in the same order).
    """

    num_prefix_tokens: int = 1  # tokens before the patch tokens: [cls]

    def __init__(self, img_size: int | tuple[int, int] = 224, patch_size: int | tuple[int, int] = 16,
                 in_chans: int = 3, num_classes: int = 1000, global_pool: str = "token", embed_dim: int = 768,
                 depth: int = 12, num_heads: int = 12, mlp_ratio: float = 4.0, qkv_bias: bool = True,
                 drop_rate: float = 0.0, pos_drop_rate: float = 0.0, proj_drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0, pos_embed: str = "learn") -> None:
        super().__init__()
        if global_pool not in GLOBAL_POOLS:
            raise StudyError(f"global_pool {global_pool!r} is not supported; use one of {GLOBAL_POOLS}")
        if pos_embed not in POS_EMBEDS:
            raise StudyError(f"pos_embed {pos_embed!r} is not supported; use one of {POS_EMBEDS}")
        if depth < 1:
            raise StudyError(f"depth {depth} is too small; a ViT needs depth >= 1")
        self.num_classes = num_classes
        self.global_pool = global_pool
        self.embed_dim = self.num_features = embed_dim
        self.num_heads = num_heads
        self.mlp_ratio = mlp_ratio

        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        # One learned vector per position, prefix tokens included (the original ViT/DeiT layout); None, as in
        # timm, when there is none, so that no state_dict key exists for it.
        self.pos_embed: nn.Parameter | None = None
        if pos_embed == "learn":
            self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + self.num_prefix_tokens,
                                                      embed_dim))
        self.pos_drop = nn.Dropout(pos_drop_rate)
        drop_paths = torch.linspace(0, drop_path_rate, depth).tolist()  # deeper blocks dropped more often
        self.blocks = nn.Sequential(*[
            Block(embed_dim, num_heads, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, proj_drop=proj_drop_rate,
                  attn_drop=attn_drop_rate, drop_path=rate)
            for rate in drop_paths])
        token_norm = global_pool == "token"
        self.norm = _layer_norm(embed_dim) if token_norm else nn.Identity()
        self.fc_norm = nn.Identity() if token_norm else _layer_norm(embed_dim)
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        self._init_weights()

    def _init_weights(self) -> None:
        """timm's default ('') scheme; convolutions and LayerNorms keep PyTorch's defaults as in timm."""
        if self.pos_embed is not None:  # first, as before pos_embed='none' existed: the same draws in the same order
            trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        self.apply(init_linear_timm)

    def _prefix_tokens(self, batch: int) -> Tensor:
        """The learned tokens put before the patch tokens, ``(B, num_prefix_tokens, D)``."""
        return self.cls_token.expand(batch, -1, -1)

    def _embed(self, x: Tensor) -> Tensor:
        """Image ``(B, C, H, W)`` -> tokens ``(B, T, D)`` entering the first block."""
        patches = self.patch_embed(x)  # (B, N, D)
        tokens = torch.cat([self._prefix_tokens(patches.shape[0]), patches], dim=1)  # (B, T, D)
        if self.pos_embed is None:
            return tokens  # timm applies pos_drop only with a position embedding
        return self.pos_drop(tokens + self.pos_embed)  # (B, T, D) + (1, T, D)

    def forward_features(self, x: Tensor) -> Tensor:
        """Image ``(B, C, H, W)`` -> all tokens ``(B, T, D)`` after the last block and the final norm."""
        return self.norm(self.blocks(self._embed(x)))

    def pool(self, x: Tensor) -> Tensor:
        """Tokens ``(B, T, D)`` -> one vector per image ``(B, D)``."""
        if self.global_pool == "token":
            return x[:, 0]
        return x[:, self.num_prefix_tokens:].mean(dim=1)  # mean over patch tokens only, as timm

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """Tokens from :meth:`forward_features` -> logits ``(B, num_classes)`` (or pooled features)."""
        x = self.head_drop(self.fc_norm(self.pool(x)))
        return x if pre_logits else self.head(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))

    # --- the explicit-attention path, for the analyses ---------------------------------------------

    def _trace(self, x: Tensor) -> tuple[dict[str, Tensor], list[Tensor], Tensor]:
        """Run the model once through explicit attention: (tokens per stage, attention per block, features).

        A block whose mixer is not attention (a ladder rung's, :mod:`study.models.ladder`) returns no probabilities
        and adds no entry to the attention list; its tokens are recorded as every block's are.
        """
        tokens = self._embed(x)
        representations = {"patch_embed": tokens}
        attentions = []
        for index, block in enumerate(self.blocks):
            tokens, probs = block.forward_with_attention(tokens)
            representations[f"blocks.{index}"] = tokens
            if probs is not None:
                attentions.append(probs)
        features = self.norm(tokens)
        if not isinstance(self.norm, nn.Identity):  # 'avg' pooling has no token-level final norm
            representations["norm"] = features
        return representations, attentions, features

    def forward_with_attention(self, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        """:meth:`forward`'s output computed via explicit softmax attention, plus each block's probs."""
        _, attentions, features = self._trace(x)
        return self.forward_head(features), attentions

    def representations(self, x: Tensor) -> dict[str, Tensor]:
        """Ordered tokens ``(B, T, D)``, prefix tokens included, input to output.

        Keys: ``patch_embed`` (tokens entering block 0: patch embedding, prefix tokens and position
        embedding), ``blocks.0`` … ``blocks.{depth-1}`` (each block's output), and ``norm`` (after the
        final LayerNorm; absent with ``global_pool='avg'``, whose norm acts on the pooled vector).
        Call it under ``torch.no_grad()`` unless gradients are wanted.
        """
        representations, _, _ = self._trace(x)
        return representations

    def attention_probs(self, x: Tensor) -> list[Tensor]:
        """Per block, the softmax attention ``(B, num_heads, T, T)``; ``T`` counts the prefix tokens first."""
        _, attentions, _ = self._trace(x)
        return attentions
