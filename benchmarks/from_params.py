"""A study's parameters as a benchmark's workload: the glue that ``study bench``, ``study gpu-acceptance`` and the
seed-batching benchmark share.

Each benches the models a parameters file trains (the acceptance, those of the GPU presets), each with the recipe,
augmentation and teacher it trains with and on its dataset's input shape. The conversion lives here once, so that
the measurements (:func:`benchmarks.study_vs_usual.run_benchmark` and the others) never see the params classes; the
params → recipe conversion itself is :func:`study.train.recipe.recipe_from_params`, the one the train stage uses.
"""

from __future__ import annotations

from benchmarks.workload import BenchModel, Shape, Teacher
from study.core.config import INPUT_SHAPES, NUM_CLASSES, Params
from study.core.errors import StudyError
from study.train.recipe import augmentation_from_params, recipe_from_params


def bench_shape(params: Params, image_size: int | None = None, in_chans: int | None = None,
                num_classes: int | None = None) -> Shape:
    """The input shape and classes of ``params``' dataset, each overridable."""
    size, chans = INPUT_SHAPES[params.data.dataset]
    return Shape(image_size or size, in_chans or chans, num_classes or NUM_CLASSES[params.data.dataset])


def bench_models(params: Params, model_keys: list[str] | None = None,
                 archs: list[str] | None = None) -> list[BenchModel]:
    """``model_keys`` of ``params`` (default: its trained models unless ``archs`` is given), each with its recipe,
    augmentation and, for the distilled student, its teacher; then the bare ``archs`` with their family's default
    recipe and the study-wide augmentation."""
    keys = model_keys or ([] if archs else list(params.trained_models))
    for key in keys:
        if key not in params.models:
            raise StudyError(f"--model {key}: not a key of models in params ({sorted(params.models)}); "
                             "use --arch for a bare architecture")
    d, specs = params.distill, []
    for key in keys:
        m = params.models[key]
        teacher = None
        if d is not None and key == d.student and d.kind != "none":
            t = params.models[d.teacher]
            teacher = Teacher(t.arch, dict(t.arch_args), d.kind, d.alpha, d.tau)
        recipe, augmentation = recipe_from_params(m, params.train.augment)
        specs.append(BenchModel(key, m.arch, dict(m.arch_args), recipe, teacher, augmentation))
    default_augmentation = augmentation_from_params(params.train.augment)
    specs += [BenchModel(f"{a} (defaults)" if a in keys else a, a, augmentation=default_augmentation)
              for a in archs or []]
    return specs
