"""Typed, frozen parameters of the sections every stage may read: the data, the models and their recipes, the
budget, distillation, training and the budget check; validated once at the edge.

Every stage command calls :func:`load_params` before doing any work. A bad file gives one
:class:`~study.core.errors.StudyError` line naming the key, the bad value and what is allowed; nothing is
written. Library code never sees this object whole: stage commands pick the fields each function needs.

The analyses' sections (``analysis.*``) and the engine's (``engine``) are schemas of their own, each next to the
code that reads it (``study/<question>/params.py``), read through :func:`section` by the stages that need them:
a stage's dependencies hold its own section's schema and none other, so an edit to an analysis schema leaves
every training run as it is. ``study check`` validates every section (study.tools.check).

Validation is pydantic's (field types, ranges, unknown keys); the cross-section rules that pydantic
cannot express (a teacher must be a trained baseline, …) are in :func:`_check_cross_references`. What needs a
library to check is checked where it is used, and by ``study check``: the architectures by the stages that build
models (:func:`study.models.check_archs`), the probes by the robustness stage (:func:`study.robustness.grids.
check_robustness`). This module imports neither, so the data stages run (and depend on) no model or probe code.
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
# The sections of ``analysis`` and the keys of ``engine``: each one's schema lives with the question that reads it
# (study.<question>.params); ``study check`` validates them all (study.tools.check).
ANALYSIS_SECTIONS = ("seed", "cka", "attention", "curves", "robustness", "controls", "plan")
ENGINE_KEYS = ("cpus_per_run", "gpus_per_run")


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
class CellParams:
    """Seeds of one cell (model, fraction, budget) trained as one vmapped step (study.cell), per device type: a
    small model leaves a GPU mostly idle one seed at a time, while on a 2-core CPU four stacked seeds trained 1.3x
    (ViT) and 0.9x (ResNet-8) the images per second of one. 1 trains each seed alone."""

    cpu: StrictInt = Field(default=1, ge=1)
    cuda: StrictInt = Field(default=8, ge=1)


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
    cell: CellParams = CellParams()


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
    # The analyses' sections, each validated by the question that reads it (:func:`section`), so that a stage
    # depends on its own section's schema and no other: editing an analysis schema leaves the training stages as
    # they are. Here only their names are checked (a misspelt section fails at once, not silently as a default).
    analysis: dict[StrictStr, Any] = Field(default_factory=dict)
    engine: dict[StrictStr, Any] = Field(default_factory=dict)  # optional: only `study run` reads it
    # Where these parameters came from, for the sections' error lines; set by parse_params, not a key of the file.
    source: str = dataclasses.field(default="params", init=False, compare=False, repr=False)
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
    object.__setattr__(params, "source", source)  # frozen: set once, here
    _check_cross_references(params, source)
    return params


_MISSING = object()


def section(params: Params, key: str, schema: Any, default: Any = _MISSING) -> Any:
    """The section ``key`` of ``params`` (``"analysis.robustness"``, ``"engine"``) validated as ``schema`` (a
    frozen dataclass, or any type pydantic validates); absent, ``default`` (when given) or the schema's defaults.
    A bad value raises the one-line StudyError that :func:`parse_params` raises for the core sections."""
    top, *rest = key.split(".")
    raw = getattr(params, top)
    for part in rest:
        raw = raw.get(part, _MISSING) if isinstance(raw, dict) else _MISSING
    if raw is _MISSING:
        if default is not _MISSING:
            return default
        raw = {}
    try:
        return TypeAdapter(schema).validate_python(raw)
    except ValidationError as err:
        raise StudyError(_first_error(err, params.source, prefix=key)) from None


def _first_error(err: ValidationError, source: str, prefix: str = "") -> str:
    first = err.errors()[0]
    key = ".".join([prefix] * bool(prefix) + [str(part) for part in first["loc"]]) or "(top level)"
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
    _check_budget_check(p, source)
    for part, names in (("analysis", ANALYSIS_SECTIONS), ("engine", ENGINE_KEYS)):
        for name in getattr(p, part):
            if name not in names:
                fail(f"unknown key '{part}.{name}'; remove it or check its spelling ({part} has {', '.join(names)})")
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
