"""Stage ``train``: one model, one fraction, one seed, from validated params to a finished run.

This is where params meet the training library: it checks the request against params, builds the model (and
for a distilled student the loss around the teacher trained on the same fraction and seed), plans the budget, and
builds the run's one :class:`study.train.loop.TrainSpec` (whose fingerprint covers everything that determines the
run, so a stale resume state is ignored) for :func:`study.train.loop.train_run`. ``study levers`` calls :func:`run`
too, so a trial is exactly a run of the pipeline. ``--budget check`` scales the budget by ``budget_check.factor`` for the
budget check's longer runs; such a run records the factor in its spec and metrics.

Several ``--seed`` (each with its ``--subset``, ``--run`` and ``--teacher``) train as one cell (:func:`run_cell`,
:mod:`study.cell`): each seed is built exactly as alone, then all take one vmapped step together. Every stage of
dvc.yaml names one seed; ``study run`` joins the commands of a cell's stages when ``train.cell`` asks for it on the
device (docs/pipeline.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from study.core import runtime
from study.core.config import BudgetParams, Params
from study.data.prepared import read_prepared, sha256
from study.data.scramble import draw_scramble, scramble_images, scramble_setting
from study.data.subsets import read_subset
from study.core.errors import StudyError
from study.archs import traits
from study.models import build_model, check_archs
from study.models.cost import count_parameters, forward_flops
from study.core.entry import configured
from study.train.budget import Budget, plan_budget
from study.train.loop import RunData, RunPaths, TrainSpec, train_run
from study.train.losses import LabelLoss
from study.train.recipe import recipe_from_params
from study.train.spec import RunSpec
from study.train.teacher import distillation_loss


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="a key of `models` in params")
    parser.add_argument("--fraction", type=float, required=True)
    parser.add_argument("--seed", type=int, required=True, action="append",
                        help="the run's seed; repeated (with --subset, --run and --teacher repeated in the same "
                        "order), the seeds train as one cell, one vmapped step (study.cell)")
    parser.add_argument("--prepared", type=Path, required=True)
    parser.add_argument("--subset", type=Path, required=True, action="append",
                        help="index file of the training subset")
    parser.add_argument("--validation", type=Path, required=True, help="index file of the validation split")
    parser.add_argument("--teacher", type=Path, action="append",
                        help="the teacher's model.pt (a distilled student only)")
    parser.add_argument("--run", type=Path, required=True, action="append",
                        help="the run's folder: model.pt, init.pt, predictions.npy, metrics.json, history.csv, and "
                        "resume.pt, the resume state kept across kills")
    parser.add_argument("--budget", choices=("study", "check"), default="study",
                        help="study: the study's budget (default); check: budget_check.factor times it (budget.epochs "
                        "and budget.min_steps), the budget check's longer runs")


def main(args: argparse.Namespace) -> str:
    seeds, subsets, folders, teachers = args.seed, args.subset, args.run, args.teacher
    if not len(seeds) == len(subsets) == len(folders) or (teachers and len(teachers) != len(seeds)):
        raise StudyError(f"{len(seeds)} --seed, {len(subsets)} --subset, {len(folders)} --run and "
                         f"{len(teachers or [])} --teacher: give one of each per seed (no --teacher but for a student)")
    if len(set(seeds)) != len(seeds):
        raise StudyError(f"--seed {' '.join(map(str, seeds))}: a seed given twice; give each seed once")
    params = configured(args.params)
    if args.budget == "check" and params.budget_check is None:
        raise StudyError(f"--budget check: {args.params} has no budget_check section; add one or train at --budget study")
    factor = params.budget_check.factor if args.budget == "check" else 1.0
    teachers = teachers or [None] * len(seeds)
    if len(seeds) > 1:
        return run_cell(params, args.model, args.fraction, seeds, args.prepared, subsets, args.validation, teachers,
                        folders, factor)
    folder = folders[0]
    return run(params, args.model, args.fraction, seeds[0], args.prepared, subsets[0],
               args.validation, teachers[0], folder / "model.pt", folder / "metrics.json", folder / "history.csv",
               folder / "resume.pt", folder / "predictions.npy", factor)


def run(params: Params, model_name: str, fraction: float, seed: int, prepared: Path, subset: Path,
        validation: Path, teacher: Path | None, checkpoint: Path, metrics: Path, history: Path, resume: Path,
        predictions: Path, budget_factor: float = 1.0) -> str:
    """Train ``model_name`` of ``params`` on ``subset`` (indices into ``prepared``), writing the run's files;
    ``budget_factor`` times the study's budget (:func:`scaled_budget`)."""
    device = _checked(params, model_name, fraction, [seed], budget_factor)
    paths = RunPaths(checkpoint=checkpoint, metrics=metrics, history=history, resume=resume, predictions=predictions,
                     initial=checkpoint.with_name("init.pt"))
    data, val_idx = read_prepared(prepared), read_subset(validation)
    built = _built(params, model_name, fraction, seed, data, subset, val_idx, teacher, paths, budget_factor, device)
    return _summary(built[0], train_run(*built))


