"""The probes' geometry in a study's terms: the ViT's patch grid, the occlusion grid and the shuffle grids its
parameters imply, the conditions the robustness stage scores, the analysis plan's share of them, and the check
that all of it suits the study's images and models (run by the robustness stage and by ``study check``, before any
work)."""

from __future__ import annotations

from study.core.config import INPUT_SHAPES, Params, listed_once
from study.core.errors import StudyError
from study.archs import VIT_DEFAULTS, VIT_FAMILY
from study.robustness import (ALIGNED, CLEAN, CORRUPTION, DIRECTIONS, OCCLUSION, OFFSET, REARRANGEMENT, SHUFFLE,
                              TRANSLATION, is_variant, trained_model)
from study.plan.params import ClaimParams, plan_params
from study.robustness.params import robustness_params
from study.robustness.settings import check_probe_settings

# The archs whose every attention is the study's plain Attention, so that they have a uniform-attention variant
# (study.models.ablations.has_uniform_variant, which tests/robustness/test_robustness.py holds this to): not a
# ConViT (its GPSA blocks), a CNN or a timm model.
UNIFORM_ARCHS = ("vit", "deit", "vit_convstem")

Condition = tuple[str, str, float]  # (probe, variant, level), as the tables key a condition


def vit_patch_grids(p: Params) -> dict[str, int]:
    """``model name -> cells per side of its patch grid`` for the study's ViT-family models (``VIT_FAMILY`` archs)."""
    side = INPUT_SHAPES[p.data.dataset][0]
    patches = {name: m.arch_args.get("patch_size", VIT_DEFAULTS["patch_size"]) for name, m in p.models.items()
               if m.arch in VIT_FAMILY and name in p.trained_models}
    return {name: side // patch for name, patch in patches.items() if isinstance(patch, int) and patch > 0}


def occlusion_grid(p: Params) -> int:
    """The occlusion grid: ``analysis.robustness.occlusion.grid``, or when none is given the patch grid of the
    study's ViT-family models (validation makes sure there is one)."""
    grid = robustness_params(p).occlusion.grid
    return grid if grid is not None else next(iter(vit_patch_grids(p).values()))


def rearrangement_grids(p: Params) -> tuple[int, ...]:
    """The shuffle grids: ``analysis.robustness.rearrangement.grids``, or when none are given every grid whose
    cells are at least 2 px wide and divide the image, with the study's ViT patch grids."""
    grids = robustness_params(p).rearrangement.grids
    if grids is not None:
        return tuple(grids)
    side = INPUT_SHAPES[p.data.dataset][0]
    return tuple(sorted({g for g in range(2, side // 2 + 1) if side % g == 0} | set(vit_patch_grids(p).values())))


def probe_settings(p: Params) -> dict:
    """The keywords of :func:`study.robustness.scoring.conditions` for this study: every probe's settings."""
    r = robustness_params(p)
    return dict(image_size=INPUT_SHAPES[p.data.dataset][0], seed=r.seed, occlusion_grid=occlusion_grid(p),
                shares=r.occlusion.shares, offset=r.occlusion.offset, grids=rearrangement_grids(p),
                shifts=r.translation.shifts, corruptions=r.corruptions.names, severities=r.corruptions.severities,
                offset_grids=r.rearrangement.offset_grids)


def scored_conditions(p: Params) -> set[Condition]:
    """The key of every condition the stage scores (those :func:`study.robustness.scoring.conditions` lists for
    :func:`probe_settings`; tests/robustness/test_robustness.py holds the two to each other), read without building
    any probe: what a claim of the analysis plan may name."""
    r = robustness_params(p)
    occluded = (ALIGNED, OFFSET) if r.occlusion.offset else (ALIGNED,)
    return ({(CLEAN, CLEAN, 0.0)}
            | {(OCCLUSION, variant, float(s)) for variant in occluded for s in r.occlusion.shares if s > 0}
            | {(REARRANGEMENT, SHUFFLE, float(g)) for g in rearrangement_grids(p) if g > 1}
            | {(REARRANGEMENT, OFFSET, float(g)) for g in r.rearrangement.offset_grids if g > 1}
            | {(TRANSLATION, d, float(s)) for d in DIRECTIONS for s in r.translation.shifts if s > 0}
            | {(CORRUPTION, name, float(s)) for name in r.corruptions.names for s in r.corruptions.severities if s > 0})


def planned_claims(p: Params) -> list[tuple[int, ClaimParams]]:
    """``(index, claim)`` of every claim of ``analysis.plan`` whose models the study trains (a ``<model>@uniform``
    by its model): the claims the stage scores. A claim naming another model is skipped, as a pair of
    ``analysis.controls.pairs`` is. Empty without a plan."""
    plan, trained = plan_params(p), set(p.trained_models)
    claims = () if plan is None else plan.claims
    return [(i, c) for i, c in enumerate(claims) if {trained_model(c.arm), trained_model(c.against)} <= trained]


def plan_scoring(p: Params) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Condition, ...]]:
    """What the stage scores for the analysis plan, on ``analysis.plan.images`` images: ``(models, uniform,
    conditions)``: the trained models whose runs it scores, those also scored with uniform attention (a claim names
    ``<model>@uniform``), and the conditions, the clean images first (every run's retained accuracy needs them),
    then the claims' conditions and controls in the plan's order. All empty without a plan or a claim to score."""
    claims = [c for _, c in planned_claims(p)]
    if not claims:
        return (), (), ()
    names = [name for c in claims for name in (c.arm, c.against)]
    models = tuple(dict.fromkeys(trained_model(name) for name in names))
    uniform = tuple(dict.fromkeys(trained_model(name) for name in names if is_variant(name)))
    named = [key for c in claims for key in (c.condition, c.control) if key is not None]
    conditions = tuple(dict.fromkeys([(CLEAN, CLEAN, 0.0), *((pr, v, float(lv)) for pr, v, lv in named)]))
    return models, uniform, conditions


def check_robustness(p: Params, source: str) -> None:
    """The probes' settings, by the probe library's own checks (study.robustness.settings) on this dataset's
    image size: a grid that does not divide the image, a share outside [0, 1], an unknown corruption or one the
    image is too small for, a severity outside 0-5, a shift of the whole image; then a repeated level, an
    occlusion grid or a set of shuffle grids without the ViT's patch grid, an offset shuffle grid that is not a
    shuffle grid or whose cells are too small to offset; and a claim of the analysis plan whose condition or
    control the stage does not score, or whose model has no uniform-attention variant it names."""
    r, side = robustness_params(p), INPUT_SHAPES[p.data.dataset][0]
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
    _check_offset_grids(p, source)
    _check_plan_conditions(p, source)


def _check_offset_grids(p: Params, source: str) -> None:
    """Every offset shuffle grid is a shuffle grid (the offset shuffle is that shuffle's control: the same cells,
    off the grid) and its cells are at least 2 px, so that half a cell is at least 1 px."""
    offset_grids, side = robustness_params(p).rearrangement.offset_grids, INPUT_SHAPES[p.data.dataset][0]
    listed_once(offset_grids, f"{source}: analysis.robustness.rearrangement.offset_grids")
    where = f"{source}: analysis.robustness.rearrangement.offset_grids = {list(offset_grids)}"
    for grid in offset_grids:
        if grid not in rearrangement_grids(p):
            raise StudyError(f"{where}: {grid} is not one of the shuffle grids {list(rearrangement_grids(p))}; add "
                             f"it to analysis.robustness.rearrangement.grids or drop it here")
        if side // grid < 2:
            raise StudyError(f"{where}: the {grid}x{grid} grid's cells are {side // grid} px, too small to move by "
                             f"half a cell; drop {grid} (offset grids need cells of at least 2 px)")


def _check_plan_conditions(p: Params, source: str) -> None:
    """Each scored claim's condition and control is a condition the stage scores, and a ``<model>@uniform`` it
    names is a model with that variant (the plan's models and probe names are checked with the parameters,
    study.core.config)."""
    scored = scored_conditions(p)
    for i, claim in planned_claims(p):
        where = f"{source}: analysis.plan.claims[{i}]"
        for role, name in (("arm", claim.arm), ("against", claim.against)):
            arch = p.models[trained_model(name)].arch
            if is_variant(name) and arch not in UNIFORM_ARCHS:
                raise StudyError(f"{where}.{role} = '{name}': model '{trained_model(name)}' (arch {arch}) has no "
                                 f"uniform-attention variant (archs {', '.join(UNIFORM_ARCHS)} have); name another "
                                 "model")
        for role, condition in (("condition", claim.condition), ("control", claim.control)):
            if condition is None:
                continue
            probe, variant, level = condition
            if (probe, variant, float(level)) not in scored:
                raise StudyError(f"{where}.{role} = [{probe}, {variant}, {level:g}]: the robustness stage does not "
                                 f"score it; {_scoring_fix(p, probe, variant, float(level))}, or change the claim")


def _scoring_fix(p: Params, probe: str, variant: str, level: float) -> str:
    """How to make the stage score condition ``(probe, variant, level)``: the parameter to add it to."""
    key = "analysis.robustness"
    if probe == CLEAN:
        return "the clean images are [clean, clean, 0]"
    if probe == OCCLUSION and variant in (ALIGNED, OFFSET):
        if variant == OFFSET and not robustness_params(p).occlusion.offset:
            return f"set {key}.occlusion.offset: true"
        return f"add {level:g} to {key}.occlusion.shares (a share of the cells, in (0, 1])"
    if probe == REARRANGEMENT and variant == SHUFFLE:
        return f"add {level:g} to {key}.rearrangement.grids"
    if probe == REARRANGEMENT and variant == OFFSET:
        return f"add {level:g} to {key}.rearrangement.offset_grids (and to its grids)"
    if probe == TRANSLATION and variant in DIRECTIONS:
        return f"add {level:g} to {key}.translation.shifts"
    if probe == CORRUPTION:
        return f"add {variant} to {key}.corruptions.names and {level:g} to its severities"
    variants = {OCCLUSION: (ALIGNED, OFFSET), REARRANGEMENT: (SHUFFLE, OFFSET), TRANSLATION: tuple(DIRECTIONS)}
    return f"the variants of {probe} are {', '.join(variants[probe])}"


_LEVEL_KEYS = {"grids": "grids", "shares": "shares", "shifts": "shifts", "corruptions": "names",
               "severities": "severities"}
