"""A multilayer perceptron on raw pixels: the study's floor, a classifier with no spatial prior at all.

Why: a ViT and a CNN differ in how much they assume about images (locality, translation equivariance, a patch
grid). An MLP on the flattened pixels assumes none of it: permuting the pixels the same way in every image
changes nothing it can learn. Whatever accuracy it reaches at a data size is what needs no spatial prior, so it
marks the bottom of the ladder the ViT and the CNNs stand on. With ``hidden=[]`` it is multinomial logistic
regression, the classic linear baseline (e.g. LeCun et al., 1998, Fig. 9, on MNIST).

Layout for ``C×H×W`` images, ``hidden = [h₁, …, h_L]``::

    image (B, C, H, W) -> flatten (B, C·H·W) -> L × [Linear -> GELU] -> Linear -> logits (B, num_classes)

GELU, not ReLU, to share the ViT's MLP non-linearity. Linear layers keep PyTorch's default (Kaiming-uniform)
init. Its forward FLOPs are about twice its parameter count (one multiply-add per weight), so an MLP matched to
the ViT in parameters does far fewer FLOPs per image (the ViT reuses each weight on every token).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from study.core.errors import StudyError


class PixelMLP(nn.Module):
    """``flatten -> [Linear -> GELU] × len(hidden) -> Linear``; timm's ``forward_features``/``forward_head`` split.

    ``features`` holds the hidden layers (empty for logistic regression) and ``head`` the last Linear, so that
    ``forward_features`` gives the last hidden activations ``(B, num_features)`` and ``forward_head`` the logits.
    """

    def __init__(self, img_size: int, in_chans: int, num_classes: int, hidden: Sequence[int] = (256,)) -> None:
        super().__init__()
        if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence) or not all(
                isinstance(width, int) and not isinstance(width, bool) and width > 0 for width in hidden):
            raise StudyError(f"hidden {hidden!r} must be a list of positive integers (the hidden widths; [] for "
                             "logistic regression)")
        self.img_size = img_size
        self.in_chans = in_chans
        self.num_classes = num_classes
        self.hidden = tuple(hidden)
        layers: list[nn.Module] = [nn.Flatten()]  # (B, C, H, W) -> (B, C·H·W), pixels in (channel, row, column) order
        width = in_chans * img_size * img_size
        for out_width in self.hidden:
            layers += [nn.Linear(width, out_width), nn.GELU()]
            width = out_width
        self.features = nn.Sequential(*layers)
        self.num_features = width
        self.head = nn.Linear(width, num_classes)

    def forward_features(self, x: Tensor) -> Tensor:
        """Images ``(B, C, H, W)`` -> last hidden activations ``(B, num_features)`` (the pixels if no hidden layer)."""
        if tuple(x.shape[1:]) != (self.in_chans, self.img_size, self.img_size):
            raise StudyError(f"input images are {tuple(x.shape[1:])} but the MLP was built for "
                             f"{(self.in_chans, self.img_size, self.img_size)}; rebuild it with the data's shape")
        return self.features(x)

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """Features ``(B, num_features)`` -> logits ``(B, num_classes)`` (or the features, with ``pre_logits``)."""
        return x if pre_logits else self.head(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))

    def representations(self, x: Tensor) -> dict[str, Tensor]:
        """Ordered activations, input side first: ``embed``, the first linear map of the pixels before its GELU
        (the MLP's input embedding, as the patch embedding is the ViT's: the analyses leave it out of means over
        depth), then ``hidden.{i}`` ``(B, h_i)`` after each GELU; no logits. So a one-hidden-layer MLP has a depth
        axis of two layers, as the CKA analysis needs. Logistic regression (``hidden=[]``) has none: a one-line
        StudyError. Call under ``torch.no_grad()`` unless gradients are wanted."""
        if not self.hidden:
            raise StudyError("an MLP without hidden layers (logistic regression) has no intermediate representations")
        out: dict[str, Tensor] = {}
        x = self.features[0](x)  # (B, C, H, W) -> (B, C·H·W)
        for index in range(len(self.hidden)):
            linear, act = self.features[1 + 2 * index], self.features[2 + 2 * index]
            x = linear(x)  # (B, h_index)
            if index == 0:
                out["embed"] = x
            x = act(x)
            out[f"hidden.{index}"] = x
        return out


def build_mlp(num_classes: int, img_size: int, in_chans: int, hidden: Sequence[int]) -> PixelMLP:
    """The registry's constructor (study.archs; its study size there, ``MLP_DEFAULTS``)."""
    return PixelMLP(img_size, in_chans, num_classes, hidden=hidden)
