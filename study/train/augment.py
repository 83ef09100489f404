"""Training augmentation of whole batches on the device, with per-image random parameters.

The library is Kornia (``kornia.augmentation``, checked against 0.9.0). Its augmentations take a float
batch ``(B, C, H, W)`` on any device and draw their random parameters once per row. torchvision's
``transforms.v2`` draws one set per call, so a whole batch would share a crop. The Kornia behaviour this
module relies on, as its 0.9 docstrings ("Convention" blocks) state it:

- ``RandomCrop(padding, cropping_mode="resample", resample="nearest")`` takes one offset per row and
  crops by one batched resampling. The default ``"slice"`` mode loops over the rows in Python. Nearest
  sampling at integer offsets copies pixels exactly.
- ``RandomHorizontalFlip`` and ``RandomErasing`` draw their gate, and erasing its box, per row.
- ``auto.TrivialAugment`` and ``auto.RandAugment`` pick their operations once per call for the whole
  batch; only the magnitude (TrivialAugment) or its sign (RandAugment) is drawn per row. To choose the
  operations per row as well, every candidate of Kornia's default policy becomes a one-candidate Kornia
  policy of its own, and each row is routed to the candidates it drew (:func:`apply_per_row`). This is a
  loop over at most 15 operations, never over images.
- ``RandomMixUpV2`` pairs rows by a random permutation and draws a lambda per row. Its lambda is uniform
  on a range, so the ``Beta(α, α)`` of Zhang et al. (2018), which timm and DeiT use, is drawn here and
  passed in through ``params``. The class output is ``(label, partner label, partner weight)``.
- ``RandomCutMixV2(beta=α, use_correct_lambda=True)`` also pairs by permutation. Per row it pastes a box
  of side ``floor(sqrt(1 − λ)·side)``, with ``λ ~ Beta(α, α)``, and returns the share of the image that
  was kept as lambda.

Kornia draws every random number from the global torch RNG, on the CPU. Each call therefore runs inside
``torch.random.fork_rng``, seeded from ``(seed, step)`` (:func:`augment_seed`). Batch ``s`` is then a pure
function of ``(seed, s)``, so a resumed run sees the batches it would have seen, and the RNG stream of
training is left as it was.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from study.train.batches import normalise

# Random erasing's box area and aspect-ratio ranges, as in Zhong et al. (2020) and torchvision's defaults.
_ERASE_SCALE, _ERASE_RATIO = (0.02, 1 / 3), (0.3, 3.3)


@dataclass(frozen=True)
class Augmentation:
    """One model's training augmentation (mirrors study.core.config.AugmentParams). The defaults switch everything off."""

    crop_padding: int = 0  # random crop of the image size after zero padding by this many pixels
    hflip: bool = False  # horizontal flip of half the images
    auto_augment: str = "none"  # "none", "trivial" (TrivialAugment) or "rand" (RandAugment)
    rand_n: int = 2  # RandAugment: operations per image
    rand_m: int = 9  # RandAugment: magnitude, on Kornia's scale of 0 to 30 (exclusive)
    erasing: float = 0.0  # probability that an image gets one random box erased (set to the channel mean)
    mixup_alpha: float = 0.0  # Mixup with λ ~ Beta(α, α); 0 = off
    cutmix_alpha: float = 0.0  # CutMix with λ ~ Beta(α, α); 0 = off
    mix_prob: float = 1.0  # share of batches mixed when Mixup or CutMix is on

    @property
    def mixes(self) -> bool:
        return self.mixup_alpha > 0 or self.cutmix_alpha > 0

    @property
    def crop_flip_only(self) -> bool:
        """Crop or flip on, nothing else: what :func:`study.train.device_crop.crop_flip` draws on the device."""
        return bool(self.crop_padding or self.hflip) and self.auto_augment == "none" and not self.erasing \
            and not self.mixes

    @property
    def active(self) -> bool:
        return bool(self.crop_padding or self.hflip or self.auto_augment != "none" or self.erasing or self.mixes)

    def as_dict(self) -> dict:
        return asdict(self)


