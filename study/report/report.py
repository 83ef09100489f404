"""``report.md``: the study written up from the pipeline's own tables, figures and metrics.

Every number and every sentence of the findings is generated here from files the earlier stages wrote;
nothing is typed in by hand. Re-running the pipeline rewrites the report.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from study.report.tables import markdown_table, write_table

QUESTION = (
    "When does a Vision Transformer beat a convolutional network, and why? We train a from-scratch ViT, "
    "a DeiT-style ViT distilled from a CNN teacher, and a ResNet under identical budgets on nested "
    "fractions of the training set, then compare accuracy, representations (CKA) and attention."
)


def _figure(path: Path, report_dir: Path, caption: str) -> str:
    return f"![{caption}]({path.relative_to(report_dir).as_posix()})\n\n*{caption}*" if path.is_file() else ""


def _read(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.is_file() else None


def _empty() -> pd.DataFrame:
    return pd.DataFrame()


def write_report(
    *, report_dir: Path, tables_dir: Path, figures_dir: Path, runs: pd.DataFrame, setup: dict, prov: dict,
    out_tables: Path,
) -> tuple[str, dict]:
    """Compose ``report.md``; write the setup tables to ``out_tables``; return the text and headline metrics."""
    from study.report import findings as F
    from study.report.limitations import limitations
    from study.report.mechanisms import attention_findings, cka_findings
    from study.report.mechanisms import limitations as mechanism_limitations

    curves = tables_dir / "curves"
    summary, gaps = pd.read_csv(curves / "data_efficiency.csv"), pd.read_csv(curves / "gaps.csv")
    crossings, trends = pd.read_csv(curves / "crossings.csv"), pd.read_csv(curves / "gap_trends.csv")
    fits = pd.read_csv(curves / "power_law.csv")
    distill = tables_dir / "distillation"
    teacher = _read(distill / "teacher.csv")
    agreement = _read(distill / "agreement.csv")
    agreement_gaps = _read(distill / "agreement_gaps.csv")

    models = (runs.groupby("model", sort=False)
              .agg(arch=("arch", "first"), params=("params", "first"),
                   train_GFLOPs_full=("train_flops", "max"), throughput_img_s=("throughput", "median"))
              .reset_index())
    models["train_GFLOPs_full"] = (models["train_GFLOPs_full"] / 1e9).round(1)
    budgets = (runs.groupby("fraction").agg(train_images=("train_images", "median"), steps=("steps", "first"),
                                           images_seen=("images_seen", "first"), epochs=("epochs", "first"),
                                           steps_from=("budget_source", "first"),
                                           still_improving=("under_trained", "sum"), runs=("seed", "size"))
               .reset_index())
    # The compute each model actually used at each fraction (every run records it): the budget is identical
    # across models in steps and images, not in FLOPs or seconds.
    compute = (runs.assign(train_TFLOPs=(runs["train_flops"] + runs["teacher_flops"]) / 1e12)
               .groupby(["model", "fraction"], sort=True)
               .agg(runs=("seed", "size"), steps=("steps", "first"), images_seen=("images_seen", "first"),
                    train_TFLOPs=("train_TFLOPs", "mean"), train_seconds=("train_seconds", "median"),
                    still_improving=("under_trained", "sum"))
               .reset_index())
    heads = runs.dropna(subset=["test_top1_cls"])
    head_table = (heads.groupby(["model", "fraction"], as_index=False)
                  .agg(avg=("test_top1", "mean"), cls_head=("test_top1_cls", "mean"), dist_head=("test_top1_dist", "mean")))
    write_table(models, out_tables / "models", "Models: parameters, training FLOPs at full data, median throughput.", 1)
    write_table(budgets, out_tables / "budgets", "Identical budgets: steps and images seen per fraction, all models; "
                "what set the steps; runs still improving at the end.", 2)
    write_table(compute, out_tables / "compute", "Compute used per model and fraction: optimiser steps, images seen, "
                "training TFLOPs (3 x forward, plus the teacher's forward for a distilled student; mean over seeds), "
                "median training seconds, runs still improving at the end.", 2)
    write_table(head_table, out_tables / "deit_heads", "Distilled ViT: test top-1 of the class head, the distillation head and their average.")

    accuracy = [*F.seeds_statement(summary), *F.ranking(summary), *F.gap_sentences(gaps),
                *F.crossing_sentences(crossings), *F.trend_sentences(trends)]
    distillation = (F.distillation_sentences(teacher, agreement, agreement_gaps if agreement_gaps is not None else _empty())
                    if teacher is not None and agreement is not None else [])
    mechanisms = [*cka_findings(tables_dir, reference=max(runs["fraction"])), *attention_findings(tables_dir)]
    limits = limitations(dataset=setup["dataset"], seeds=setup["seeds"], convention=setup["convention"],
                         min_steps=setup["min_steps"], runs=runs, selection=setup["selection"])
    limits += mechanism_limitations(tables_dir)

    fig = lambda *parts: figures_dir.joinpath(*parts)  # noqa: E731
    bullets = lambda sentences: [f"- {s}" for s in sentences]  # noqa: E731
    lines = [
        "# When does a Vision Transformer beat a CNN?",
        "",
        "*Generated by `study report` from the outputs of `dvc repro`; do not edit by hand.*",
        "",
        "## Question", "", QUESTION, "",
        "## Findings", "",
        "### Accuracy against training-set size", "", *bullets(accuracy), "",
        "### Convergence", "", *bullets([*F.convergence_sentences(runs), *F.fit_sentences(runs)]), "",
    ]
    if distillation:
        lines += ["### Distillation", "", *bullets(distillation), ""]
    lines += ["### Representations and attention", "", *bullets(mechanisms), "",
        "## Setup", "",
        f"- Dataset: **{setup['dataset']}**; validation split {setup['val_fraction']:.0%} of the training set "
        f"(stratified); the test set is used only for the final numbers.",
        f"- Fractions {setup['fractions']} (nested, stratified), seeds {setup['seeds']}.",
        f"- Budget: batch {setup['batch_size']}, convention `{setup['convention']}` "
        f"({setup['convention_text']}); every model at a fraction takes the same steps on the same data.",
        f"- Distillation: {setup['distill']}.",
        "", markdown_table(models, 1), "", markdown_table(budgets, 2), "",
        "Compute each model used (TFLOPs: 3 × forward per image seen, plus the teacher's forward; seconds: median "
        "over seeds, on the device of the run):", "", markdown_table(compute, 2), "",
        "Recipes (from `params.yaml`):", "", "```yaml", setup["recipes"].rstrip(), "```", "",
        "## Data efficiency", "",
        _figure(fig("curves", "data_efficiency.png"), report_dir,
                "Test accuracy against training images (log scale); bands: t-interval over seeds; ringed: runs "
                "still improving at the end."), "",
        markdown_table(summary[["model", "fraction", "train_images", "seeds", "top1_mean", "top1_ci_low", "top1_ci_high",
                           "train_top1_mean", "under_trained"]]), "",
        _figure(fig("curves", "gaps.png"), report_dir,
                "Paired gaps: thin bars raw t-intervals, thick bars Holm-adjusted; filled where a difference is claimed."), "",
        "Paired gaps (same subset and seed); `adj_*`: Holm-adjusted across the comparison's fractions:", "",
        markdown_table(gaps[["comparison", "train_images", "seeds", "gap_mean", "gap_ci_low", "gap_ci_high", "adj_ci_low",
                        "adj_ci_high", "p_holm", "significant", "under_trained_a", "under_trained_b"]]), "",
        "Gap trends per tenfold more training data:", "", markdown_table(trends), "",
        "Power-law fits, error ≈ a·n^(−b) + c, runs that are not step-bound; bootstrap intervals over seeds:", "",
        markdown_table(fits[["model", "a", "b", "b_ci_low", "b_ci_high", "c", "c_ci_low", "c_ci_high", "c_on_bound",
                        "rmse", "runs_used", "runs_step_bound"]]), "",
    ]
    if not head_table.empty:
        lines += ["Distilled ViT, each head alone and their average (DeiT Table 3):", "", markdown_table(head_table), ""]
    if teacher is not None:
        lines += ["## Distillation", "", "The teacher's accuracy on its own training images and on the test set:", "",
                  markdown_table(teacher), "", "Test-set agreement with the teacher (DeiT Table 4):", "", markdown_table(agreement), ""]
    lines += ["## Representations (CKA)", ""]
    for stem, caption in (("cka_within", "Linear CKA between layers within each model (full data, analysis seed)."),
                          ("cka_across", "Linear CKA between layers of different models (full data, analysis seed)."),
                          ("cka_to_full", "Per-layer CKA to a full-data model of another seed; dashed: the cross-seed "
                                          "ceiling (full data vs full data, another seed).")):
        lines += [_figure(fig("cka", f"{stem}.png"), report_dir, caption), ""]
    cka = _read(tables_dir / "cka" / "cka_to_full.csv")
    if cka is not None and not cka.empty:
        lines += ["CKA to a full-data model of another seed, mean over relative depth, beside the cross-seed ceiling; "
                  "gap = ceiling − CKA, paired by seed, Holm-adjusted:", "",
                  markdown_table(cka[["model", "fraction", "seeds", "mean_cka", "ci_low", "ci_high", "ceiling_mean",
                                 "gap_to_ceiling_mean", "gap_ci_low", "gap_ci_high", "gap_significant"]], 3), ""]
    lines += ["## Attention", "",
              _figure(fig("attention", "attention_distance.png"), report_dir,
                      "Mean attention distance per head against depth, trained and at initialisation; dashed: uniform attention."), ""]
    layers = _read(tables_dir / "attention" / "attention_layers.csv")
    if layers is not None and not layers.empty:
        lines += ["Per layer: the most local head (mean over seeds of each seed's smallest head distance, px), heads "
                  "below 0.75× the uniform distance, and mean attention entropy (nats), trained and at initialisation:", "",
                  markdown_table(layers[["model", "state", "fraction", "layer", "seeds", "most_local_distance",
                                    "most_local_ci_low", "most_local_ci_high", "local_heads", "mean_entropy",
                                    "uniform_distance", "uniform_entropy"]], 2), ""]
    for png in sorted(fig("attention").glob("attention_maps_*.png")):
        lines += [_figure(png, report_dir, png.stem.replace("_", " ")), ""]
    lines += ["## Limitations", "", *bullets(limits), "",
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
        entry = out.setdefault("gaps", {}).setdefault(r.comparison.replace(" ", ""), {})
        entry[key] = round(float(r.gap_mean), 4)
        entry[f"{key}_significant"] = bool(r.significant and r.inference)
    return out
