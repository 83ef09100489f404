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
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from study.config import Params
from study.errors import StudyError

if TYPE_CHECKING:  # the pretrained stages only; importing it would slow every stage's start
    from study.pretrained.params import PretrainedParams


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
    from study.analysis.curves_figures import data_efficiency_figure, gaps_figure
    from study.analysis.figure_style import save_figure
    from study.analysis.runs import collect_runs
    from study.io import atomic_dir
    from study.report.tables import write_table

    conf = params.analysis.curves.confidence
    runs = collect_runs(runs_dir).drop(columns="folder")
    summary = C.summarise(runs, conf)
    pairs = _pairs(params.trained_models)
    gaps = C.paired_gaps(runs, pairs, conf)
    pct = f"{conf:.0%}"
    with atomic_dir(tables) as tmp:
        write_table(runs, tmp / "runs", "Every training run: final model on the test set, with its convergence flags.")
        write_table(summary, tmp / "data_efficiency", f"Test top-1 per model and fraction: mean, std and {pct} t-interval over seeds.")
        write_table(gaps, tmp / "gaps", f"Paired test top-1 gaps (same subset and seed): mean, {pct} t-interval, and the "
                    "interval adjusted across the comparison's fractions (Holm).")
        write_table(C.crossings(gaps), tmp / "crossings", "Sign changes of the mean gap, and crossings supported by "
                    "adjusted-significant gaps of opposite sign.", 0)
        write_table(C.gap_trends(runs, pairs, conf), tmp / "gap_trends", "Slope of the per-seed gap per decade of "
                    f"training images, {pct} t-interval over seeds (step-bound fractions left out).")
        write_table(C.power_law_table(runs, conf), tmp / "power_law", "Power-law fit of test error against training "
                    f"images, error = a n^-b + c, on runs that are not step-bound; {pct} bootstrap intervals over seeds.", 6)
    with atomic_dir(figures) as tmp:
        save_figure(data_efficiency_figure(runs, conf), tmp / "data_efficiency", runs)
        if not gaps.empty:
            save_figure(gaps_figure(gaps), tmp / "gaps", gaps)
    best = summary[summary["fraction"] == summary["fraction"].max()].sort_values("top1_mean").iloc[-1]
    flagged = int(runs["under_trained"].sum())
    return (f"curves: {len(runs)} runs ({flagged} still improving at the end), {summary['model'].nunique()} models; "
            f"best at full data: {best['model']} {best['top1_mean']:.4f} -> {figures}, {tables}")


def distillation(params: Params, runs_dir: Path, tables: Path) -> str:
    from study.analysis import agreement as A
    from study.analysis.curves import paired_gaps
    from study.analysis.runs import collect_runs
    from study.io import atomic_dir
    from study.report.tables import write_table

    d, conf = params.distill, params.analysis.curves.confidence
    if d is None or d.kind == "none":
        raise StudyError("distillation: params has no distillation (distill.kind none); remove the stage or set distill")
    runs = collect_runs(runs_dir)
    students = [d.student, *(m for m in params.baselines if m != d.teacher)]
    per_run = A.agreement_runs(runs, d.teacher, students)
    summary = A.agreement_summary(per_run, conf)
    whole = per_run[per_run["head"] == "model"]
    pairs = [(d.student, other) for other in students if other != d.student]
    gaps = paired_gaps(whole, pairs, conf, value="agreement")
    with atomic_dir(tables) as tmp:
        write_table(A.teacher_table(runs, d.teacher, conf), tmp / "teacher",
                    f"The teacher ({d.teacher}) per fraction: top-1 on its own training images and on the test set.")
        write_table(per_run, tmp / "agreement_runs", f"Test-set agreement of each run (and head) with its teacher.")
        write_table(summary, tmp / "agreement", f"Test-set agreement with the teacher: mean and {conf:.0%} t-interval over seeds.")
        write_table(gaps, tmp / "agreement_gaps", "Paired difference in agreement with the teacher (same subset and seed), "
                    "Holm-adjusted across fractions.")
    full = summary[(summary["fraction"] == summary["fraction"].max()) & (summary["head"] == "model")]
    parts = ", ".join(f"{r.model} {r.agreement_mean:.3f}" for r in full.itertuples())
    return f"distillation: agreement with {d.teacher} at full data: {parts} -> {tables}"


