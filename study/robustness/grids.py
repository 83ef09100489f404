"""The probes' geometry in a study's terms: the ViT's patch grid, the occlusion grid and the shuffle grids its
parameters imply, and the check that they suit the study's images and models (run by the robustness stage and by
``study check``, before any work)."""

from __future__ import annotations

from study.core.config import INPUT_SHAPES, Params, listed_once
from study.core.errors import StudyError
from study.models import VIT_DEFAULTS, VIT_FAMILY
from study.robustness.settings import check_probe_settings


def vit_patch_grids(p: Params) -> dict[str, int]:
    """``model name -> cells per side of its patch grid`` for the study's ViT-family models (``VIT_FAMILY`` archs)."""
    side = INPUT_SHAPES[p.data.dataset][0]
    patches = {name: m.arch_args.get("patch_size", VIT_DEFAULTS["patch_size"]) for name, m in p.models.items()
               if m.arch in VIT_FAMILY and name in p.trained_models}
    return {name: side // patch for name, patch in patches.items() if isinstance(patch, int) and patch > 0}


def occlusion_grid(p: Params) -> int:
    """The occlusion grid: ``analysis.robustness.occlusion.grid``, or when none is given the patch grid of the
    study's ViT-family models (validation makes sure there is one)."""
    grid = p.analysis.robustness.occlusion.grid
    return grid if grid is not None else next(iter(vit_patch_grids(p).values()))


def rearrangement_grids(p: Params) -> tuple[int, ...]:
    """The shuffle grids: ``analysis.robustness.rearrangement.grids``, or when none are given every grid whose
    cells are at least 2 px wide and divide the image, with the study's ViT patch grids."""
    grids = p.analysis.robustness.rearrangement.grids
    if grids is not None:
        return tuple(grids)
    side = INPUT_SHAPES[p.data.dataset][0]
    return tuple(sorted({g for g in range(2, side // 2 + 1) if side % g == 0} | set(vit_patch_grids(p).values())))


def check_robustness(p: Params, source: str) -> None:
    """The probes' settings, by the probe library's own checks (study.robustness.settings) on this dataset's
    image size: a grid that does not divide the image, a share outside [0, 1], an unknown corruption or one the
    image is too small for, a severity outside 0-5, a shift of the whole image; then a repeated level, and an
    occlusion grid or a set of shuffle grids without the ViT's patch grid."""
    r, side = p.analysis.robustness, INPUT_SHAPES[p.data.dataset][0]
    key = "analysis.robustness"
    grids = vit_patch_grids(p)
    if r.occlusion.grid is None and not grids:
        raise StudyError(f"{source}: {key}.occlusion.grid: no ViT-family model (arch vit, deit, convit or "
                         "vit_convstem) whose patch grid it would default to; set the grid (cells per side)")
    sections = {
        "occlusion": dict(grids=[occlusion_grid(p)], shares=r.occlusion.shares),
        "rearrangement": dict(grids=rearrangement_grids(p)),
        "translation": dict(shifts=r.translation.shifts),
        "corruptions": dict(corruptions=r.corruptions.names, severities=r.corruptions.severities),
    }
    for section, settings in sections.items():
        try:
            check_probe_settings(side, **{"grids": (), "shares": (), "corruptions": (), "severities": (), **settings})
        except StudyError as err:
            raise StudyError(f"{source}: {key}.{section}: {str(err).removeprefix('robustness: ')}") from None
        for name, values in settings.items():
            listed_once(values, f"{source}: {key}.{section}.{_LEVEL_KEYS[name]}")
    for name, grid in grids.items():
        patch = side // grid
        if occlusion_grid(p) not in grids.values():
            raise StudyError(f"{source}: {key}.occlusion.grid = {r.occlusion.grid}: model '{name}' cuts the "
                             f"{side}-px images into a {grid}x{grid} grid of {patch}-px patches; set {grid}, so that "
                             "dropped cells are its tokens (and the offset grid straddles them)")
        if grid not in rearrangement_grids(p):
            raise StudyError(f"{source}: {key}.rearrangement.grids = {list(rearrangement_grids(p))}: add {grid}, the "
                             f"{grid}x{grid} grid of model '{name}''s {patch}-px patches")


_LEVEL_KEYS = {"grids": "grids", "shares": "shares", "shifts": "shifts", "corruptions": "names",
               "severities": "severities"}
