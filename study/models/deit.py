"""DeiT's distilled ViT (Touvron et al., 2021, §4): a ViT with a second, "distillation" token.

Why a subclass and not a new model: the distilled ViT differs from :class:`VisionTransformer` only in
its prefix tokens ``[cls, dist]`` (so position embeddings for ``N + 2`` positions) and a second linear
head on the distillation token. The class token's head learns from the true labels, the distillation
head from the teacher (see ``study.train``). Layout, names and inference rule follow timm's
``VisionTransformerDistilled``, so weights load with ``strict=True`` and eval logits match to 1e-5.

Output contract: in eval, and in training unless ``set_distilled_training(True)``, the model returns the
MEAN of the two heads' logits (timm and the official code average logits; the paper speaks of softmax
outputs). With distilled training enabled and ``self.training``, it returns ``(class_logits,
dist_logits)``. :meth:`forward_heads` always returns both, so each head can be scored alone (DeiT Table 3).
"""

from __future__ import annotations

import torch
from torch.nn.init import trunc_normal_
from torch import Tensor, nn

from study.core.errors import StudyError
from study.models.vit import VisionTransformer, init_linear_timm


class DistilledVisionTransformer(VisionTransformer):
    """ViT with class and distillation tokens and one head on each; keyword arguments as the ViT's."""

    num_prefix_tokens: int = 2  # [cls, dist]

    def __init__(self, **kwargs) -> None:
        if kwargs.get("global_pool", "token") != "token":
            raise StudyError(f"DeiT's heads read the class and distillation tokens, so global_pool must be "
                             f"'token', not {kwargs['global_pool']!r}")
        super().__init__(**kwargs)  # builds pos_embed for N + num_prefix_tokens positions
        self.dist_token = nn.Parameter(torch.zeros(1, 1, self.embed_dim))
        trunc_normal_(self.dist_token, std=0.02)  # timm's init; the class token starts near zero instead
        self.head_dist = nn.Linear(self.embed_dim, self.num_classes) if self.num_classes > 0 else nn.Identity()
        self.head_dist.apply(init_linear_timm)
        self.distilled_training = False

    def set_distilled_training(self, enable: bool) -> None:
        """Make training-mode ``forward`` return both heads' logits, for the distillation loss."""
        self.distilled_training = enable

    def _prefix_tokens(self, batch: int) -> Tensor:
        # (1, 1, D) each -> (B, 2, D): class token first, then the distillation token
        return torch.cat([self.cls_token.expand(batch, -1, -1), self.dist_token.expand(batch, -1, -1)], dim=1)

    def _two_heads(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Tokens ``(B, T, D)`` -> ``(class_logits, dist_logits)``, each ``(B, num_classes)``."""
        return self.head(self.head_drop(x[:, 0])), self.head_dist(self.head_drop(x[:, 1]))

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Tokens -> logits under the output contract in the module docstring.

        ``pre_logits=True`` returns the mean of the two prefix tokens ``(B, D)``, as timm does.
        """
        if pre_logits:
            return (self.head_drop(x[:, 0]) + self.head_drop(x[:, 1])) / 2
        class_logits, dist_logits = self._two_heads(x)
        if self.distilled_training and self.training:
            return class_logits, dist_logits
        return (class_logits + dist_logits) / 2

    def forward_heads(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Image ``(B, C, H, W)`` -> ``(class_logits, dist_logits)``, whatever the mode."""
        return self._two_heads(self.forward_features(x))