def _analysis_images(prepared: Path, count: int) -> np.ndarray:
    from study.data.prepared import read_prepared

    test = read_prepared(prepared).test_images
    return np.asarray(test[: min(count, len(test))])


def cka(params: Params, runs_dir: Path, prepared: Path, figures: Path, tables: Path) -> str:
    from study import runtime
    from study.analysis import similarity as S
    from study.analysis.cka_figures import CKAPanel, cka_frame, cka_grid, cka_to_reference
    from study.analysis.figure_style import save_figure
    from study.analysis.runs import collect_runs, load_models
    from study.io import atomic_dir
    from study.report.tables import write_table

    tic = time.perf_counter()
    device = runtime.pick_device(params.train.device)
    a, conf = params.analysis, params.analysis.curves.confidence
    runs = collect_runs(runs_dir)
    models = {(name, fraction, seed): loaded for seed in params.seeds
              for (name, fraction), loaded in load_models(runs, seed, device).items()}
    images = _analysis_images(prepared, a.cka.images)
    result = S.cka_study(models, images, a.cka.batch_size, a.cka.kernel, a.cka.rbf_threshold, device, params.seeds)
    blocks = result["matrices"][a.seed]  # the heatmaps: the analysis seed's full-data models
    within = [CKAPanel(m, la, lb, f"{x} (within)", x, y) for (x, y), (la, lb, m) in blocks.items() if x == y]
    across = [CKAPanel(m, la, lb, f"{x} vs {y}", x, y) for (x, y), (la, lb, m) in blocks.items() if x != y]
    to_full, ceiling = result["to_full"], result["ceiling"]
    summary = S.to_full_summary(to_full, ceiling, conf)
    per_seed_across = S.across_depth(result["matrices"])
    across_summary = S.across_depth_summary(per_seed_across, ceiling, conf)
    pct, grid = f"{conf:.0%}", len(S.DEPTH_GRID)
    skipped = "" if len(params.seeds) > 1 else " (empty: CKA to another seed's model needs at least 2 seeds)"
    with atomic_dir(figures) as tmp:
        save_figure(cka_grid(within), tmp / "cka_within", cka_frame(within))
        save_figure(cka_grid(across), tmp / "cka_across", cka_frame(across))
        if not to_full.empty:
            figure_data = pd.concat([to_full.assign(curve="fraction"), ceiling.assign(curve="ceiling")])
            save_figure(cka_to_reference(to_full, ceiling, reference=max(params.fractions)), tmp / "cka_to_full",
                        figure_data)
    with atomic_dir(tables) as tmp:
        write_table(summary, tmp / "cka_to_full",
                    f"CKA of each model at each fraction to the full-data model of another seed, mean over "
                    f"relative depth ({grid}-point grid), {pct} t-interval over seeds; the cross-seed ceiling "
                    f"(full data vs full data, interval over distinct seed pairs); the gap ceiling - CKA, "
                    f"paired by seed, Holm-adjusted over each model's fractions{skipped}.")
        write_table(to_full, tmp / "cka_to_full_layers",
                    f"Per-layer CKA to the full-data model of the reference seed (the next seed){skipped}.")
        write_table(ceiling, tmp / "cka_ceiling",
                    f"Noise ceiling: per-layer CKA between full-data models of two seeds{skipped}.")
        write_table(per_seed_across, tmp / "cka_across_depth_seeds",
                    "CKA between two models at matched relative depth, full data, per seed.")
        write_table(across_summary, tmp / "cka_across_depth",
                    f"CKA between two models at matched relative depth (full data), mean and {pct} t-interval "
                    "over seeds, beside each model's cross-seed ceiling at that depth.")
    note = f"{len(to_full)} layer comparisons to another seed" if not to_full.empty else "1 seed: no cross-seed CKA"
    return (f"cka: {len(models)} models, {len(images) - len(images) % a.cka.batch_size} test images, "
            f"{len(within)} within + {len(across)} across panels, {note} in {time.perf_counter() - tic:.0f}s "
            f"-> {figures}, {tables}")


