"""The pipeline's stages: where validated params meet library functions.

Each function is what one ``study <command>`` runs. It takes the validated :class:`Params` and the paths
``dvc.yaml`` passed on the command line, picks out the fields each library call needs, and returns the
one-line summary the CLI prints. Nothing here invents a path. The one exception is ``study train``, whose
glue is :mod:`study.train.stage`: inside ``study/train`` it is a DVC dependency of every training stage,
so editing it reruns them.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from study.config import Params
from study.errors import StudyError


def prepare(params: Params, out: Path) -> str:
    from study.data.datasets import load_dataset
    from study.data.prepared import write_prepared

    tic = time.perf_counter()
    d = params.data
    dataset = load_dataset(d.dataset, d.root, download=d.download)
    manifest = write_prepared(dataset, out)
    shape = manifest["arrays"]["train_images"]["shape"]
    n_test = manifest["arrays"]["test_images"]["shape"][0]
    return (
        f"prepare: {d.dataset} from {dataset.source}: {shape[0]} train + {n_test} test images of "
        f"{'x'.join(map(str, shape[1:]))}, {len(dataset.class_names)} classes -> {out} "
        f"({time.perf_counter() - tic:.1f}s)"
    )


def subsets(params: Params, prepared: Path, out: Path) -> str:
    from study.data.prepared import read_prepared
    from study.data.subsets import write_subsets

    labels = np.asarray(read_prepared(prepared).train_labels)
    d = params.data
    summary = write_subsets(labels, d.val_fraction, d.split_seed, params.fractions, params.seeds, out)
    sizes = summary.groupby("fraction")["images"].first()
    n_val = int(np.load(Path(out) / "validation.npy").size)
    listed = ", ".join(f"{f:g}:{n}" for f, n in sizes.items())
    return f"subsets: validation {n_val} images; fractions (images) {listed}; seeds {list(params.seeds)} -> {out}"


def models(params: Params, image_size: int | None, in_chans: int | None) -> str:
    from study.config import INPUT_SHAPES, NUM_CLASSES
    from study.models import build_model
    from study.models.cost import count_parameters, forward_flops

    size, chans = INPUT_SHAPES[params.data.dataset]
    size, chans = image_size or size, in_chans or chans
    rows = []
    for name in params.trained_models:
        m = params.models[name]
        model = build_model(m.arch, NUM_CLASSES[params.data.dataset], size, chans, **m.arch_args)
        rows.append({"model": name, "arch": m.arch, "params": count_parameters(model),
                     "forward_MFLOPs": round(forward_flops(model, size, chans) / 1e6, 2)})
    print(pd.DataFrame(rows).to_string(index=False))
    return f"models: {len(rows)} models for {size}x{size}x{chans} inputs"


def _pairs(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """Every later model against every earlier one, e.g. vit − resnet, deit − resnet, deit − vit."""
    return [(names[j], names[i]) for j in range(len(names)) for i in range(j)]


def curves(params: Params, runs_dir: Path, figures: Path, tables: Path) -> str:
    from study.analysis import curves as C
    from study.analysis.plots import data_efficiency_figure, save_figure
    from study.analysis.runs import collect_runs
    from study.io import atomic_dir
    from study.report.tables import write_table

    conf = params.analysis.curves.confidence
    runs = collect_runs(runs_dir).drop(columns="folder")
    summary = C.summarise(runs, conf)
    pairs = _pairs(params.trained_models)
    gaps = C.paired_gaps(runs, pairs, conf)
    fits = C.power_law_table(runs)
    crossings = pd.DataFrame([{"comparison": f"{a} - {b}", "crossover_train_images": C.crossover(summary, a, b)}
                          for a, b in pairs])
    pct = f"{conf:.0%}"
    with atomic_dir(tables) as tmp:
        write_table(runs, tmp / "runs", "Every training run: final model on the test set.")
        write_table(summary, tmp / "data_efficiency", f"Test top-1 per model and fraction: mean, std and {pct} t-interval over seeds.")
        write_table(gaps, tmp / "gaps", f"Paired test top-1 gaps (same subset and seed), mean and {pct} t-interval.")
        write_table(fits, tmp / "power_law", "Power-law fit of test error against training images, error = a n^-b + c.", 6)
        write_table(crossings, tmp / "crossover", "Training-set size where two accuracy curves cross (empty: no crossing).", 0)
    with atomic_dir(figures) as tmp:
        save_figure(data_efficiency_figure(runs, conf), tmp / "data_efficiency", runs)
    best = summary[summary["fraction"] == summary["fraction"].max()].sort_values("top1_mean").iloc[-1]
    return (f"curves: {len(runs)} runs, {summary['model'].nunique()} models; best at full data: "
            f"{best['model']} {best['top1_mean']:.4f} -> {figures}, {tables}")


def _analysis_images(prepared: Path, count: int) -> np.ndarray:
    from study.data.prepared import read_prepared

    test = read_prepared(prepared).test_images
    return np.asarray(test[: min(count, len(test))])


def cka(params: Params, runs_dir: Path, prepared: Path, figures: Path, tables: Path) -> str:
    from study import runtime
    from study.analysis.plots import CKAPanel, cka_frame, cka_grid, cka_to_reference, save_figure
    from study.analysis.runs import collect_runs, load_models
    from study.analysis.similarity import cka_study
    from study.io import atomic_dir
    from study.report.tables import write_table

    tic = time.perf_counter()
    device = runtime.pick_device(params.train.device)
    a = params.analysis
    models = load_models(collect_runs(runs_dir), a.seed, device)
    images = _analysis_images(prepared, a.cka.images)
    result = cka_study(models, images, a.cka.batch_size, a.cka.kernel, a.cka.rbf_threshold, device)
    within = [CKAPanel(m, l, l, f"{n} (within)", n, n) for n, (l, m) in result["within"].items()]
    across = [CKAPanel(m, la, lb, f"{x} vs {y}", x, y) for (x, y), (la, lb, m) in result["across"].items()]
    to_full = result["to_full"].rename(columns={"depth": "relative_depth"})
    summary = (to_full.groupby(["model", "fraction"], as_index=False)["cka"].mean()
               .rename(columns={"cka": "mean_layer_cka_to_full"}))
    with atomic_dir(figures) as tmp:
        save_figure(cka_grid(within), tmp / "cka_within", cka_frame(within))
        save_figure(cka_grid(across), tmp / "cka_across", cka_frame(across))
        if not to_full.empty:
            save_figure(cka_to_reference(to_full), tmp / "cka_to_full", to_full)
    with atomic_dir(tables) as tmp:
        write_table(summary, tmp / "cka_to_full", "Mean over layers of each model's CKA to its full-data counterpart.")
        write_table(to_full, tmp / "cka_to_full_layers", "Per-layer CKA to the full-data model of the same seed.")
    return (f"cka: {len(models)} models, {len(images) - len(images) % a.cka.batch_size} test images, "
            f"{len(within)} within + {len(across)} across panels in {time.perf_counter() - tic:.0f}s -> {figures}")


def attention(params: Params, runs_dir: Path, prepared: Path, figures: Path, tables: Path) -> str:
    from study import runtime
    from study.analysis.attention_study import attention_distances, attention_maps
    from study.analysis.plots import attention_distance_plot, attention_maps_figure, attention_maps_frame, save_figure
    from study.analysis.runs import collect_runs, load_models
    from study.io import atomic_dir
    from study.report.tables import write_table

    device = runtime.pick_device(params.train.device)
    a = params.analysis
    models = {k: v for k, v in load_models(collect_runs(runs_dir), a.seed, device).items()
              if hasattr(v[0], "num_prefix_tokens")}
    if not models:
        raise StudyError("attention: no ViT-family model among the runs; add a 'vit' or 'deit' model")
    images = _analysis_images(prepared, a.attention.images)
    distances = attention_distances(models, images, 64, device)
    per_layer = (distances.groupby(["model", "fraction", "layer"], as_index=False)
                 .agg(distance=("distance", "mean"), uniform=("uniform", "first")))
    full = max(f for _, f in models)
    shown = images[: a.attention.show]
    with atomic_dir(figures) as tmp:
        save_figure(attention_distance_plot(distances), tmp / "attention_distance", distances)
        for (name, fraction), (model, spec) in models.items():
            if fraction != full:
                continue
            maps = attention_maps(model, spec, shown, device)
            pictures = shown.astype(np.float32) / 255.0
            for token, m in maps["tokens"].items():
                for block in ("first", "last"):
                    titles = [f"test image {i}" for i in range(len(shown))]
                    fig = attention_maps_figure(pictures, m[block], m["rollout"], titles)
                    fig.suptitle(f"{name}: {token}-token attention, {block} block, and rollout")
                    save_figure(fig, tmp / f"attention_maps_{name}_{token}_{block}",
                                attention_maps_frame(m[block], m["rollout"], titles))
    with atomic_dir(tables) as tmp:
        write_table(per_layer, tmp / "attention_distance", "Mean attention distance (pixels) per layer, averaged over heads.", 2)
    return f"attention: {len(models)} ViT-family models, distances over {len(images)} test images -> {figures}"


_CONVENTION_TEXT = {
    "epochs": "each fraction trains the same number of epochs of its own data, with a minimum number of steps",
    "images": "each fraction sees as many images as the full-data run",
}


def report(params: Params, params_path: Path, lock: Path, runs_dir: Path, tables: Path, figures: Path,
           out: Path, metrics: Path, provenance_out: Path, out_tables: Path) -> str:
    import yaml

    from study.analysis.runs import collect_runs
    from study.io import atomic_dir, write_json, write_text
    from study.report.provenance import provenance
    from study.report.report import write_report

    runs = collect_runs(runs_dir).drop(columns="folder")
    b, d = params.budget, params.distill
    setup = {
        "dataset": params.data.dataset, "val_fraction": params.data.val_fraction,
        "fractions": list(params.fractions), "seeds": list(params.seeds), "batch_size": b.batch_size,
        "convention": b.convention, "convention_text": _CONVENTION_TEXT[b.convention],
        "distill": (f"`{d.student}` learns from `{d.teacher}` trained on the same fraction and seed, "
                    f"{d.kind} distillation" + (f" (alpha {d.alpha}, tau {d.tau})" if d.kind == "soft" else ""))
        if d else "none",
        "recipes": yaml.safe_dump({"models": {k: _plain(v) for k, v in params.models.items()},
                                   "budget": _plain(b), "augment": _plain(params.train.augment)}, sort_keys=False),
    }
    prov = provenance(params_path, lock, runs["device"].tolist(), float(runs["train_seconds"].sum()))
    with atomic_dir(out_tables) as tmp_tables:
        text, headline = write_report(report_dir=out.parent, tables_dir=tables, figures_dir=figures, runs=runs,
                                      setup=setup, prov=prov, out_tables=tmp_tables)
    write_text(out, text)
    write_json(metrics, headline)
    write_json(provenance_out, prov)
    return f"report: {out} ({len(text.splitlines())} lines), {metrics}, {provenance_out}; commit {prov['git_commit']}"


def _plain(obj) -> dict:
    """A (pydantic) dataclass as plain dicts, for YAML."""
    import dataclasses

    return {k: (_plain(v) if dataclasses.is_dataclass(v) else v) for k, v in dataclasses.asdict(obj).items()}


def bench(params: Params, model_keys: list[str] | None, archs: list[str] | None, image_size: int | None,
          in_chans: int | None, num_classes: int | None, batch_size: int | None, steps: int, warmup_steps: int,
          repeats: int, workers: list[int] | None, images: int, compile_model: bool | None, out: Path) -> str:
    from study import runtime
    from study.bench import STUDY, BenchModel, Shape, Teacher, format_table, run_benchmark, write_csv
    from study.config import INPUT_SHAPES, NUM_CLASSES
    from study.train.loop import Recipe

    size, chans = INPUT_SHAPES[params.data.dataset]
    shape = Shape(image_size or size, in_chans or chans, num_classes or NUM_CLASSES[params.data.dataset])
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
        recipe = Recipe(**{k: getattr(m, k) for k in Recipe.__dataclass_fields__})
        specs.append(BenchModel(key, m.arch, dict(m.arch_args), recipe, teacher))
    specs += [BenchModel(f"{a} (defaults)" if a in keys else a, a) for a in archs or []]
    device = runtime.pick_device(params.train.device)
    aug = params.train.augment
    table = run_benchmark(
        specs, shape, batch_size=batch_size or params.budget.batch_size, steps=steps, warmup_steps=warmup_steps,
        repeats=repeats, workers=workers or [2], device=device, images=images, crop_padding=aug.crop_padding,
        hflip=aug.hflip, compile_model=params.train.compile if compile_model is None else compile_model,
    )
    print(format_table(table))
    write_csv(table, out)
    study = table[table["path"] == STUDY]
    parts = ", ".join(f"{r.model} {r.speedup:.2f}x (MFU {100 * r.mfu:.1f}%)" for r in study.itertuples())
    return (f"bench: study vs fastest usual recipe on {shape.in_chans}x{shape.image_size}x{shape.image_size}, "
            f"{device.type}: {parts} -> {out}")
