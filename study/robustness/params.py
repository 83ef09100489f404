"""``analysis.robustness``: the probes of every run and the images they are scored on (the schema and its
reader; docs/robustness.md). Whether the probes suit the study's images and models is checked with the probes'
geometry (:func:`study.robustness.grids.check_robustness`)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from study.core.config import Params, section

_FROZEN = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_FROZEN)
class OcclusionParams:
    """Random cell drop (Naseer et al. 2021): shares of the cells of a grid set to black per image."""

    # Cells per side: the ViT's patch grid (checked against its patch size); none given = that grid.
    grid: StrictInt | None = Field(default=None, ge=1)
    shares: tuple[StrictFloat, ...] = (0.25, 0.5, 0.75, 0.9)  # 0 is the clean image, scored anyway
    offset: StrictBool = True  # also the same grid moved by half a cell, its cells straddling the ViT's tokens


@dataclass(frozen=True, config=_FROZEN)
class RearrangementParams:
    """Patch shuffle (Naseer et al. 2021): the cells of each grid permuted per image; include the patch grid."""

    # Cells per side; none given = every grid of cells at least 2 px wide that divides the image, and the ViT's
    # patch grid (28 px: 2, 4, 7, 14), so a params file that names no grid is valid for any dataset.
    grids: tuple[StrictInt, ...] | None = None
    # Grids also shuffled with the grid moved by half a cell (cyclically), so that its cells straddle the ViT's
    # tokens: the same number of cells of the same size permuted, off the patch grid (variant "offset").
    offset_grids: tuple[StrictInt, ...] = ()


@dataclass(frozen=True, config=_FROZEN)
class TranslationParams:
    """Shifts with zero fill along x, y and the diagonal (Azulay & Weiss 2019); 1 px also gives consistency."""

    shifts: tuple[StrictInt, ...] = (1, 2, 4)


@dataclass(frozen=True, config=_FROZEN)
class CorruptionParams:
    """An MNIST-C-style suite (study.robustness.probes.CORRUPTIONS) at the given severities (1-5)."""

    names: tuple[StrictStr, ...] = ("shot_noise", "motion_blur", "rotate", "fog")
    severities: tuple[StrictInt, ...] = (1, 3, 5)


@dataclass(frozen=True, config=_FROZEN)
class RobustnessParams:
    """The robustness probes of every run (stage ``robustness``; docs/robustness.md)."""

    images: StrictInt = Field(default=2000, ge=1)  # a fixed random subset of the test set (all of it if smaller)
    seed: StrictInt = Field(default=0, ge=0)  # draws that subset and every probe's random choices
    batch_size: StrictInt = Field(default=250, gt=0)  # images probed and scored at once
    occlusion: OcclusionParams = OcclusionParams()
    rearrangement: RearrangementParams = RearrangementParams()
    translation: TranslationParams = TranslationParams()
    corruptions: CorruptionParams = CorruptionParams()
    # Score each ViT/DeiT run a second time with every attention row uniform, as "<model>@uniform" (the accuracy
    # its attention carries; study.models.ablations). False leaves the variant out and the stage's time unchanged.
    uniform_attention: StrictBool = True


def robustness_params(params: Params) -> RobustnessParams:
    return section(params, "analysis.robustness", RobustnessParams)