def attention(params: Params, runs_dir: Path, prepared: Path, figures: Path, tables: Path) -> str:
    from study import runtime
    from study.analysis import attention_study as A
    from study.analysis.attention_figures import attention_distance_plot, attention_maps_figure, attention_maps_frame
    from study.analysis.figure_style import save_figure
    from study.analysis.runs import collect_runs, load_models
    from study.io import atomic_dir
    from study.report.tables import write_table

    tic = time.perf_counter()
    device = runtime.pick_device(params.train.device)
    a, conf = params.analysis, params.analysis.curves.confidence
    runs = collect_runs(runs_dir)
    trained = {(name, A.TRAINED, fraction, seed): loaded for seed in params.seeds
               for (name, fraction), loaded in load_models(runs, seed, device).items()
               if hasattr(loaded[0], "num_prefix_tokens")}
    if not trained:
        raise StudyError("attention: no ViT-family model among the runs; add a 'vit' or 'deit' model")
    fractions = sorted({f for _, _, f, _ in trained})
    smallest, full = fractions[0], fractions[-1]
    # The baseline: each model and seed at initialisation (the same for all its fractions).
    initial = {(name, A.INIT, float("nan"), seed): (A.initial_model(spec, device), spec)
               for (name, _, fraction, seed), (_, spec) in trained.items() if fraction == full}
    images = _analysis_images(prepared, a.attention.images)
    heads = A.head_statistics({**trained, **initial}, images, 64, device)
    layers = A.layer_statistics(heads)
    trained_layers = layers[layers["state"] == A.TRAINED]
    per_layer = (trained_layers.groupby(["model", "fraction", "layer"], as_index=False)
                 .agg(seeds=("seed", "size"), distance=("mean_distance", "mean"),
                      uniform=("uniform_distance", "first")))
    # The figure's columns, left to right: initialisation, the smallest fraction, full data.
    shown_states = pd.concat(
        [heads[heads["state"] == A.INIT].assign(condition="init")]
        + [heads[(heads["state"] == A.TRAINED) & (heads["fraction"] == f)].assign(condition=f"{100 * f:g}% data")
           for f in dict.fromkeys([smallest, full])], ignore_index=True)
    shown = images[: a.attention.show]
    share, pct = A.LOCAL_SHARE, f"{conf:.0%}"
    with atomic_dir(figures) as tmp:
        save_figure(attention_distance_plot(shown_states, columns="condition", local_share=share),
                    tmp / "attention_distance", shown_states)
        for (name, _, fraction, seed), (model, spec) in trained.items():
            if fraction != full or seed != a.seed:
                continue
            maps = A.attention_maps(model, spec, shown, device)
            pictures = shown.astype(np.float32) / 255.0
            for token, m in maps["tokens"].items():
                for block in ("first", "last"):
                    titles = [f"test image {i}" for i in range(len(shown))]
                    fig = attention_maps_figure(pictures, m[block], m["rollout"], titles)
                    fig.suptitle(f"{name}: {token}-token attention, {block} block, and rollout")
                    save_figure(fig, tmp / f"attention_maps_{name}_{token}_{block}",
                                attention_maps_frame(m[block], m["rollout"], titles))
    with atomic_dir(tables) as tmp:
        write_table(heads, tmp / "attention_heads_seeds",
                    "Mean attention distance (px) and entropy (nats) of every head, per run; state init = the "
                    "run's seed before training (fraction --).", 3)
        write_table(A.head_table(heads, conf), tmp / "attention_heads",
                    f"Per layer, the k-th most local head (rank 0 = most local within each seed): distance "
                    f"mean and {pct} t-interval over seeds, mean entropy; uniform-attention references.", 3)
        write_table(A.layer_table(layers, conf), tmp / "attention_layers",
                    f"Per layer over seeds: most local head per seed, its distance (mean, {pct} t-interval), "
                    f"heads below {share:g} x uniform distance (mean), mean entropy ({pct} t-interval).", 3)
        write_table(A.contrasts(layers, conf), tmp / "attention_contrasts",
                    "Most-local-head distance at full data minus initialisation / minus the smallest fraction, "
                    "paired by seed; intervals Holm-adjusted over each model's contrasts.", 3)
        write_table(per_layer, tmp / "attention_distance",
                    "Mean attention distance (pixels) per layer, averaged over heads and seeds (trained models).", 2)
    return (f"attention: {len(trained)} ViT-family runs + {len(initial)} initialisations, distances over "
            f"{len(images)} test images in {time.perf_counter() - tic:.0f}s -> {figures}, {tables}")


