"""ConViT (d'Ascoli et al., 2021): the study's ViT with gated positional self-attention in its first blocks.

Why a subclass of :class:`VisionTransformer`: ConViT changes three things and keeps everything else (patch
embedding, MLPs, norms, head, the analyses' explicit-attention path):

1. The first ``local_up_to_layer`` blocks use gated positional self-attention (GPSA, the paper's §3):
   per head ``h``, ``A = (1 − σ(λ_h))·softmax(q kᵀ/√d) + σ(λ_h)·softmax(v_posᵀ r_ij)``, rows renormalised,
   with ``r_ij = (δ_x, δ_y, ‖δ‖²)`` the offset from query patch ``i`` to key patch ``j`` in patch units.
   The gate ``λ_h`` starts at 1, so each head starts with σ(1) ≈ 0.73 of its weight on position.
2. Its convolutional initialisation (also §3): the value projection starts as the identity and head ``h``'s
   positional scores start as ``−α‖δ − Δ_h‖²`` (up to a constant), Δ_h on a √H × √H grid of offsets around
   the query, ``α`` the locality strength. At init, σ(1) of each head is a soft "look at the patch at Δ_h",
   i.e. one tap of a √H × √H convolution, and the heads together cover its kernel.
3. Positions are embedded for the patches only; the class token joins after the last GPSA block (GPSA's
   positional scores need every token to be a patch with a grid position).

Names, shapes and inference follow timm's ``ConVit`` (``timm/models/convit.py``, checked against timm
1.0.31; adapted there from the authors' code): ``state_dict`` keys match, so timm weights load with ``strict=True`` and
``tests/models/test_convit.py`` checks the logits against timm to 1e-5 both ways. Two differences in the arguments, not
in the function: timm's ``embed_dim`` is per head (timm multiplies it by ``num_heads``), ours is the model width,
as for ``vit``; and ``qkv_bias`` defaults to True, as the study's ViT (timm's and the paper's ConViT default to
False), so that the two models differ only by the ConViT's changes.

For the analyses, :meth:`ConViT.attention_probs` returns each block's attention as for the ViT, ``(B, H, T, T)``
with the class token first: for a GPSA block, the mixed (gated) attention over the patches, with the class
token (not yet in the sequence) as a token that attends only to itself and that no patch attends to. Rollout
through those blocks leaves the class token untouched, as the model does; distances and entropies over patches
are unchanged by it. :meth:`ConViT.gates` gives each GPSA head's σ(λ_h).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn.init import trunc_normal_

from study.core.errors import StudyError
from study.models.vit import Attention, VisionTransformer, _layer_norm, init_linear_timm


def relative_offsets(grid_size: tuple[int, int]) -> Tensor:
    """``(N, N, 3)`` float offsets ``r_ij = (δ_x, δ_y, δ_x² + δ_y²)`` from query patch i to key patch j.

    ``δ_x`` is key column − query column, ``δ_y`` key row − query row, in patches; patches in row-major order.
    The channel order is timm's (``GPSA.get_rel_indices``), which the positional projection's weights assume.
    """
    rows, cols = grid_size
    row = torch.arange(rows, dtype=torch.float32).repeat_interleave(cols)  # (N,) grid row of patch k
    col = torch.arange(cols, dtype=torch.float32).repeat(rows)  # (N,) grid column of patch k
    delta_x = col[None, :] - col[:, None]  # (N, N): [i, j] = column of j − column of i
    delta_y = row[None, :] - row[:, None]  # (N, N)
    return torch.stack([delta_x, delta_y, delta_x ** 2 + delta_y ** 2], dim=-1)  # (N, N, 3)


class GatedPositionalAttention(Attention):
    """GPSA (d'Ascoli et al., 2021, §3): a gated mix of content attention and learned positional attention.

    Built from an :class:`Attention` of the same width, heads, bias and dropouts (it reuses its head
    bookkeeping, scale, output projection and dropouts). Parameters in timm's names: ``qk`` (queries and keys,
    one matmul), ``v`` (values; separate because the convolutional init sets it alone), ``pos_proj`` (the
    ``v_pos`` of every head: ``Linear(3, heads)`` applied to ``r_ij``) and ``gating_param`` (λ, one per head).
    There is no fused kernel for a mix of two softmaxes, so attention is always computed explicitly.
    """

    fused_attn = False

    def __init__(self, dim: int, num_heads: int, grid_size: tuple[int, int], qkv_bias: bool = True,
                 attn_drop: float = 0.0, proj_drop: float = 0.0, locality_strength: float = 1.0) -> None:
        super().__init__(dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=proj_drop)
        del self.qkv  # replaced by qk and v below
        self.qk = nn.Linear(dim, 2 * dim, bias=qkv_bias)
        self.v = nn.Linear(dim, dim, bias=qkv_bias)
        self.pos_proj = nn.Linear(3, num_heads)
        self.gating_param = nn.Parameter(torch.ones(num_heads))  # λ_h = 1: σ(1) ≈ 0.73 of each head positional
        # Fixed by the grid, so a buffer (it follows .to()); not persistent, so state_dict keys are timm's.
        self.register_buffer("rel_indices", relative_offsets(grid_size), persistent=False)
        self.apply(init_linear_timm)
        self.local_init(locality_strength)

    @classmethod
    def like(cls, attention: Attention, grid_size: tuple[int, int], locality_strength: float
             ) -> "GatedPositionalAttention":
        """A GPSA with ``attention``'s width, heads, bias and dropout rates (what the ViT's block was built with)."""
        return cls(attention.num_heads * attention.head_dim, attention.num_heads, grid_size,
                   qkv_bias=attention.qkv.bias is not None,
                   attn_drop=attention.attn_drop.p, proj_drop=attention.proj_drop.p,
                   locality_strength=locality_strength)

    @torch.no_grad()
    def local_init(self, locality_strength: float) -> None:
        """The convolutional initialisation (the paper's §3; timm's ``GPSA.local_init``).

        Head ``h = a + k·b`` (``k = ⌊√H⌋``, ``a, b < k``) gets the centre ``Δ_h = (Δ_x, Δ_y) = (b − c, a − c)``,
        ``c = (k − 1)/2``, and ``v_pos = α·(2Δ_x, 2Δ_y, −1)``, so its score ``α(2Δ·δ − ‖δ‖²) = −α‖δ − Δ_h‖² + const``
        peaks at the offset ``δ = Δ_h``. Heads beyond ``k²`` (H not a square) keep their random ``v_pos``, scaled
        by α as in timm. The value projection starts as the identity, so a head passes on the patch it looks at.
        """
        nn.init.eye_(self.v.weight)
        side = math.isqrt(self.num_heads)
        centre = (side - 1) / 2
        heads = torch.arange(side * side, dtype=torch.float32)  # (k²,) heads that get a centre
        delta_y = heads % side - centre  # (k²,)
        delta_x = torch.div(heads, side, rounding_mode="floor") - centre  # (k²,)
        # rows of v_pos, columns in r_ij's order (δ_x, δ_y, ‖δ‖²): (k², 3)
        self.pos_proj.weight[: side * side] = torch.stack([2 * delta_x, 2 * delta_y, -torch.ones_like(heads)], dim=1)
        self.pos_proj.weight.mul_(locality_strength)

    def positional_attention(self) -> Tensor:
        """Each head's positional attention ``softmax_j(v_posᵀ r_ij)``, ``(H, N, N)``; the same for every image."""
        scores = self.pos_proj(self.rel_indices)  # (N, N, 3) -> (N, N, H)
        return scores.permute(2, 0, 1).softmax(dim=-1)  # (N, N, H) -> (H, N, N)

    def gates(self) -> Tensor:
        """σ(λ_h) per head, ``(H,)``: the weight of positional attention in each head's mix."""
        return torch.sigmoid(self.gating_param)

    def _split_heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        batch, tokens, _ = x.shape
        # (B, N, 2D) -> (B, N, 2, H, D/H) -> (2, B, H, N, D/H): q and k slabs with heads split out
        qk = self.qk(x).reshape(batch, tokens, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = qk.unbind(0)  # each (B, H, N, D/H)
        # (B, N, D) -> (B, N, H, D/H) -> (B, H, N, D/H)
        v = self.v(x).reshape(batch, tokens, self.num_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def _attend(self, q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Gated attention: output ``(B, H, N, D/H)`` and the mixed probabilities ``(B, H, N, N)``."""
        content = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)  # (B, H, N, N)
        gate = self.gates().view(-1, 1, 1)  # (H,) -> (H, 1, 1), broadcast over images, queries and keys
        mixed = (1.0 - gate) * content + gate * self.positional_attention()  # (B, H, N, N)
        # Rows already sum to 1 up to rounding; renormalising as the paper and timm do keeps parity exact.
        probs = mixed / mixed.sum(dim=-1, keepdim=True)
        return self.attn_drop(probs) @ v, probs

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self._attend(*self._split_heads(x))
        return self._merge_heads(out)


def _class_token_at_rest(probs: Tensor) -> Tensor:
    """A GPSA block's attention ``(B, H, N, N)`` -> ``(B, H, 1 + N, 1 + N)``, the class token first.

    The class token is not in the sequence yet: it attends only to itself (row ``e_0``, so it passes through
    unchanged, as in the model) and no patch attends to it (column zero). Rows still sum to 1.
    """
    batch, heads, tokens, _ = probs.shape
    padded = probs.new_zeros(batch, heads, tokens + 1, tokens + 1)
    padded[:, :, 0, 0] = 1.0
    padded[:, :, 1:, 1:] = probs
    return padded


class ConViT(VisionTransformer):
    """ConViT classifier; keyword arguments as :class:`VisionTransformer`'s (``embed_dim`` is the width), plus
    ``local_up_to_layer`` (how many first blocks use GPSA; the paper: 10 of 12) and ``locality_strength`` (α).
    """

    def __init__(self, local_up_to_layer: int = 10, locality_strength: float = 1.0, **kwargs) -> None:
        super().__init__(**kwargs)
        depth = len(self.blocks)
        if not isinstance(local_up_to_layer, int) or not 1 <= local_up_to_layer < depth:
            raise StudyError(f"local_up_to_layer {local_up_to_layer!r} must be an integer from 1 to depth - 1 = "
                             f"{depth - 1}: GPSA needs at least one block, and the class token one block after them")
        if not isinstance(locality_strength, (int, float)) or locality_strength <= 0:
            raise StudyError(f"locality_strength {locality_strength!r} must be a positive number (the paper: 1)")
        self.local_up_to_layer = local_up_to_layer
        self.locality_strength = float(locality_strength)
        # One position per patch (timm's layout): the class token joins after the GPSA blocks, without one.
        # With pos_embed='none' there is none (timm's use_pos_embed=False); GPSA's positional attention remains.
        if self.pos_embed is not None:
            self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches, self.embed_dim))
            trunc_normal_(self.pos_embed, std=0.02)
        trunc_normal_(self.cls_token, std=0.02)  # timm's and the authors' init (the ViT's is N(0, 1e-6))
        # timm's ConVit normalises the tokens before pooling whatever global_pool is (the ViT, with 'avg',
        # normalises the pooled vector instead, as fc_norm).
        self.norm, self.fc_norm = _layer_norm(self.embed_dim), nn.Identity()
        for block in self.blocks[:local_up_to_layer]:
            block.attn = GatedPositionalAttention.like(block.attn, self.patch_embed.grid_size, self.locality_strength)

    def gates(self) -> Tensor:
        """σ(λ) of every GPSA block and head, ``(local_up_to_layer, num_heads)``: each head's weight on position."""
        with torch.no_grad():
            return torch.stack([block.attn.gates() for block in self.blocks[:self.local_up_to_layer]])

    def _embed(self, x: Tensor) -> Tensor:
        """Image ``(B, C, H, W)`` -> patch tokens ``(B, N, D)`` entering the first (GPSA) block; no class token."""
        patches = self.patch_embed(x)  # (B, N, D)
        if self.pos_embed is not None:
            patches = patches + self.pos_embed  # (B, N, D) + (1, N, D)
        return self.pos_drop(patches)  # timm's ConVit drops out here with or without positions

    def _with_class_token(self, patches: Tensor) -> Tensor:
        """``(B, N, D)`` -> ``(B, 1 + N, D)``: the class token put in front (it has no position embedding)."""
        return torch.cat([self._prefix_tokens(patches.shape[0]), patches], dim=1)

    def forward_features(self, x: Tensor) -> Tensor:
        """Image -> all tokens ``(B, 1 + N, D)`` after the last block and the final norm."""
        tokens = self._embed(x)  # (B, N, D)
        for index, block in enumerate(self.blocks):  # a loop, not slices of the Sequential: no modules built here
            if index == self.local_up_to_layer:
                tokens = self._with_class_token(tokens)  # (B, N, D) -> (B, 1 + N, D)
            tokens = block(tokens)
        return self.norm(tokens)

    def _trace(self, x: Tensor) -> tuple[dict[str, Tensor], list[Tensor], Tensor]:
        """:meth:`VisionTransformer._trace` with the class token joining after the GPSA blocks.

        Every recorded tensor has the ViT's shape: before the class token joins, tokens get it (as it is, a
        learned constant) in front and attention gets it as a token at rest (:func:`_class_token_at_rest`).
        """
        tokens = self._embed(x)  # (B, N, D)
        representations = {"patch_embed": self._with_class_token(tokens)}
        attentions = []
        for index, block in enumerate(self.blocks):
            local = index < self.local_up_to_layer
            if index == self.local_up_to_layer:
                tokens = self._with_class_token(tokens)  # (B, N, D) -> (B, 1 + N, D)
            tokens, probs = block.forward_with_attention(tokens)
            representations[f"blocks.{index}"] = self._with_class_token(tokens) if local else tokens
            attentions.append(_class_token_at_rest(probs) if local else probs)
        features = self.norm(tokens)
        representations["norm"] = features
        return representations, attentions, features
