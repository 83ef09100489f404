"""Stage ``train``: one model, one fraction, one seed, from validated params to a finished run.

This is where params meet the training library: it checks the request against params, builds the model (and
for a distilled student the loss around the teacher trained on the same fraction and seed), plans the budget, and
builds the run's one :class:`study.train.loop.TrainSpec` (whose fingerprint covers everything that determines the
run, so a stale resume state is ignored) for :func:`study.train.loop.train_run`. ``study levers`` calls :func:`run`
too, so a trial is exactly a run of the pipeline. ``--budget check`` scales the budget by ``budget_check.factor`` for the budget check's longer runs; such a run records the
factor in its spec and metrics.
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
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--prepared", type=Path, required=True)
    parser.add_argument("--subset", type=Path, required=True, help="index file of the training subset")
    parser.add_argument("--validation", type=Path, required=True, help="index file of the validation split")
    parser.add_argument("--teacher", type=Path, help="the teacher's model.pt (a distilled student only)")
    parser.add_argument("--run", type=Path, required=True,
                        help="the run's folder: model.pt, init.pt, predictions.npy, metrics.json, history.csv, and "
                        "resume.pt, the resume state kept across kills")
    parser.add_argument("--budget", choices=("study", "check"), default="study",
                        help="study: the study's budget (default); check: budget_check.factor times it (budget.epochs "
                        "and budget.min_steps), the budget check's longer runs")


def main(args: argparse.Namespace) -> str:
    params, folder = configured(args.params), args.run
    if args.budget == "check" and params.budget_check is None:
        raise StudyError(f"--budget check: {args.params} has no budget_check section; add one or train at --budget study")
    factor = params.budget_check.factor if args.budget == "check" else 1.0
    return run(params, args.model, args.fraction, args.seed, args.prepared, args.subset,
               args.validation, args.teacher, folder / "model.pt", folder / "metrics.json", folder / "history.csv",
               folder / "resume.pt", folder / "predictions.npy", factor)


def run(params: Params, model_name: str, fraction: float, seed: int, prepared: Path, subset: Path,
        validation: Path, teacher: Path | None, checkpoint: Path, metrics: Path, history: Path, resume: Path,
        predictions: Path, budget_factor: float = 1.0) -> str:
    """Train ``model_name`` of ``params`` on ``subset`` (indices into ``prepared``), writing the run's files;
    ``budget_factor`` times the study's budget (:func:`scaled_budget`)."""
    if model_name not in params.trained_models:
        raise StudyError(f"--model {model_name}: not a trained model of this study ({list(params.trained_models)})")
    checked = params.budget_check is not None and fraction in params.budget_check.fractions
    if fraction not in params.fractions or seed not in (params.check_seeds if checked else params.seeds):
        raise StudyError(f"--fraction {fraction} --seed {seed}: not in params fractions/seeds (nor, at a fraction in "
                         "budget_check.fractions, in budget_check.seeds)")
    if not budget_factor > 0:
        raise StudyError(f"--budget-factor {budget_factor}: must be positive (1 = the study's budget)")
    recipe_params = params.models[model_name]
    teacher_name = params.distill.teacher if params.distill and model_name == params.distill.student else None
    check_archs({name: params.models[name].arch for name in filter(None, (model_name, teacher_name))}, "params")
    device = runtime.pick_device(params.train.device)
    runtime.seed_everything(seed)

    data = read_prepared(prepared)
    train_idx, val_idx = read_subset(subset), read_subset(validation)
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
        subset=sha256(train_idx), validation=sha256(val_idx),
        paths=RunPaths(checkpoint=checkpoint, metrics=metrics, history=history, resume=resume, predictions=predictions,
                       initial=checkpoint.with_name("init.pt")),
        label=f"{model_name} f={fraction} s={seed}" + (f" x{budget_factor:g}" if budget_factor != 1.0 else ""),
    )
    images = RunData(train=(view(data.train_images[train_idx]), data.train_labels[train_idx]),
                     validation=(view(data.train_images[val_idx]), data.train_labels[val_idx]),
                     test=(view(data.test_images), data.test_labels))
    metrics_out = train_run(spec, model, loss_fn, images)
    heads = ""
    if "test_top1_cls" in metrics_out:
        heads = f" (cls {metrics_out['test_top1_cls']:.4f}, dist {metrics_out['test_top1_dist']:.4f})"
    scaled = f" (budget x{budget_factor:g})" if budget_factor != 1.0 else ""
    return (
        f"train: {model_name} fraction {fraction} seed {seed}{scaled}: test top-1 {metrics_out['test_top1']:.4f}{heads} "
        f"after {budget.steps} steps x {budget.batch_size} ({budget.epochs:.1f} epochs of {budget.train_images} images) "
        f"in {metrics_out['train_seconds']:.0f}s, {metrics_out['throughput_images_per_s']:.0f} img/s on {metrics_out['device']}"
    )


def scaled_budget(b: BudgetParams, train_images: int, full_images: int, factor: float = 1.0) -> Budget:
    """The budget rule (:func:`study.train.budget.plan_budget`) with ``budget.epochs`` and ``budget.min_steps`` times
    ``factor``: at 2, twice the steps of the study's run (to the rounding up of a step), the schedule's shape
    unchanged. ``min_steps`` is rounded to the nearest step; at factor 1 both are the study's own values."""
    epochs, min_steps = (b.epochs, b.min_steps) if factor == 1.0 else (b.epochs * factor, round(b.min_steps * factor))
    return plan_budget(train_images, full_images, b.batch_size, epochs, b.convention, min_steps)