def pretrained_check(source: str, weights: Path | None) -> str:
    """Load one pretrained checkpoint and say what it became, what it needs, and where it came from."""
    import torch

    from study.models.cost import count_parameters
    from study.pretrained import open_checkpoint
    from study.pretrained.weights import sha256

    c = open_checkpoint(source, weights)
    p = c.preprocessing
    with torch.no_grad():
        logits = c.model(torch.zeros(1, p.channels, *p.crop))
    maps = "attention maps: yes" if c.attention_maps else "attention maps: no (CKA only)"
    return (f"pretrained-check: {source}: {c.kind} {c.architecture} -> {type(c.model).__name__}, "
            f"{count_parameters(c.model):,} parameters, {logits.shape[-1]} classes, {maps}; input {p.channels}x"
            f"{p.crop[0]}x{p.crop[1]}, {p.describe()}; weights {c.weights} sha256 {sha256(c.weights)[:16]}…")


def pretrained_analysis(params: PretrainedParams, checkpoints_dir: Path, images_dir: Path, figures: Path,
                        tables: Path) -> str:
    """CKA, per-head attention distance and rollout of the preset's pretrained checkpoints (one pass)."""
    from study import runtime
    from study.analysis.attention_figures import attention_distance_plot, attention_maps_figure, attention_maps_frame
    from study.analysis.attention_study import LOCAL_SHARE
    from study.analysis.cka_figures import CKAPanel, cka_frame, cka_grid
    from study.analysis.figure_style import save_figure
    from study.io import atomic_dir
    from study.pretrained import analysis as P
    from study.pretrained.images import list_images
    from study.pretrained.load import open_checkpoint, resolve
    from study.report.tables import write_table

    tic = time.perf_counter()
    a = params.analysis
    device = runtime.pick_device(a.device)
    paths = list_images(images_dir, params.images.count)
    if len(paths) < a.batch_size:
        raise StudyError(f"images.count {len(paths)} is below analysis.batch_size {a.batch_size}; CKA needs a whole "
                         "batch: raise the count or lower the batch size")
    checkpoints = {name: open_checkpoint(*resolve(m.source, m.weights, checkpoints_dir))
                   for name, m in params.models.items()}
    result = P.analyse(checkpoints, paths, a.batch_size, a.kernel, a.rbf_threshold, a.show, device)
    panels = [CKAPanel(result.block(x, y), result.layers[x], result.layers[y],
                       f"{x} (within)" if x == y else f"{x} vs {y}", x, y) for x, y in P.cka_pairs(result.layers)]
    within = [p for p in panels if p.row_name == p.col_name]
    across = [p for p in panels if p.row_name != p.col_name]
    layers = P.attention_layer_table(result.heads, LOCAL_SHARE)
    with atomic_dir(figures) as tmp:
        save_figure(cka_grid(within), tmp / "cka_within", cka_frame(within))
        for panel in across:  # one figure per pair: side by side, many pairs would crush each other
            save_figure(cka_grid([panel]), tmp / f"cka_{panel.row_name}_vs_{panel.col_name}", cka_frame([panel]))
        if not result.heads.empty:
            save_figure(attention_distance_plot(result.heads, local_share=LOCAL_SHARE), tmp / "attention_distance",
                        result.heads)
        for name, m in result.maps.items():
            titles = [f"image {i}" for i in range(len(m.pictures))]
            fig = attention_maps_figure(m.pictures, m.first, m.rollout, titles)
            fig.suptitle(f"{name}: class-token attention per head, first block, and rollout")
            save_figure(fig, tmp / f"attention_maps_{name}", attention_maps_frame(m.first, m.rollout, titles))
            fig = attention_maps_figure(m.pictures, m.last, m.rollout, titles)
            fig.suptitle(f"{name}: class-token attention per head, last block, and rollout")
            save_figure(fig, tmp / f"attention_maps_{name}_last", attention_maps_frame(m.last, m.rollout, titles))
    sources = {name: m.source for name, m in params.models.items()}
    with atomic_dir(tables) as tmp:
        write_table(P.models_table(checkpoints, sources, result, checkpoints_dir), tmp / "models",
                    "The pretrained models: source, architecture, input, preprocessing, SHA-256 of the weights.")
        write_table(P.images_table(paths, images_dir, result.images), tmp / "images",
                    "The images analysed, in order, with their SHA-256.")
        write_table(cka_frame(panels), tmp / "cka", "Minibatch CKA (unbiased HSIC) between every layer pair, within "
                    "each model and across models.", 4)
        write_table(P.matched_depth_table(result), tmp / "cka_matched_depth",
                    "CKA between two models at matched relative depth.", 4)
        write_table(result.heads, tmp / "attention_heads", "Mean attention distance (px of the model's input) and "
                    "entropy (nats) of every head, with the uniform-attention references.", 3)
        write_table(layers, tmp / "attention_layers", f"Per block: most local, mean and least local head distance "
                    f"(px), heads below {LOCAL_SHARE:g} x uniform distance, mean entropy (nats).", 3)
    return (f"pretrained-analysis: {len(checkpoints)} models ({', '.join(checkpoints)}), {result.images} images, "
            f"{sum(map(len, result.layers.values()))} layers, {len(result.maps)} with attention maps, in "
            f"{time.perf_counter() - tic:.0f}s -> {figures}, {tables}")


