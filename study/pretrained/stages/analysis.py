"""Stage ``pretrained-analysis`` of the pretrained preset (pretrained/dvc.yaml): CKA, per-head attention distance
and rollout of the preset's pretrained checkpoints, in one pass over its images."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from study.core import runtime
from study.attention.figures import attention_distance_plot, attention_maps_figure, attention_maps_frame
from study.attention.locality import LOCAL_SHARE
from study.cka.figures import CKAPanel, cka_frame, cka_grid
from study.outputs.figure_style import save_figure
from study.core.errors import StudyError
from study.core.io import atomic_dir
from study.pretrained import analysis
from study.pretrained.images import list_images
from study.pretrained.load import open_checkpoint, resolve
from study.pretrained.params import PretrainedParams, load_pretrained_params
from study.outputs.tables import write_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoints", type=Path, required=True, help="folder the preset's sources are relative to")
    parser.add_argument("--images", type=Path, required=True, help="image folder (ImageFolder layout or flat JPEG/PNG)")
    parser.add_argument("--figures", type=Path, required=True, help="output folder for figures")
    parser.add_argument("--tables", type=Path, required=True, help="output folder for tables")


def main(args: argparse.Namespace) -> str:
    params = load_pretrained_params(args.params)  # the preset's own parameters file (configs/pretrained.yaml)
    runtime.configure(threads=params.analysis.threads)
    return run(params, args.checkpoints, args.images, args.figures, args.tables)


def run(params: PretrainedParams, checkpoints_dir: Path, images_dir: Path, figures: Path, tables: Path) -> str:
    """CKA, per-head attention distance and rollout of the preset's pretrained checkpoints (one pass)."""
    tic = time.perf_counter()
    a = params.analysis
    device = runtime.pick_device(a.device)
    paths = list_images(images_dir, params.images.count)
    if len(paths) < a.batch_size:
        raise StudyError(f"images.count {len(paths)} is below analysis.batch_size {a.batch_size}; CKA needs a whole "
                         "batch: raise the count or lower the batch size")
    checkpoints = {name: open_checkpoint(*resolve(m.source, m.weights, checkpoints_dir))
                   for name, m in params.models.items()}
    result = analysis.analyse(checkpoints, paths, a.batch_size, a.kernel, a.rbf_threshold, a.show, device)
    panels = [CKAPanel(result.block(x, y), result.layers[x], result.layers[y],
                       f"{x} (within)" if x == y else f"{x} vs {y}", x, y)
              for x, y in analysis.cka_pairs(result.layers)]
    within = [p for p in panels if p.row_name == p.col_name]
    across = [p for p in panels if p.row_name != p.col_name]
    layers = analysis.attention_layer_table(result.heads, LOCAL_SHARE)
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
        write_table(analysis.models_table(checkpoints, sources, result, checkpoints_dir), tmp / "models",
                    "The pretrained models: source, architecture, input, preprocessing, SHA-256 of the weights.")
        write_table(analysis.images_table(paths, images_dir, result.images), tmp / "images",
                    "The images analysed, in order, with their SHA-256.")
        write_table(cka_frame(panels), tmp / "cka", "Minibatch CKA (unbiased HSIC) between every layer pair, within "
                    "each model and across models.", 4)
        write_table(analysis.matched_depth_table(result), tmp / "cka_matched_depth",
                    "CKA between two models at matched relative depth.", 4)
        write_table(result.heads, tmp / "attention_heads", "Mean attention distance (px of the model's input) and "
                    "entropy (nats) of every head, with the uniform-attention references.", 3)
        write_table(layers, tmp / "attention_layers", f"Per block: most local, mean and least local head distance "
                    f"(px), heads below {LOCAL_SHARE:g} x uniform distance, mean entropy (nats).", 3)
    return (f"pretrained-analysis: {len(checkpoints)} models ({', '.join(checkpoints)}), {result.images} images, "
            f"{sum(map(len, result.layers.values()))} layers, {len(result.maps)} with attention maps, in "
            f"{time.perf_counter() - tic:.0f}s -> {figures}, {tables}")