def run_cell(params: Params, model_name: str, fraction: float, seeds: list[int], prepared: Path, subsets: list[Path],
             validation: Path, teachers: list[Path | None], folders: list[Path], budget_factor: float = 1.0) -> str:
    """Train ``seeds`` of one model and fraction as one cell (:func:`study.cell.loop.train_cell`), each on its own
    subset into its own folder, with exactly the files :func:`run` writes for it."""
    from study.cell.loop import train_cell  # torch.func's vmap: only when a cell trains

    device = _checked(params, model_name, fraction, seeds, budget_factor)
    data, val_idx = read_prepared(prepared), read_subset(validation)
    built = []
    for seed, subset, teacher, folder in zip(seeds, subsets, teachers, folders):
        paths = RunPaths(checkpoint=folder / "model.pt", metrics=folder / "metrics.json", history=folder / "history.csv",
                         resume=folder / "resume.pt", predictions=folder / "predictions.npy",
                         initial=folder / "init.pt")
        built.append(_built(params, model_name, fraction, seed, data, subset, val_idx, teacher, paths, budget_factor,
                            device))
    specs, models, losses, images = (list(parts) for parts in zip(*built))
    results = train_cell(specs, models, losses, images)
    budget, top1 = specs[0].budget, ", ".join(f"{m['test_top1']:.4f}" for m in results)
    scaled = f" (budget x{budget_factor:g})" if budget_factor != 1.0 else ""
    return (f"train: {model_name} fraction {fraction} seeds {', '.join(map(str, seeds))} as one cell{scaled}: test "
            f"top-1 {top1} after {budget.steps} steps x {budget.batch_size} each, in {results[0]['train_seconds']:.0f}s, "
            f"{sum(m['throughput_images_per_s'] for m in results):.0f} img/s on {results[0]['device']}")


def _checked(params: Params, model_name: str, fraction: float, seeds: list[int], budget_factor: float):
    """The device runs train on, once the request is checked against params."""
    if model_name not in params.trained_models:
        raise StudyError(f"--model {model_name}: not a trained model of this study ({list(params.trained_models)})")
    checked = params.budget_check is not None and fraction in params.budget_check.fractions
    allowed = params.check_seeds if checked else params.seeds
    if fraction not in params.fractions or any(seed not in allowed for seed in seeds):
        raise StudyError(f"--fraction {fraction} --seed {' '.join(map(str, seeds))}: not in params fractions/seeds "
                         "(nor, at a fraction in budget_check.fractions, in budget_check.seeds)")
    if not budget_factor > 0:
        raise StudyError(f"--budget-factor {budget_factor}: must be positive (1 = the study's budget)")
    recipe_params = params.models[model_name]
    teacher_name = params.distill.teacher if params.distill and model_name == params.distill.student else None
    check_archs({name: params.models[name].arch for name in filter(None, (model_name, teacher_name))}, "params")
    return runtime.pick_device(params.train.device)