def pretrained_report(params_path: Path, tables: Path, figures: Path, out: Path, provenance_out: Path) -> str:
    import pandas as pd

    from study.io import write_json, write_text
    from study.pretrained.report import provenance, write_markdown

    prov = provenance(params_path, pd.read_csv(tables / "models.csv"), pd.read_csv(tables / "images.csv"))
    text = write_markdown(tables, figures, out.parent, prov)
    write_text(out, text)
    write_json(provenance_out, prov)
    return f"pretrained-report: {out} ({len(text.splitlines())} lines), {provenance_out}"


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
        "convention": b.convention, "convention_text": _CONVENTION_TEXT[b.convention], "min_steps": b.min_steps,
        "selection": {name: dict(m.selected_on_validation) for name, m in params.models.items()},
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


def _bench_shape(params: Params, image_size: int | None = None, in_chans: int | None = None,
                 num_classes: int | None = None):
    """The input shape and classes of ``params``' dataset, each overridable."""
    from study.bench.train_step import Shape
    from study.config import INPUT_SHAPES, NUM_CLASSES

    size, chans = INPUT_SHAPES[params.data.dataset]
    return Shape(image_size or size, in_chans or chans, num_classes or NUM_CLASSES[params.data.dataset])


def _bench_models(params: Params, model_keys: list[str] | None, archs: list[str] | None) -> list:
    """``BenchModel``s for ``model_keys`` of ``params`` (default: its trained models unless ``archs`` is given),
    each with its recipe, augmentation and, for the distilled student, its teacher; then the bare ``archs``."""
    from study.bench.train_step import BenchModel, Teacher
    from study.train.augment import Augmentation
    from study.train.loop import Recipe

    def augmentation(aug) -> Augmentation:
        return Augmentation(**{k: getattr(aug, k) for k in Augmentation.__dataclass_fields__})

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
        specs.append(BenchModel(key, m.arch, dict(m.arch_args), recipe, teacher,
                                augmentation(m.augment or params.train.augment)))
    specs += [BenchModel(f"{a} (defaults)" if a in keys else a, a, augmentation=augmentation(params.train.augment))
              for a in archs or []]
    return specs


def bench(params: Params, model_keys: list[str] | None, archs: list[str] | None, image_size: int | None,
          in_chans: int | None, num_classes: int | None, batch_size: int | None, steps: int, warmup_steps: int,
          repeats: int, workers: list[int] | None, images: int, compile_model: bool | None, out: Path,
          precisions: list[str] | None = None, augment_cost: bool = False) -> str:
    """``study bench``; several ``precisions`` (e.g. fp32 and bf16) are measured one after the other, each
    against its own matmul peak, and shown side by side."""
    from study import runtime
    from study.bench.train_step import STUDY, STUDY_AUGMENTED, format_table, run_benchmark, write_csv
    from study.train.loop import resolved_precision

    shape = _bench_shape(params, image_size, in_chans, num_classes)
    specs = _bench_models(params, model_keys, archs)
    device = runtime.pick_device(params.train.device)
    precisions = precisions or [params.train.precision]
    table = pd.concat([run_benchmark(
        specs, shape, batch_size=batch_size or params.budget.batch_size, steps=steps, warmup_steps=warmup_steps,
        repeats=repeats, workers=workers or [2], device=device, images=images,
        compile_model=params.train.compile if compile_model is None else compile_model, precision=precision,
        augment_cost=augment_cost,
    ) for precision in precisions], ignore_index=True)
    print(format_table(table))
    write_csv(table, out)
    study = table[table["path"] == STUDY]
    shown = [resolved_precision(device, p) for p in precisions]
    short = {"float32": "fp32", "bfloat16": "bf16"}  # a row's precision, by the dtype of its peak matmul
    label = (lambda r: f"{r.model} {short[r.peak_dtype]}") if len(set(shown)) > 1 else (lambda r: r.model)
    parts = ", ".join(f"{label(r)} {r.speedup:.2f}x (MFU {100 * r.mfu:.1f}%)" for r in study.itertuples())
    augmented = table[table["path"] == STUDY_AUGMENTED]
    if len(augmented):
        parts += "; heavy augmentation costs " + ", ".join(
            f"{r.model} +{r.augment_cost_pct:.0f}%" for r in augmented.itertuples()) + " per step"
    return (f"bench: study vs fastest usual recipe on {shape.in_chans}x{shape.image_size}x{shape.image_size}, "
            f"{device.type}, {' and '.join(dict.fromkeys(shown))}: {parts} -> {out}")