def augment_seed(seed: int, step: int) -> int:
    """The torch seed of step ``step`` of training seed ``seed``: 32 bits mixed by NumPy's ``SeedSequence``.

    torch's CPU generator keeps only the low 32 bits of a seed (its Mersenne Twister is seeded with 32
    bits), so packing ``(seed, step)`` into one wide integer would give every training seed the same draws.
    """
    return int(np.random.SeedSequence([seed, step]).generate_state(1)[0])


def apply_per_row(x: torch.Tensor, ops: list[nn.Module], choice: torch.Tensor) -> torch.Tensor:
    """Apply ``ops[choice[i, j]]`` to row ``i``, for each column ``j`` in turn, in place on ``x``.

    ``x`` is ``(B, C, H, W)``. ``choice`` is ``(B, slots)``, an integer tensor on the CPU. Each operation
    runs once per slot on the rows that chose it, as one batch.
    """
    for slot in range(choice.shape[1]):
        for k, op in enumerate(ops):
            rows = (choice[:, slot] == k).nonzero().squeeze(1)  # (rows,) indices on the CPU: no device sync
            if rows.numel():
                rows = rows.to(x.device)
                x.index_copy_(0, rows, op(x.index_select(0, rows)))
    return x


class BatchAugment:
    """A batch's images uint8 ``(B, H, W, C)`` and labels ``(B,)`` to model inputs and loss targets.

    Calling it returns ``(x, targets)``. ``x`` is the normalised float batch ``(B, C, H, W)``. ``targets``
    are the labels as they came in when Mixup and CutMix are off. When either is on, they are soft
    ``(B, num_classes)``: every row is a lambda-weighted mix of two one-hot vectors, and an unmixed batch
    gets plain one-hot rows.
    The order is crop, flip, auto-augment (on 0–1 floats, where Kornia's intensity operations are defined),
    then normalisation, erasing and mixing. Erasing comes after normalisation, as in torchvision's reference
    recipes, so the erased box is 0, which is the channel mean. With everything off the result is exactly
    :func:`study.train.batches.normalise` of the images, and no random number is drawn.
    """

    def __init__(self, settings: Augmentation, mean: torch.Tensor, std: torch.Tensor, num_classes: int,
                 image_size: tuple[int, int]):
        self.settings, self.mean, self.std, self.num_classes = settings, mean, std, num_classes
        self.device = mean.device
        if not settings.active:
            return
        # Kornia is imported only when something uses it: the import takes about 0.7 s, and every training
        # stage of the default study (no augmentation) would pay it.
        import kornia.augmentation as K

        s, in_chans = settings, mean.numel()
        self.geometric: list[nn.Module] = []
        if s.crop_padding:
            self.geometric.append(K.RandomCrop(image_size, padding=s.crop_padding, p=1.0, cropping_mode="resample",
                                               resample="nearest"))
        if s.hflip:
            self.geometric.append(K.RandomHorizontalFlip(p=0.5))
        self.policy_ops = _policy_ops(s.auto_augment, s.rand_n, s.rand_m, in_chans)
        self.erase = K.RandomErasing(scale=_ERASE_SCALE, ratio=_ERASE_RATIO, value=0.0, p=s.erasing) if s.erasing else None
        self.mixup = K.RandomMixUpV2(data_keys=["input", "class"]) if s.mixup_alpha > 0 else None
        self.cutmix = (K.RandomCutMixV2(beta=s.cutmix_alpha, use_correct_lambda=True, data_keys=["input", "class"])
                       if s.cutmix_alpha > 0 else None)
        for module in (*self.geometric, *self.policy_ops, self.erase, self.mixup, self.cutmix):
            if module is not None:
                module.to(self.device)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor, seed: int,
                 step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.settings.active:
            return normalise(images, self.mean, self.std), labels
        cuda = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda), torch.no_grad():
            torch.manual_seed(augment_seed(seed, step))
            return self._augment(images, labels)

    def _augment(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.settings
        x = images.permute(0, 3, 1, 2).float() / 255.0  # (B, H, W, C) -> (B, C, H, W), 0-1 as normalise scales
        for module in self.geometric:
            x = module(x)
        if self.policy_ops:
            x = apply_per_row(x, self.policy_ops, _policy_choice(len(x), len(self.policy_ops), s))
        x = (x - self.mean.view(1, -1, 1, 1)) / self.std.view(1, -1, 1, 1)  # normalise's arithmetic, per channel
        if self.erase is not None:
            x = self.erase(x)
        if s.mixes:
            return self._mix(x, labels)
        return x, labels

    def _mix(self, x: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mixup or CutMix (one of them per batch, with equal odds when both are on, as timm switches),
        and soft targets ``(B, classes)``: ``(1 − w)·onehot(label) + w·onehot(partner's label)``."""
        s = self.settings
        one_hot = F.one_hot(labels, self.num_classes).float()  # (B, classes)
        if torch.rand(()) >= s.mix_prob:
            return x, one_hot
        use_cutmix = self.cutmix is not None and (self.mixup is None or bool(torch.rand(()) < 0.5))
        if use_cutmix:
            x, mixed = self.cutmix(x, labels)  # mixed: (1, B, 3) = (label, partner label, kept share)
            partner, weight = mixed[0, :, 1], 1 - mixed[0, :, 2]
        else:
            params = self.mixup.forward_parameters(x.shape)
            alpha = torch.tensor(s.mixup_alpha)
            params["mixup_lambdas"] = torch.distributions.Beta(alpha, alpha).sample((len(x),))  # (B,) partner weights
            x, mixed = self.mixup(x, labels, params=params)  # mixed: (B, 3) = (label, partner label, partner weight)
            partner, weight = mixed[:, 1], mixed[:, 2]
        partner_hot = F.one_hot(partner.long(), self.num_classes).float()  # (B, classes)
        weight = weight.float()[:, None]  # (B, 1)
        return x, (1 - weight) * one_hot + weight * partner_hot


def _policy_ops(kind: str, rand_n: int, rand_m: int, in_chans: int) -> list[nn.Module]:
    """Kornia's default TrivialAugment or RandAugment candidates, each one a one-candidate Kornia policy."""
    if kind == "none":
        return []
    from kornia.augmentation.auto import RandAugment, TrivialAugment
    from kornia.augmentation.auto.rand_augment import rand_augment
    from kornia.augmentation.auto.trivial_augment import trivial_augment

    if kind not in ("trivial", "rand"):
        raise ValueError(f"auto_augment must be 'none', 'trivial' or 'rand', not {kind!r}")
    candidates = (trivial_augment if kind == "trivial" else rand_augment).default_policy
    # "color" (saturation) needs three channels, and on a grey image it would change nothing anyway.
    candidates = [sub for sub in candidates if in_chans == 3 or sub[0][0] != "color"]
    if kind == "trivial":
        return [TrivialAugment(policy=[sub], transformation_matrix_mode="skip") for sub in candidates]
    if not 1 <= rand_n <= len(candidates):
        raise ValueError(f"rand_n must lie in [1, {len(candidates)}], not {rand_n}")
    return [RandAugment(n=1, m=rand_m, policy=[sub], transformation_matrix_mode="skip") for sub in candidates]


def _policy_choice(batch: int, candidates: int, settings: Augmentation) -> torch.Tensor:
    """Each row's operations ``(B, slots)``: one candidate for TrivialAugment, ``rand_n`` distinct ones in a
    random order for RandAugment (Kornia draws them the same way, but once per batch)."""
    if settings.auto_augment == "trivial":
        return torch.randint(candidates, (batch, 1))
    return torch.rand(batch, candidates).argsort(dim=1)[:, : settings.rand_n]  # a random permutation per row