def _built(params: Params, model_name: str, fraction: float, seed: int, data, subset: Path, val_idx: np.ndarray,
           teacher: Path | None, paths: RunPaths, budget_factor: float, device):
    """One run's spec, initial model, loss and images: its weights drawn from ``seed`` as a run alone draws them."""
    recipe_params = params.models[model_name]
    runtime.seed_everything(seed)
    train_idx = read_subset(subset)
    full_images = len(data.train_labels) - len(val_idx)
    budget = scaled_budget(params.budget, len(train_idx), full_images, budget_factor)

    # The data condition: a scrambled model sees every image, train, validation and test, through one fixed scramble.
    scramble, setting = None, recipe_params.scramble
    if setting is not None:
        scramble = draw_scramble(data.image_size, data.image_size, setting.cell, setting.seed)

    def view(images):
        return images if scramble is None else scramble_images(np.asarray(images), scramble)

    model = build_model(recipe_params.arch, data.num_classes, data.image_size, data.in_chans, **recipe_params.arch_args)
    run_spec = RunSpec(
        model_name=model_name, arch=recipe_params.arch, arch_args=dict(recipe_params.arch_args),
        num_classes=data.num_classes, image_size=data.image_size, in_chans=data.in_chans,
        fraction=fraction, seed=seed, params=count_parameters(model),
        forward_flops=forward_flops(model, data.image_size, data.in_chans), budget_factor=budget_factor,
        scramble=None if scramble is None else scramble_setting(scramble),
    )
    loss_fn = LabelLoss(recipe_params.label_smoothing)
    distill = params.distill if params.distill and model_name == params.distill.student else None
    if distill is not None:
        model.set_distilled_training(distill.kind != "none")
    if distill is not None and distill.kind != "none":
        if teacher is None:
            raise StudyError(f"--model {model_name} is distilled: pass --teacher <path of the teacher's model.pt>")
        t = params.models[distill.teacher]
        loss_fn, run_spec = distillation_loss(loss_fn, teacher, distill.teacher, t.arch, dict(t.arch_args),
                                              distill.kind, distill.alpha, distill.tau, run_spec, device)

    recipe, augmentation = recipe_from_params(recipe_params, params.train.augment)
    spec = TrainSpec(
        run=run_spec, recipe=recipe, augmentation=augmentation, budget=budget, device=device,
        channels_last=not traits(recipe_params.arch, recipe_params.arch_args).transformer,
        compile=params.train.compile, precision=params.train.precision, graph=params.train.graph,
        eval_batch_size=params.train.eval_batch_size, checkpoint_every=params.train.checkpoint_every,
        subset=sha256(train_idx), validation=sha256(val_idx), paths=paths,
        label=f"{model_name} f={fraction} s={seed}" + (f" x{budget_factor:g}" if budget_factor != 1.0 else ""),
        cell_switch=getattr(params.train.cell, device.type, 1),
    )
    images = RunData(train=(view(data.train_images[train_idx]), data.train_labels[train_idx]),
                     validation=(view(data.train_images[val_idx]), data.train_labels[val_idx]),
                     test=(view(data.test_images), data.test_labels))
    return spec, model, loss_fn, images


def _summary(spec: TrainSpec, metrics_out: dict) -> str:
    run, budget = spec.run, spec.budget
    heads = ""
    if "test_top1_cls" in metrics_out:
        heads = f" (cls {metrics_out['test_top1_cls']:.4f}, dist {metrics_out['test_top1_dist']:.4f})"
    scaled = f" (budget x{run.budget_factor:g})" if run.budget_factor != 1.0 else ""
    return (
        f"train: {run.model_name} fraction {run.fraction} seed {run.seed}{scaled}: test top-1 "
        f"{metrics_out['test_top1']:.4f}{heads} after {budget.steps} steps x {budget.batch_size} ({budget.epochs:.1f} "
        f"epochs of {budget.train_images} images) in {metrics_out['train_seconds']:.0f}s, "
        f"{metrics_out['throughput_images_per_s']:.0f} img/s on {metrics_out['device']}"
    )


def scaled_budget(b: BudgetParams, train_images: int, full_images: int, factor: float = 1.0) -> Budget:
    """The budget rule (:func:`study.train.budget.plan_budget`) with ``budget.epochs`` and ``budget.min_steps`` times
    ``factor``: at 2, twice the steps of the study's run (to the rounding up of a step), the schedule's shape
    unchanged. ``min_steps`` is rounded to the nearest step; at factor 1 both are the study's own values."""
    epochs, min_steps = (b.epochs, b.min_steps) if factor == 1.0 else (b.epochs * factor, round(b.min_steps * factor))
    return plan_budget(train_images, full_images, b.batch_size, epochs, b.convention, min_steps)