def gpu_acceptance(params: Params, params_path: Path, out: Path, steps: list[str] | None, smoke: bool,
                   time_limit: float, dataset_files: Path | None, merge: list[Path] | None = None) -> str:
    """``study gpu-acceptance``: the steps of :mod:`study.bench.acceptance`, results into ``out``.

    Run from the project root. ``params_path`` is the default study; ``--smoke`` swaps every preset for
    configs/smoke.yaml, the models for toy sizes, and runs one training stage of it for the default study.
    ``merge``: run nothing; gather the folders of earlier calls into ``out`` and render it.
    """
    import tempfile

    from study import runtime
    from study.bench import acceptance as acc
    from study.config import load_params

    root = Path.cwd()
    if merge:
        return f"gpu-acceptance: {len(merge)} folder(s) merged -> {acc.merge_folders(merge, out)}"
    if not (root / "dvc.yaml").is_file():
        raise StudyError(f"no dvc.yaml in {root}; run `study gpu-acceptance` from the project root")
    steps = steps or list(acc.STEPS)
    # The presets whose models are benched; cifar100_gpu's are cifar10_gpu's with a 100-class head.
    names = ["smoke"] if smoke else ["fashionmnist_gpu", "cifar10_gpu"]
    presets = {name: load_params(root / "configs" / f"{name}.yaml") for name in names}
    device = runtime.pick_device(params.train.device)
    if device.type == "cuda":
        runtime.configure(threads=params.train.threads, deterministic=False)  # cuDNN autotuning, as the presets
    size = acc.SMOKE_SIZE if smoke else acc.GPU_SIZE
    out.mkdir(parents=True, exist_ok=True)
    acc.write_device(out, device)
    done = []
    for step in steps:
        if step in acc.BENCH_STEPS:
            groups = ([("headline", acc.HEADLINE_SHAPE, list(acc.HEADLINE))] if step == "bench" else
                      [(name, _bench_shape(p), _bench_models(p, None, None)) for name, p in presets.items()])
            table = acc.bench_groups(groups, size, device, precision="auto")
            acc.merge_csv(out / "bench.csv", table, step)
            done.append(f"{step}: {len(table)} rows")
            continue
        study_path = root / "configs" / "smoke.yaml" if smoke else (
            params_path if step == "default-study" else root / "configs" / "fashionmnist_gpu.yaml")
        study = load_params(study_path)
        targets = ([f"train@{study.baselines[0]}-{study.fractions[0]}-{study.seeds[0]}"]
                   if smoke and step == "default-study" else [])
        limit = min(time_limit, 12.0) if smoke and step == "gpu-preset" else time_limit  # exercises the stop
        files = dataset_files if study.data.dataset == "fashionmnist" else None
        with tempfile.TemporaryDirectory(prefix="study-acceptance-") as scratch:
            project = acc.scratch_copy(root, Path(scratch) / "project", study_path, files, study.data.root)
            rows, summary = acc.timed_repro(project, targets, limit, out / f"dvc-{step}.log")
        acc.merge_csv(out / "stages.csv", pd.DataFrame(rows, columns=["stage", "seconds", "status"]), step)
        acc.merge_csv(out / "studies.csv", pd.DataFrame([{**summary, "params": study_path.name}]), step)
        done.append(f"{step}: {summary['stages_done']} stage(s) in {summary['seconds']:.0f} s"
                    + (" (stopped at the time limit)" if summary["stopped"] else "")
                    + ("" if summary["returncode"] == 0 or summary["stopped"] else " (FAILED, see the log)"))
    report = acc.render(out)
    return f"gpu-acceptance on {device.type}: " + "; ".join(done) + f" -> {report}"
