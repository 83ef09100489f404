"""``report.md``: the study written up from the pipeline's own tables, figures and metrics.

Every number and every sentence of the findings is generated here from files the earlier stages wrote;
nothing is typed in by hand. Re-running the pipeline rewrites the report.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from study.report.tables import write_table

QUESTION = (
    "When does a Vision Transformer beat a convolutional network, and why? We train a from-scratch ViT, "
    "a DeiT-style ViT distilled from a CNN teacher, and a ResNet under identical budgets on nested "
    "fractions of the training set, then compare accuracy, representations (CKA) and attention."
)
LIMITATIONS = [
    "Models and budgets are small so that the whole study reruns on a laptop CPU; absolute accuracies are "
    "below the state of the art and the ranking at larger scale may differ.",
    "Each point averages few seeds; confidence intervals use the Student t distribution over seeds and are wide.",
    "Hyperparameters were set once for the full-data runs and kept for every fraction (no per-fraction tuning); "
    "the budget convention across fractions is stated above and changes the small-data results.",
    "CKA and attention are measured for one training seed, on a fixed set of test images.",
    "The reported accuracy is the final model on the test set; the validation split is never used for selection.",
]


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _md_table(df: pd.DataFrame, digits: int = 4) -> str:
    def cell(v) -> str:
        if isinstance(v, float):
            return "–" if math.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    header = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def _figure(path: Path, report_dir: Path, caption: str) -> str:
    return f"![{caption}]({path.relative_to(report_dir).as_posix()})\n\n*{caption}*" if path.is_file() else ""


def findings(summary: pd.DataFrame, gaps: pd.DataFrame, crossings: pd.DataFrame, cka: pd.DataFrame | None,
             distance: pd.DataFrame | None) -> list[str]:
    """Plain-words statements, each computed from the tables."""
    out = []
    lo, hi = summary["fraction"].min(), summary["fraction"].max()
    for fraction, word in ((lo, "smallest"), (hi, "full")):
        at = summary[summary["fraction"] == fraction].sort_values("top1_mean", ascending=False)
        n = int(at["train_images"].iloc[0])
        ranking = ", ".join(f"{r.model} {_pct(r.top1_mean)}" for r in at.itertuples())
        out.append(f"With the {word} training set ({n} images), test top-1 ranks {ranking}.")
    for comparison, g in gaps.groupby("comparison", sort=False):
        first, last = g.sort_values("fraction").iloc[[0, -1]].itertuples()
        def side(r) -> str:
            ci = "" if math.isnan(r.gap_ci_low) else f" (CI {100 * r.gap_ci_low:+.1f} to {100 * r.gap_ci_high:+.1f})"
            return f"{100 * r.gap_mean:+.1f} points at fraction {r.fraction:g}{ci}"
        out.append(f"Gap {comparison}: {side(first)}; {side(last)}.")
    for r in crossings.itertuples():
        if pd.isna(r.crossover_train_images):
            out.append(f"The curves of {r.comparison.replace(' - ', ' and ')} do not cross in the measured range.")
        else:
            out.append(f"The curves of {r.comparison.replace(' - ', ' and ')} cross near "
                       f"{int(round(r.crossover_train_images))} training images.")
    if cka is not None and not cka.empty:
        smallest = cka[cka["fraction"] == cka["fraction"].min()]
        parts = ", ".join(f"{r.model} {r.mean_layer_cka_to_full:.2f}" for r in smallest.itertuples())
        out.append(f"At fraction {smallest['fraction'].iloc[0]:g}, mean per-layer CKA to the same model trained on "
                   f"all data is {parts} (1 = identical representations).")
    if distance is not None and not distance.empty:
        first = distance[distance["layer"] == 0]
        for model, g in first.groupby("model"):
            g = g.sort_values("fraction")
            out.append(
                f"{model}: first-block mean attention distance is {g['distance'].iloc[0]:.1f} px at fraction "
                f"{g['fraction'].iloc[0]:g} and {g['distance'].iloc[-1]:.1f} px at fraction {g['fraction'].iloc[-1]:g} "
                f"(uniform attention: {g['uniform'].iloc[0]:.1f} px); smaller means more local."
            )
    return out


def _read(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.is_file() else None


def write_report(
    *, report_dir: Path, tables_dir: Path, figures_dir: Path, runs: pd.DataFrame, setup: dict, prov: dict,
    out_tables: Path,
) -> tuple[str, dict]:
    """Compose ``report.md``; write the setup tables to ``out_tables``; return the text and headline metrics."""
    summary = pd.read_csv(tables_dir / "curves" / "data_efficiency.csv")
    gaps = pd.read_csv(tables_dir / "curves" / "gaps.csv")
    crossings = pd.read_csv(tables_dir / "curves" / "crossover.csv")
    fits = pd.read_csv(tables_dir / "curves" / "power_law.csv")
    cka = _read(tables_dir / "cka" / "cka_to_full.csv")
    distance = _read(tables_dir / "attention" / "attention_distance.csv")

    models = (runs.groupby("model", sort=False)
              .agg(arch=("arch", "first"), params=("params", "first"),
                   train_GFLOPs_full=("train_flops", "max"), throughput_img_s=("throughput", "median"))
              .reset_index())
    models["train_GFLOPs_full"] = (models["train_GFLOPs_full"] / 1e9).round(1)
    budgets = (runs.groupby("fraction").agg(train_images=("train_images", "median"), steps=("steps", "first"),
                                           images_seen=("images_seen", "first"), epochs=("epochs", "first"))
               .reset_index())
    heads = runs.dropna(subset=["test_top1_cls"])
    head_table = (heads.groupby(["model", "fraction"], as_index=False)
                  .agg(avg=("test_top1", "mean"), cls_head=("test_top1_cls", "mean"), dist_head=("test_top1_dist", "mean")))
    write_table(models, out_tables / "models", "Models: parameters, training FLOPs at full data, median throughput.", 1)
    write_table(budgets, out_tables / "budgets", "Identical budgets: steps and images seen per fraction, all models.", 2)
    write_table(head_table, out_tables / "deit_heads", "Distilled ViT: test top-1 of the class head, the distillation head and their average.")

    fig = lambda *parts: figures_dir.joinpath(*parts)  # noqa: E731
    lines = [
        "# When does a Vision Transformer beat a CNN?",
        "",
        "*Generated by `study report` from the outputs of `dvc repro`; do not edit by hand.*",
        "",
        "## Question", "", QUESTION, "",
        "## Findings", "", *[f"- {s}" for s in findings(summary, gaps, crossings, cka, distance)], "",
        "## Setup", "",
        f"- Dataset: **{setup['dataset']}**; validation split {setup['val_fraction']:.0%} of the training set "
        f"(stratified); the test set is used only for the final numbers.",
        f"- Fractions {setup['fractions']} (nested, stratified), seeds {setup['seeds']}.",
        f"- Budget: batch {setup['batch_size']}, convention `{setup['convention']}` "
        f"({setup['convention_text']}); every model at a fraction takes the same steps on the same data.",
        f"- Distillation: {setup['distill']}.",
        "", _md_table(models, 1), "", _md_table(budgets, 2), "",
        "Recipes (from `params.yaml`):", "", "```yaml", setup["recipes"].rstrip(), "```", "",
        "## Data efficiency", "",
        _figure(fig("curves", "data_efficiency.png"), report_dir,
                "Test accuracy and error against training images (log scale); bands: CI over seeds."), "",
        _md_table(summary[["model", "fraction", "train_images", "seeds", "top1_mean", "top1_ci_low", "top1_ci_high"]]), "",
        "Paired gaps (same subset and seed):", "", _md_table(gaps), "",
        "Power-law fits, error ≈ a·n^(−b) + c:", "", _md_table(fits), "",
    ]
    if not head_table.empty:
        lines += ["Distilled ViT, each head alone and their average (DeiT Table 3):", "", _md_table(head_table), ""]
    lines += [
        "## Representations (CKA)", "",
        _figure(fig("cka", "cka_within.png"), report_dir, "Linear CKA between layers within each model (full data)."), "",
        _figure(fig("cka", "cka_across.png"), report_dir, "Linear CKA between layers of different models (full data)."), "",
        _figure(fig("cka", "cka_to_full.png"), report_dir, "Per-layer CKA of each model to its own full-data counterpart."), "",
    ]
    if cka is not None:
        lines += [_md_table(cka), ""]
    lines += [
        "## Attention", "",
        _figure(fig("attention", "attention_distance.png"), report_dir,
                "Mean attention distance per head against depth; dashed: uniform attention."), "",
    ]
    for png in sorted(fig("attention").glob("attention_maps_*.png")):
        lines += [_figure(png, report_dir, png.stem.replace("_", " ")), ""]
    lines += ["## Limitations", "", *[f"- {s}" for s in LIMITATIONS], "",
              "## Provenance", "",
              f"- Code: commit `{prov['git_commit']}`{' (with uncommitted changes)' if prov['git_dirty'] else ''}",
              f"- `dvc.lock` SHA-256 `{prov['dvc_lock_sha256']}`; `params.yaml` SHA-256 `{prov['params_sha256']}`",
              f"- Training devices: {', '.join(prov['training_devices'])}; total training time {prov['training_seconds_total']:.0f} s",
              f"- Packages: " + ", ".join(f"{k} {v}" for k, v in prov["packages"].items()),
              f"- Generated {prov['generated_utc']}; full record in `provenance.json`.", ""]
    return "\n".join(lines), headline_metrics(summary, gaps)


def headline_metrics(summary: pd.DataFrame, gaps: pd.DataFrame) -> dict:
    """The numbers `dvc metrics show` lists: top-1 per model at the smallest and full fraction, and gaps."""
    lo, hi = summary["fraction"].min(), summary["fraction"].max()
    out: dict = {}
    for r in summary[summary["fraction"].isin([lo, hi])].itertuples():
        key = "full" if r.fraction == hi else "smallest"
        out.setdefault(r.model, {})[f"top1_{key}"] = round(float(r.top1_mean), 4)
    for r in gaps[gaps["fraction"].isin([lo, hi])].itertuples():
        key = "full" if r.fraction == hi else "smallest"
        out.setdefault("gaps", {}).setdefault(r.comparison.replace(" ", ""), {})[key] = round(float(r.gap_mean), 4)
    return out
