"""Typed, frozen parameters: one dataclass per ``params.yaml`` section, validated once at the edge.

Every stage command calls :func:`load_params` before doing any work. A bad file gives one
:class:`~study.core.errors.StudyError` line naming the key, the bad value and what is allowed; nothing is
written. Library code never sees this object whole: stage commands pick the fields each function needs.

Validation is pydantic's (field types, ranges, unknown keys); the cross-section rules that pydantic
cannot express (a teacher must be a trained baseline, …) are in :func:`_check_cross_references`. What needs a
library to check is checked where it is used, and by ``study check``: the architectures by the stages that build
models (:func:`study.models.check_archs`), the probes by the robustness stage (:func:`study.robustness.grids.
check_robustness`). This module imports neither, so the data stages run (and depend on) no model or probe code.

Longer than most modules (about 400 lines) because it is the whole schema, one section after another: a reader
looking up a key finds every key here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, TypeAdapter
from pydantic import ValidationError
from pydantic.dataclasses import dataclass

from study.core.errors import StudyError
from study.core.io import read_yaml

# (image size, channels) of each dataset, for sizing models before any data is read.
INPUT_SHAPES = {"fashionmnist": (28, 1), "cifar10": (32, 3), "cifar100": (32, 3), "digits": (8, 1)}
NUM_CLASSES = {"fashionmnist": 10, "cifar10": 10, "cifar100": 100, "digits": 10}

_FROZEN = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_FROZEN)
class DataParams:
    dataset: Literal["fashionmnist", "cifar10", "cifar100", "digits"]
    # Folder searched first for the raw files (and where a download lands when online).
    root: StrictStr = "data/raw"
    # Stratified share of the training set held out for validation; never trained on.
    val_fraction: StrictFloat = Field(default=0.1, gt=0.0, lt=1.0)
    # Seed of the validation split: the split is the same for every training seed.
    split_seed: StrictInt = Field(default=0, ge=0)
    download: StrictBool = True


@dataclass(frozen=True, config=_FROZEN)
class ScrambleParams:
    """The ``scrambled`` data condition (study.data.scramble): one fixed shuffle of the ``cell``×``cell`` cells of
    every image and one fixed shuffle of the pixels inside every cell, both drawn from ``seed``."""

    cell: StrictInt = Field(gt=0)  # pixels per cell side: the ViT's patch size, so a patch is a cell
    seed: StrictInt = Field(default=0, ge=0)


@dataclass(frozen=True, config=_FROZEN)
class AugmentParams:
    """Training augmentation, batched on the device (study.train.augment). Everything is off by default."""

    crop_padding: StrictInt = Field(default=0, ge=0)  # random crop after zero padding
    hflip: StrictBool = False
    # TrivialAugment (Müller & Hutter 2021) or RandAugment (Cubuk et al. 2020), operations drawn per image
    auto_augment: Literal["none", "trivial", "rand"] = "none"
    rand_n: StrictInt = Field(default=2, ge=1, le=14)  # RandAugment: operations per image (14 candidates on grey images)
    rand_m: StrictInt = Field(default=9, ge=1, le=29)  # RandAugment: magnitude on Kornia's scale, 0 to 30 exclusive
    erasing: StrictFloat = Field(default=0.0, ge=0.0, le=1.0)  # random-erasing probability per image (Zhong et al. 2020)
    mixup_alpha: StrictFloat = Field(default=0.0, ge=0.0)  # Mixup λ ~ Beta(α, α); 0 = off
    cutmix_alpha: StrictFloat = Field(default=0.0, ge=0.0)  # CutMix λ ~ Beta(α, α); 0 = off
    mix_prob: StrictFloat = Field(default=1.0, ge=0.0, le=1.0)  # share of batches mixed when either is on


@dataclass(frozen=True, config=_FROZEN)
class ModelParams:
    """One trained model: its architecture and its optimisation recipe."""

    arch: StrictStr  # a name from study.models.MODEL_NAMES, or "timm:<name>"
    arch_args: dict[str, Any] = Field(default_factory=dict)  # keyword overrides for build_model
    optimizer: Literal["adamw", "sgd"] = "adamw"
    lr: StrictFloat = Field(default=1e-3, gt=0.0)
    weight_decay: StrictFloat = Field(default=0.05, ge=0.0)
    momentum: StrictFloat = Field(default=0.9, ge=0.0, lt=1.0)  # SGD only (Nesterov)
    beta2: StrictFloat = Field(default=0.999, gt=0.0, lt=1.0)  # AdamW only
    label_smoothing: StrictFloat = Field(default=0.0, ge=0.0, lt=1.0)
    grad_clip: StrictFloat = Field(default=0.0, ge=0.0)  # max global grad norm; 0 = off
    warmup: StrictFloat = Field(default=0.05, ge=0.0, lt=1.0)  # share of steps with linear warmup
    # What was tuned, and among which values, on the validation split before this recipe was fixed, e.g.
    # {lr: [0.1, 0.2, 0.4]}. Recorded so the report can say so; empty = set a priori.
    selected_on_validation: dict[StrictStr, list[Any]] = Field(default_factory=dict)
    # This model's training augmentation; none given = train.augment, the study-wide default.
    augment: AugmentParams | None = None
    # The data condition: none = natural images; given = this model trains, validates and is tested on scrambled
    # images (what a prior costs where its assumption is false).
    scramble: ScrambleParams | None = None


@dataclass(frozen=True, config=_FROZEN)
class DistillParams:
    """DeiT-style distillation of ``student`` from ``teacher`` (Touvron et al. 2021, §4)."""

    student: StrictStr = "deit"
    teacher: StrictStr = "resnet"
    kind: Literal["none", "soft", "hard"] = "hard"
    alpha: StrictFloat = Field(default=0.1, ge=0.0, le=1.0)  # soft only: weight of the KL term
    tau: StrictFloat = Field(default=3.0, gt=0.0)  # soft only: temperature


@dataclass(frozen=True, config=_FROZEN)
class BudgetParams:
    """The same optimiser steps and batch for every model at a fraction (see study.train.budget)."""

    batch_size: StrictInt = Field(default=128, gt=0)
    # Epochs over the full (fraction 1.0) training set.
    epochs: StrictFloat = Field(default=3.0, gt=0.0)
    # "epochs": every fraction trains `epochs` epochs of its own data, at least `min_steps` steps.
    # "images": every fraction sees as many images as the full-data run (ConViT, Table 2).
    convention: Literal["epochs", "images"] = "epochs"
    min_steps: StrictInt = Field(default=0, ge=0)


@dataclass(frozen=True, config=_FROZEN)
class BudgetCheckParams:
    """The budget check (stage ``budget_check``): the runs of ``fractions`` (every trained model, every seed)
    trained again with ``factor`` times the budget (``budget.epochs`` and ``budget.min_steps`` scaled; the cosine
    schedule spans the longer run), and each model x fraction called *converged* only where the Holm-adjusted
    interval of the paired test top-1 change lies within +-``tolerance`` (study.budget_check.check)."""

    # Each one of the study's fractions; [] checks none (dvc.yaml's train_2x matrix is then empty, and every
    # comparison is flagged as not shown free of the budget): a preset that cannot afford the longer runs says so.
    fractions: tuple[StrictFloat, ...] = ()
    factor: StrictFloat = Field(default=2.0, gt=1.0)  # budget multiplier of the longer runs
    tolerance: StrictFloat = Field(default=0.01, gt=0.0, lt=1.0)  # top-1 change (a share) still called converged
    # Seeds beyond the study's, trained at the checked fractions only, at both budgets (stages check_1x, check_2x
    # and their distill twins): they narrow the check's intervals without entering the study's curves or analyses.
    seeds: tuple[StrictInt, ...] = ()


@dataclass(frozen=True, config=_FROZEN)
class TrainParams:
    device: Literal["auto", "cpu", "cuda"] = "auto"
    compile: StrictBool = False
    # The training step captured once as a CUDA graph and replayed (study.train.graphed): "auto" on CUDA,
    # "off" the eager step everywhere. CPU runs always take the eager step.
    graph: Literal["auto", "off"] = "auto"
    # Forward-pass precision: "auto" is bf16 autocast on CUDA and float32 on CPU; "bf16" forces autocast on
    # any device (CI runs the GPU path's dtypes on CPU with it); "fp32" never autocasts.
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    threads: StrictInt = Field(default=0, ge=0)  # torch intra-op threads; 0 = torch's default
    deterministic: StrictBool = True
    # Small batches evaluate fastest on CPU (cache-resident activations: ResNet-8 scored 1.7x more images
    # per second at 128 than at 256 on the 2-core CPU); GPU presets set thousands.
    eval_batch_size: StrictInt = Field(default=128, gt=0)
    checkpoint_every: StrictInt = Field(default=200, gt=0)  # optimiser steps between resume points
    augment: AugmentParams = AugmentParams()


@dataclass(frozen=True, config=_FROZEN)
class CkaParams:
    images: StrictInt = Field(default=2000, ge=4)  # test images the representations are taken on
    batch_size: StrictInt = Field(default=250, ge=4)  # unbiased HSIC needs n >= 4 per batch
    kernel: Literal["linear", "rbf"] = "linear"
    rbf_threshold: StrictFloat = Field(default=1.0, gt=0.0)


@dataclass(frozen=True, config=_FROZEN)
class AttentionParams:
    images: StrictInt = Field(default=128, gt=0)  # images averaged for mean attention distance
    show: StrictInt = Field(default=4, gt=0)  # images drawn in the attention-map figures


@dataclass(frozen=True, config=_FROZEN)
class CurvesParams:
    confidence: StrictFloat = Field(default=0.95, gt=0.0, lt=1.0)


@dataclass(frozen=True, config=_FROZEN)
class ControlsParams:
    """Stage ``controls``: each listed arm against the model it changes one thing of (``[arm, against]``), on the
    clean test images and under every robustness probe, paired by seed, one model over the fractions."""

    pairs: tuple[tuple[StrictStr, StrictStr], ...] = ()
    # A ViT without position embedding and the ViT it is a twin of, [twin, vit]: whether the twin keeps more of its
    # accuracy under the patch-grid shuffle, per fraction (the position hypothesis); none: not asked.
    position: tuple[StrictStr, StrictStr] | None = None


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


# The probes a planned condition may name, as the robustness stage's tables name them (study.robustness.scoring).
PROBE_NAMES = ("clean", "occlusion", "rearrangement", "translation", "corruption")
# A model name with this suffix is the trained model scored with uniform attention (study.robustness.UNIFORM).
UNIFORM_SUFFIX = "@uniform"


@dataclass(frozen=True, config=_FROZEN)
class ClaimParams:
    """One primary claim of the analysis plan: ``arm − against`` in test top-1 under ``condition``, paired by seed
    and averaged over the fractions, in ``direction`` (+1: the arm ahead, −1: behind, 0: any difference).

    With a ``control`` (a condition whose damage matches ``condition``'s in amount, e.g. the same shuffle off the
    ViT's patch grid) the claim is also tested as an interaction: per seed, the contrast under ``condition`` minus
    the contrast under ``control``. "Only under ``condition``" needs that interaction to exclude 0 and the contrast
    under ``control`` to lie inside the smallest effect of interest (study.stats.verdicts)."""

    name: StrictStr  # a short identifier, as the tables name the claim
    claim: StrictStr  # the claim in words, as the findings table prints it
    arm: StrictStr
    against: StrictStr
    condition: tuple[StrictStr, StrictStr, float]  # (probe, variant, level), as the robustness tables key them
    direction: Literal[-1, 0, 1] = 0
    control: tuple[StrictStr, StrictStr, float] | None = None
    control_means: StrictStr = ""  # what the control varies, in words ("off the ViT's patch grid")


@dataclass(frozen=True, config=_FROZEN)
class PlanEffects:
    """The smallest effects of interest (shares of top-1): what the plan is powered to detect, and the margin a
    "no effect" must lie within."""

    clean: StrictFloat = Field(default=0.02, gt=0.0, lt=1.0)  # a contrast on the clean test images
    robustness: StrictFloat = Field(default=0.05, gt=0.0, lt=1.0)  # a contrast, or an interaction, under a probe


@dataclass(frozen=True, config=_FROZEN)
class LadderCondition:
    """A condition every step of a ladder is tested under, with its matched control (as a claim's)."""

    name: StrictStr  # a short tag for the claims' names ("clean", "shuffle_7")
    words: StrictStr  # the condition in words, as a claim prints it ("on clean images")
    condition: tuple[StrictStr, StrictStr, float]
    control: tuple[StrictStr, StrictStr, float] | None = None
    control_means: StrictStr = ""


@dataclass(frozen=True, config=_FROZEN)
class LadderParams:
    """A ladder (study.models.ladder; ConvNeXt's design, Liu et al. 2022, run backwards): models each one change from
    the one before. Every adjacent step (``rungs[k+1] − rungs[k]``) and every ``side`` pair ([arm, against]) is a
    claim of the plan under each of ``conditions``, testing any difference (direction 0): the plan's claims are
    the ones it lists and these (:meth:`claims`), one Holm family."""

    rungs: tuple[StrictStr, ...] = Field(min_length=2)
    conditions: tuple[LadderCondition, ...] = Field(min_length=1)
    side: tuple[tuple[StrictStr, StrictStr], ...] = ()

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """``(arm, against)``: each step up the ladder, then the side pairs."""
        return tuple(zip(self.rungs[1:], self.rungs[:-1])) + tuple(tuple(pair) for pair in self.side)

    def claims(self) -> tuple[ClaimParams, ...]:
        return tuple(ClaimParams(name=f"{arm}_vs_{against}_{c.name}", claim=f"{arm} differs from {against} {c.words}",
                                 arm=arm, against=against, condition=c.condition, direction=0, control=c.control,
                                 control_means=c.control_means)
                     for arm, against in self.pairs() for c in self.conditions)


@dataclass(frozen=True, config=_FROZEN)
class PlanParams:
    """The analysis plan (stage ``plan``): the primary claims, judged together as one Holm family; every other
    interval the study reports is exploratory (no verdict). params.yaml says why each value was chosen."""

    # Whether the plan was written before the runs it judges ("before_runs") or after some of them ("after_runs");
    # `history` says when, and what had been seen. The report prints both.
    declared: Literal["before_runs", "after_runs"]
    history: StrictStr
    seeds: StrictInt = Field(ge=3)  # the seeds the verdicts rest on (at least; a study may run more)
    images: StrictInt = Field(default=10000, ge=1)  # test images each planned condition is scored on (all, if fewer)
    effects: PlanEffects = PlanEffects()
    alpha: StrictFloat = Field(default=0.05, gt=0.0, lt=1.0)  # two-sided level of the family, before Holm
    power: StrictFloat = Field(default=0.8, gt=0.0, lt=1.0)  # the power the seeds needed are computed for
    claims: tuple[ClaimParams, ...] = ()  # with a ladder, followed by its claims (parse_params adds them)
    ladder: LadderParams | None = None

    def conditions(self) -> tuple[tuple[str, str, float], ...]:
        """Every condition a claim names (its own and its control), each once, in the plan's order."""
        keys = [key for c in self.claims for key in (c.condition, c.control) if key is not None]
        return tuple(dict.fromkeys((probe, variant, float(level)) for probe, variant, level in keys))

    def models(self) -> tuple[str, ...]:
        """Every model a claim names, each once (``<model>@uniform`` included as named)."""
        return tuple(dict.fromkeys(name for c in self.claims for name in (c.arm, c.against)))


@dataclass(frozen=True, config=_FROZEN)
class AnalysisParams:
    seed: StrictInt = Field(default=0, ge=0)  # the training seed whose runs CKA/attention inspect
    cka: CkaParams = CkaParams()
    attention: AttentionParams = AttentionParams()
    curves: CurvesParams = CurvesParams()
    robustness: RobustnessParams = RobustnessParams()
    controls: ControlsParams = ControlsParams()
    plan: PlanParams | None = None  # none: no primary claims, every interval exploratory


@dataclass(frozen=True, config=_FROZEN)
class EngineParams:
    """What ``study run`` (study/infra/engine) reserves on Ray for each stage. No stage depends on it in dvc.yaml:
    it decides where and how many stages run at once, not what they compute."""

    # CPUs reserved per training run, and its torch intra-op threads. None: train.threads, the threads
    # `dvc repro` trains with (0 = torch's default, all of a node's cores), so results stay identical;
    # fewer threads run more stages at once but change a CPU run's last bits (docs/pipeline.md, "Running stages
    # in parallel").
    cpus_per_run: StrictInt | None = Field(default=None, ge=1)
    # Share of one GPU reserved per stage on a cluster with GPUs (0.25: four runs per GPU); ignored without one.
    gpus_per_run: StrictFloat = Field(default=0.25, ge=0.0, le=1.0)


@dataclass(frozen=True, config=_FROZEN)
class Params:
    data: DataParams
    fractions: tuple[StrictFloat, ...] = Field(min_length=1)
    seeds: tuple[StrictInt, ...] = Field(min_length=1)
    baselines: tuple[StrictStr, ...] = Field(min_length=1)  # models trained from labels alone
    models: dict[StrictStr, ModelParams] = Field(min_length=1)
    budget: BudgetParams = BudgetParams()
    # params.yaml lists the distillations (``distill: [...]``, at most one for now) so that dvc.yaml's distill
    # stages, a matrix over that list, vanish for ``distill: []``; parse_params hands this field the one or None.
    distill: DistillParams | None = None
    train: TrainParams = TrainParams()
    analysis: AnalysisParams = AnalysisParams()
    engine: EngineParams = EngineParams()  # optional: only `study run` reads it
    budget_check: BudgetCheckParams | None = None  # optional: none = no budget check

    @property
    def trained_models(self) -> tuple[str, ...]:
        """Every model the study trains, teachers before students."""
        student = (self.distill.student,) if self.distill else ()
        return (*self.baselines, *student)

    @property
    def check_seeds(self) -> tuple[int, ...]:
        """Every seed of the budget check: the study's, then budget_check.seeds (none without a budget check)."""
        return (*self.seeds, *self.budget_check.seeds) if self.budget_check else ()

    @property
    def subset_seeds(self) -> tuple[int, ...]:
        """Every seed that needs training subsets: the study's and the budget check's extra ones."""
        return self.check_seeds or self.seeds


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate ``path``; raise a one-line StudyError on the first problem found."""
    raw = read_yaml(path, "run from the project root or pass --params")
    return parse_params(raw, source=str(path))


def parse_params(raw: Any, source: str = "params") -> Params:
    """Validate an already-loaded mapping (what ``params.yaml`` holds)."""
    if not isinstance(raw, dict):
        raise StudyError(f"{source}: expected a mapping of sections at the top level")
    _check_fraction_spelling(raw, source)
    raw = {**raw, "distill": _one_distillation(raw, source)}
    _check_fraction_spelling(raw.get("budget_check") if isinstance(raw.get("budget_check"), dict) else {}, source,
                             "budget_check.fractions")
    try:
        params = TypeAdapter(Params).validate_python(raw)
    except ValidationError as err:
        raise StudyError(_first_error(err, source)) from None
    params = _with_ladder_claims(params)
    _check_cross_references(params, source)
    return params


def _with_ladder_claims(p: Params) -> Params:
    """``p`` with its plan's ladder (if any) written out as claims after the listed ones: every reader of the plan
    sees one list of claims."""
    plan = p.analysis.plan
    if plan is None or plan.ladder is None:
        return p
    listed = tuple(c for c in plan.claims if c not in plan.ladder.claims())  # each claim once
    plan = dataclasses.replace(plan, claims=listed + plan.ladder.claims())
    return dataclasses.replace(p, analysis=dataclasses.replace(p.analysis, plan=plan))


def _first_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "(top level)"
    if first["type"] == "unexpected_keyword_argument":
        return f"{source}: unknown key '{key}'; remove it or check its spelling"
    if first["type"] in ("missing", "missing_argument", "missing_keyword_argument"):
        return f"{source}: missing key '{key}'; add it (params.yaml holds every key)"
    value = repr(first.get("input"))
    value = value if len(value) <= 60 else value[:57] + "..."
    return f"{source}: {key} = {value}: {first['msg']}"


def _one_distillation(raw: dict, source: str) -> Any:
    """``distill``'s list as the one distillation it holds, or None for ``[]``."""
    example = "e.g. `distill: [{student: deit, teacher: resnet, kind: hard}]`, or `distill: []` for none"
    if "distill" not in raw:
        raise StudyError(f"{source}: missing key 'distill' (dvc.yaml's distill stages iterate it); add it, {example}")
    listed = raw["distill"]
    if not isinstance(listed, list):
        raise StudyError(f"{source}: distill = {str(listed)[:40]!s}: must be a list of distillations (dvc.yaml's "
                         f"distill stages iterate it); {example}")
    if len(listed) > 1:
        raise StudyError(f"{source}: distill lists {len(listed)} distillations; a study has at most one for now")
    return listed[0] if listed else None


def _check_fraction_spelling(raw: dict, source: str, key: str = "fractions") -> None:
    # DVC renders `${item.fraction}` from the YAML text, so `1` would name a folder "f1" while the
    # code would write "f1.0". Requiring a decimal point keeps both spellings identical.
    for i, value in enumerate(raw.get("fractions") or []):
        if isinstance(value, int) and not isinstance(value, bool):
            raise StudyError(f"{source}: {key}[{i}] = {value}: write fractions as decimals, e.g. {value}.0")


def _check_cross_references(p: Params, source: str) -> None:
    def fail(message: str) -> None:
        raise StudyError(f"{source}: {message}")

    for i, f in enumerate(p.fractions):
        if not 0.0 < f <= 1.0:
            fail(f"fractions[{i}] = {f}: fractions must lie in (0, 1]")
    for name, values in (("fractions", p.fractions), ("seeds", p.seeds), ("baselines", p.baselines)):
        listed_once(values, f"{source}: {name}")
    if any(s < 0 for s in p.seeds):
        fail(f"seeds = {list(p.seeds)}: seeds must be non-negative integers")
    for name in p.baselines:
        if name not in p.models:
            fail(f"baselines: '{name}' has no entry under models (defined: {sorted(p.models)})")
    _check_scramble(p, source)
    if p.analysis.seed not in p.seeds:
        fail(f"analysis.seed = {p.analysis.seed}: must be one of seeds {list(p.seeds)}")
    if p.analysis.cka.batch_size > p.analysis.cka.images:
        fail("analysis.cka.batch_size must not exceed analysis.cka.images")
    _check_budget_check(p, source)
    # A pair names models defined under `models` (a typo fails here); one whose models the study does not train
    # (a preset that drops the student) is skipped by the stage, so presets need not repeat the list.
    for i, pair in enumerate(p.analysis.controls.pairs):
        for name in pair:
            if name not in p.models:
                fail(f"analysis.controls.pairs[{i}] names '{name}', not a model of the study ({sorted(p.models)}); "
                     "define it under models or drop the pair from analysis.controls.pairs")
        if pair[0] == pair[1]:
            fail(f"analysis.controls.pairs[{i}] compares '{pair[0]}' with itself; name two different models")
    for name in p.analysis.controls.position or ():
        if name not in p.models:
            fail(f"analysis.controls.position names '{name}', not a model of the study ({sorted(p.models)}); name "
                 "the ViT without position embedding and its ViT")
    _check_plan(p, source)
    if p.distill is not None:
        d = p.distill
        if d.student not in p.models:
            fail(f"distill.student = '{d.student}' has no entry under models (defined: {sorted(p.models)})")
        if d.student in p.baselines:
            fail(f"distill.student = '{d.student}' is also a baseline; a model is trained one way")
        if p.models[d.student].arch != "deit":
            fail(f"distill.student = '{d.student}' has arch '{p.models[d.student].arch}'; it needs arch 'deit'")
        if d.kind != "none" and d.teacher not in p.baselines:
            fail(f"distill.teacher = '{d.teacher}' must be one of baselines {list(p.baselines)}")


def _check_plan(p: Params, source: str) -> None:
    """The plan's claims name models the study defines (or their uniform-attention variants), known probes and
    distinct claim names; it rests on no more seeds than the study runs. Whether each condition is one the
    robustness stage scores is checked with the probes (study.robustness.grids.check_robustness)."""
    plan = p.analysis.plan
    if plan is None:
        return
    key = "analysis.plan"
    if len(p.seeds) < plan.seeds:
        raise StudyError(f"{source}: {key}.seeds = {plan.seeds} but seeds lists {len(p.seeds)}; run at least "
                         f"{plan.seeds} seeds or lower {key}.seeds")
    if plan.ladder is not None:
        listed_once(plan.ladder.rungs, f"{source}: {key}.ladder.rungs")
        listed_once([c.name for c in plan.ladder.conditions], f"{source}: {key}.ladder.conditions names")
    listed_once([c.name for c in plan.claims], f"{source}: {key}.claims names")
    for i, c in enumerate(plan.claims):
        for role, name in (("arm", c.arm), ("against", c.against)):
            if name.removesuffix(UNIFORM_SUFFIX) not in p.models:
                raise StudyError(f"{source}: {key}.claims[{i}].{role} = '{name}' is not a model of the study "
                                 f"({sorted(p.models)}, or <model>{UNIFORM_SUFFIX}); define it under models")
        if c.arm == c.against:
            raise StudyError(f"{source}: {key}.claims[{i}] compares '{c.arm}' with itself; name two models")
        for role, condition in (("condition", c.condition), ("control", c.control)):
            if condition is not None and condition[0] not in PROBE_NAMES:
                raise StudyError(f"{source}: {key}.claims[{i}].{role} = {list(condition)}: unknown probe "
                                 f"'{condition[0]}'; choose from {', '.join(PROBE_NAMES)}")
        if c.control is not None and tuple(c.control) == tuple(c.condition):
            raise StudyError(f"{source}: {key}.claims[{i}].control is its condition; give the matched condition "
                             "that differs in the one way the claim is about")


def _check_scramble(p: Params, source: str) -> None:
    """Every scrambled model of a study sees the same scramble (so their results compare), whose cell divides the
    images; distillation stays on natural images (its teacher labels the student's views as they are)."""
    scrambled = {name: m.scramble for name, m in p.models.items()
                 if m.scramble is not None and name in p.trained_models}
    if not scrambled:
        return
    side = INPUT_SHAPES[p.data.dataset][0]
    for name, s in scrambled.items():
        if side % s.cell:
            raise StudyError(f"{source}: models.{name}.scramble.cell = {s.cell} does not divide the {side}-pixel "
                             f"images of {p.data.dataset}; use a divisor (the ViT's patch size)")
    first, *others = scrambled.items()
    for name, s in others:
        if s != first[1]:
            raise StudyError(f"{source}: models.{name}.scramble = {s} differs from models.{first[0]}.scramble = "
                             f"{first[1]}; give every scrambled model the same cell and seed")
    if p.distill is not None and {p.distill.student, p.distill.teacher} & scrambled.keys():
        raise StudyError(f"{source}: distill: the student and teacher train on natural images; remove scramble "
                         "from their models entries")


def _check_budget_check(p: Params, source: str) -> None:
    """The checked fractions are fractions the study trains, each listed once."""
    if p.budget_check is None:
        return
    listed = list(p.budget_check.fractions)
    for i, f in enumerate(listed):
        if f not in p.fractions:
            raise StudyError(f"{source}: budget_check.fractions[{i}] = {f}: not one of fractions {list(p.fractions)}; "
                             "check only fractions the study trains")
    listed_once(listed, f"{source}: budget_check.fractions")
    extra = list(p.budget_check.seeds)
    if extra and not listed:
        raise StudyError(f"{source}: budget_check.seeds = {extra} with no budget_check.fractions; name the fractions "
                         "the extra seeds check, or remove the seeds")
    shared = sorted(set(extra) & set(p.seeds))
    if shared:
        raise StudyError(f"{source}: budget_check.seeds = {extra}: {shared} already in seeds {list(p.seeds)}; "
                         "list only extra seeds there (the study's seeds are always checked)")
    if any(s < 0 for s in extra):
        raise StudyError(f"{source}: budget_check.seeds = {extra}: seeds must be non-negative integers")
    listed_once(extra, f"{source}: budget_check.seeds")


def listed_once(values, where: str) -> None:
    """Fail when a list of settings names a value twice (a repeated level would count twice in every table)."""
    values = list(values)
    dupes = sorted({v for v in values if values.count(v) > 1})
    if dupes:
        raise StudyError(f"{where} = {values}: duplicate value(s) {dupes}; list each once")
