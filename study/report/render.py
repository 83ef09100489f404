"""``report.md``: the study written up from the pipeline's own tables, figures and metrics.

The one renderer: it reads the tables the analysis stages wrote (``reports/tables``) and those the report
stage derived from the runs (the setup tables), asks each topic module for its sentences (accuracy,
convergence, distillation, representations, attention, robustness, limitations) and lays out the sections.
Every number and every sentence is generated from those files and the parameters; nothing is typed in by hand,
and nothing is computed here beyond choosing rows. Re-running the pipeline rewrites the report.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from study.efficiency.report import (convergence_sentences, crossing_sentences, fit_sentences, gap_sentences,
                                   power_law_sentences, ranking, seeds_statement, trend_sentences)
from study.attention.report import attention_findings, model_contrast_sentences
from study.budget_check.report import budget_check_sentences
from study.distillation.report import distillation_sentences, teacher_view_sentences
from study.priors.report import gate_sentences, prior_sentences, priors_title, scramble_sentences
from study.report.format import confidence_levels, percent
from study.report.limitations import analysis_limitations, limitations
from study.representations.report import cka_findings
from study.robustness.report import headline_table, read_robustness, robustness_findings
from study.outputs.tables import markdown_table, read_table

def question(setup: dict) -> str:
    """The question, and the models this study trains to answer it (from ``setup``'s distillation and arms)."""
    arms = setup.get("arms") or {}
    trained = ["a from-scratch ViT"]
    if setup.get("distill"):
        trained.append("a DeiT-style ViT distilled from a CNN teacher")
    if arms.get("priors"):
        trained.append(f"ViTs given a CNN's priors ({', '.join(arms['priors'])})")
    trained.append("a ResNet")
    twins = list(arms.get("twins") or {})
    scrambled = f", with {_and(twins, serial=False)} on scrambled images" if twins else ""
    return ("When does a Vision Transformer beat a convolutional network, and why? We train " + _and(trained)
            + " under identical budgets on nested fractions of the training set" + scrambled
            + ", then compare accuracy, representations (CKA) and attention.")

DATASET_NAMES = {"fashionmnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100",
                 "digits": "scikit-learn digits"}
CONVENTION_TEXT = {
    "epochs": "each fraction trains the same number of epochs of its own data, with a minimum number of steps",
    "images": "each fraction sees as many images as the full-data run",
}


def _figure(path: Path, report_dir: Path, caption: str) -> str:
    return f"![{caption}]({path.relative_to(report_dir).as_posix()})\n\n*{caption}*" if path.is_file() else ""


def _bullets(sentences: list[str]) -> list[str]:
    return [f"- {s}" for s in sentences]


def distill_description(distill: dict | None) -> str:
    """The Setup section's distillation line, from ``params.distill`` (``None``: no distillation)."""
    if not distill:
        return "none"
    soft = f" (alpha {distill['alpha']}, tau {distill['tau']})" if distill["kind"] == "soft" else ""
    return (f"`{distill['student']}` learns from `{distill['teacher']}` trained on the same fraction and seed, "
            f"{distill['kind']} distillation{soft}")


def _and(items: list[str], serial: bool = True) -> str:
    """"a", "a and b", "a, b, and c" (``serial``: the comma before "and" from three items on)."""
    if len(items) < 3:
        return " and ".join(items)
    return ", ".join(items[:-1]) + (", and " if serial else " and ") + items[-1]


def report_title(setup: dict) -> str:
    """The report's title: the question, then the study it answers it with (dataset, fractions, budget), so that
    the reports of two presets never share a title."""
    fractions, epochs = sorted(setup["fractions"]), f"{setup['epochs']:g}"
    data = (f"{percent(fractions[0])}–{percent(fractions[-1])} of the training set" if len(fractions) > 1
            else f"{percent(fractions[0])} of the training set")
    if setup["convention"] == "epochs":
        budget = f"{epochs} epochs of each fraction's data" + (
            f", at least {setup['min_steps']:,} steps" if setup["min_steps"] else "")
    else:
        budget = f"as many images per fraction as {epochs} epochs of the full set"
    distill = setup.get("distill") or {}
    soft = (f", soft distillation (τ = {distill['tau']:g}, λ = {distill['alpha']:g})"
            if distill.get("kind") == "soft" else "")  # hard is the study's default: its titles stay as they were
    return (f"When does a Vision Transformer beat a CNN? {DATASET_NAMES.get(setup['dataset'], setup['dataset'])}, "
            f"{data}, {budget}{priors_title(setup.get('arms'))}{soft}")


def _design(header: str) -> list[str]:
    """The parameters file's opening comment, verbatim: how the design and the recipes were chosen, by which
    criterion, and which test numbers were seen before (issue 34: a report says so, not only its preset)."""
    if not header:
        return []
    return ["How this study was designed and its recipes chosen, in the words of its parameters file's header:", "",
            "```text", header, "```", ""]


def render_report(*, report_dir: Path, tables_dir: Path, setup_dir: Path, figures_dir: Path, setup: dict,
                  prov: dict) -> str:
    """The text of ``report.md``. ``setup``: the parameters the Setup section and the limitations word
    (dataset, val_fraction, fractions, seeds, batch_size, convention, min_steps, selection, distill, recipes);
    ``prov``: the provenance record; figure links are relative to ``report_dir``."""
    curves, distill, cka, attention = (tables_dir / name for name in ("curves", "distillation", "cka", "attention"))
    runs, summary = pd.read_csv(curves / "runs.csv"), pd.read_csv(curves / "data_efficiency.csv")
    gaps, crossings = pd.read_csv(curves / "gaps.csv"), pd.read_csv(curves / "crossings.csv")
    trends, fits = pd.read_csv(curves / "gap_trends.csv"), pd.read_csv(curves / "power_law.csv")
    teacher, agreement = read_table(distill / "teacher.csv"), read_table(distill / "agreement.csv")
    agreement_gaps = read_table(distill / "agreement_gaps.csv")
    views = read_table(distill / "teacher_views.csv")  # None: a study run before the views were counted
    to_full, layers = read_table(cka / "cka_to_full.csv"), read_table(attention / "attention_layers.csv")
    across = read_table(setup_dir / "cka_across_depth_mean.csv")
    models, budgets = pd.read_csv(setup_dir / "models.csv"), pd.read_csv(setup_dir / "budgets.csv")
    compute, heads = pd.read_csv(setup_dir / "compute.csv"), pd.read_csv(setup_dir / "deit_heads.csv")

    accuracy = [*seeds_statement(summary), *ranking(summary), *gap_sentences(gaps), *crossing_sentences(crossings),
                *trend_sentences(trends), *power_law_sentences(fits)]
    hard = (setup["distill"] or {}).get("kind") == "hard"
    distillation = (distillation_sentences(teacher, agreement,
                                           agreement_gaps if agreement_gaps is not None else pd.DataFrame(), hard)
                    + teacher_view_sentences(views, hard=hard)
                    if teacher is not None and agreement is not None else [])
    mechanisms = [*cka_findings(to_full, across, reference=max(runs["fraction"])),
                  *attention_findings(layers, read_table(attention / "attention_contrasts.csv")),
                  *model_contrast_sentences(read_table(attention / "attention_model_contrasts.csv"))]
    arms = setup.get("arms") or {"vit": None, "cnn": None, "priors": [], "twins": {}}
    gates, gate_contrasts = read_table(attention / "gates.csv"), read_table(attention / "gate_contrasts.csv")
    priors = [*prior_sentences(gaps, arms), *gate_sentences(gates, gate_contrasts), *scramble_sentences(gaps, arms)]
    robustness = read_robustness(tables_dir / "robustness")  # None for a study run before the stage existed
    budget_check = read_table(tables_dir / "budget_check" / "budget_check.csv")  # None: no budget check
    if budget_check is not None and budget_check.empty:
        budget_check = None
    limits = [*limitations(dataset=setup["dataset"], seeds=setup["seeds"], convention=setup["convention"],
                           min_steps=setup["min_steps"], runs=runs, selection=setup["selection"]),
              *analysis_limitations(to_full, across, read_table(attention / "attention_heads.csv"))]

    fig = figures_dir.joinpath
    lines = [
        f"# {report_title(setup)}",
        "",
        "*Generated by `study report` from the outputs of `dvc repro`; do not edit by hand.*",
        "",
        "## Question", "", question(setup), "",
        "## Findings", "",
        confidence_levels(setup["confidence"]), "",
        "### Accuracy against training-set size", "", *_bullets(accuracy), "",
        "### Convergence", "",
        *_bullets([*convergence_sentences(runs), *fit_sentences(pd.read_csv(setup_dir / "training_fit.csv"))]), "",
    ]
    if budget_check is not None:
        lines += ["#### Budget check", "", *_bullets(budget_check_sentences(budget_check)), ""]
    if distillation:
        lines += ["### Distillation", "", *_bullets(distillation), ""]
    if priors:
        lines += ["### Priors: what each buys, and what it costs on scrambled images", "", *_bullets(priors), ""]
    lines += ["### Representations and attention", "", *_bullets(mechanisms), ""]
    if robustness is not None:
        lines += ["### Where the ViT wins", "", *_bullets(robustness_findings(robustness)), ""]
    lines += [
        "## Setup", "",
        f"- Dataset: **{setup['dataset']}**; validation split {percent(setup['val_fraction'])} of the training set "
        f"(stratified); the test set is used only for the final numbers.",
        f"- Fractions {setup['fractions']} (nested, stratified), seeds {setup['seeds']}.",
        f"- Budget: batch {setup['batch_size']}, convention `{setup['convention']}` "
        f"({CONVENTION_TEXT[setup['convention']]}); every model at a fraction takes the same steps on the same data.",
        f"- Distillation: {distill_description(setup['distill'])}.",
        "", markdown_table(models, 1), "", markdown_table(budgets, 2), "",
        "Compute each model used (TFLOPs: 3 × forward per image seen, plus the teacher's forward; seconds: median "
        "over seeds, on the device of the run):", "", markdown_table(compute, 2), "",
        "Recipes (from `params.yaml`):", "", "```yaml", setup["recipes"].rstrip(), "```", "",
        *_design(setup.get("design", "")),
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
                        "identified", "rmse", "runs_used", "runs_step_bound"]]), "",
    ]
    if not heads.empty:
        lines += ["Distilled ViT, each head alone and their average (DeiT Table 3):", "", markdown_table(heads), ""]
    if budget_check is not None:
        lines += _budget_check_section(fig, report_dir, budget_check)
    if teacher is not None:
        lines += ["## Distillation", "", "The teacher's accuracy on its own training images and on the test set:", "",
                  markdown_table(teacher), "", "Test-set agreement with the teacher (DeiT Table 4):", "",
                  markdown_table(agreement), ""]
        if views is not None and not views.empty:
            lines += ["The student's training views (as augmented) whose teacher label differs from the true label: "
                      "mean share and t-interval over seeds; views counted over all seeds:", "",
                      markdown_table(views), ""]
    lines += _representations_section(fig, report_dir, to_full)
    lines += _attention_section(fig, report_dir, layers)
    if gates is not None and not gates.empty:
        lines += ["### ConViT's gates", "",
                  _figure(fig("attention", "gates.png"), report_dir,
                          "Head-mean gate σ(λ) per GPSA block against training images; bars: t-interval over seeds; "
                          "dashed: σ(1), every gate's value at initialisation."), "",
                  markdown_table(gates), "", "Largest fraction minus smallest, paired by seed:", "",
                  markdown_table(gate_contrasts), ""]
    if robustness is not None:
        lines += _robustness_section(fig, report_dir, robustness)
    lines += ["## Limitations", "", *_bullets(limits), "", *_provenance_section(prov)]
    return "\n".join(lines)


def _budget_check_section(fig, report_dir: Path, cells: pd.DataFrame) -> list[str]:
    """The budget check's figure and per-cell table (stage ``budget_check``), below the data-efficiency curves whose
    runs it trains again."""
    return ["## Budget check", "",
            _figure(fig("budget_check", "budget_check.png"), report_dir,
                    "Change of test top-1 with a longer budget (longer − study's run, paired by seed) per model and "
                    "checked fraction: thin bars t-intervals, thick bars Holm-adjusted; grey: the tolerance band; "
                    "filled where a verdict (converged or budget-bound) was reached."), "",
            "Per model and checked fraction: steps and mean test top-1 at both budgets, the mean change with its "
            "Holm-adjusted interval, the verdict, "
            + ("the seeds that would show the cell converged if its mean and SD held (a projection; inf: none "
               "would), " if "seeds_to_converge" in cells else "")
            + "and the runs the last-quarter screen flagged as still improving:",
            "",
            markdown_table(cells[[c for c in ("model", "fraction", "train_images", "seeds", "steps_1x", "steps_2x",
                                              "top1_1x_mean", "top1_2x_mean", "delta_mean", "adj_ci_low", "adj_ci_high",
                                              "verdict", "seeds_to_converge", "still_improving_1x",
                                              "still_improving_2x") if c in cells]]), ""]


def _representations_section(fig, report_dir: Path, to_full: pd.DataFrame | None) -> list[str]:
    lines = ["## Representations (CKA)", ""]
    captions = (
        ("cka_within", "Linear CKA between layers within each model (full data, analysis seed); colours span the "
                       "data's range."),
        ("cka_across", "Linear CKA between layers of different models (full data, analysis seed); colours span the "
                       "data's range."),
        ("cka_to_full", "Per-layer CKA to the reference-fraction model of another seed; dashed: the cross-seed "
                        "ceiling (reference fraction vs reference fraction, another seed); dotted: the same comparison "
                        "between two random initialisations (chance)."),
        ("cka_across_depth", "CKA between models at matched relative depth; dashed: each model's cross-seed ceiling; "
                             "dotted: the two models at initialisation (chance); hatched: input embeddings, left out "
                             "of depth means."))
    for stem, caption in captions:
        if fig("cka", f"{stem}.png").exists():
            lines += [_figure(fig("cka", f"{stem}.png"), report_dir, caption), ""]
    if to_full is not None and not to_full.empty:
        lines += ["CKA to the reference-fraction model of another seed, mean over relative depth past the input "
                  "embedding, beside the cross-seed ceiling and the chance level (initial weights); gap = ceiling − "
                  "CKA, paired by seed, Holm-adjusted:", "",
                  markdown_table(to_full[["model", "fraction", "seeds", "mean_cka", "ci_low", "ci_high", "ceiling_mean",
                                          "chance_mean", "gap_to_ceiling_mean", "gap_ci_low", "gap_ci_high",
                                          "gap_significant"]], 3), ""]
    return lines


def _attention_section(fig, report_dir: Path, layers: pd.DataFrame | None) -> list[str]:
    lines = ["## Attention", "",
             _figure(fig("attention", "attention_distance.png"), report_dir,
                     "Mean attention distance per head against depth, trained and at initialisation; dashed: uniform attention."), ""]
    if layers is not None and not layers.empty:
        lines += ["Per layer: the most local head (mean over seeds of each seed's smallest head distance, px), heads "
                  "below 0.75× the uniform distance, and mean attention entropy (nats), trained and at initialisation:", "",
                  markdown_table(layers[["model", "state", "fraction", "layer", "seeds", "most_local_distance",
                                         "most_local_ci_low", "most_local_ci_high", "mean_distance", "local_heads",
                                         "mean_entropy", "uniform_distance", "uniform_entropy"]], 2), ""]
    for png in sorted(fig("attention").glob("attention_maps_*.png")):
        lines += [_figure(png, report_dir, png.stem.replace("_", " ")), ""]
    return lines


def _robustness_section(fig, report_dir: Path, tables: dict) -> list[str]:
    lines = ["## Robustness probes", "",
             "Top-1 at the headline conditions, mean and t-interval over seeds (%):", "",
             headline_table(tables["headline"]), ""]
    for stem, caption in (
            ("occlusion", "Top-1 against the share of grid cells set to black: the ViT's patch grid (solid) and the "
                          "same grid offset by half a cell (dashed); bands: t-intervals over seeds."),
            ("rearrangement", "Top-1 when the cells of a grid are permuted per image (patch shuffle)."),
            ("translation", "Top-1 against a shift with zero fill along x (solid), y (dashed) and the diagonal (dotted)."),
            ("corruption_errors", "Each corruption's error relative to the reference CNN (summed over severities; "
                                  "1: as robust, below 1: more robust); bars: t-intervals over seeds."),
            ("contrasts", "Top-1 differences from the reference CNN at the headline conditions against training "
                          "images; bars: Holm-adjusted intervals, filled where they exclude 0.")):
        lines += [_figure(fig("robustness", f"{stem}.png"), report_dir, caption), ""]
    mce = tables["mce"]
    if mce is not None and not mce.empty:
        lines += ["Mean corruption error against the reference CNN of the same fraction and seed (1: as robust); "
                  "`adj_*`: Holm-adjusted across fractions:", "",
                  markdown_table(mce[["model", "measure", "train_images", "seeds", "mean", "ci_low", "ci_high",
                                      "adj_ci_low", "adj_ci_high", "significant"]], 3), ""]
    lines += ["Every condition's means, contrasts, trends and flips: `reports/tables/robustness/` (CSV and LaTeX).", ""]
    return lines


def _provenance_section(prov: dict) -> list[str]:
    code, runs = len(prov["code_sha256"]), len(prov["runs_sha256"])
    return ["## Provenance", "",
            f"- Code: commit `{prov['git_commit']}`{' (with uncommitted changes)' if prov['git_dirty'] else ''}",
            f"- SHA-256 of `params.yaml` `{prov['params_sha256']}`; `provenance.json` lists the SHA-256 of the "
            f"{code} source files the pipeline's stages run, of the prepared data's manifest and of {runs} files of "
            "the runs (metrics, weights, predictions), each path from the project root, to check with `sha256sum`",
            f"- Training devices: {', '.join(prov['training_devices'])}; total training time "
            f"{prov['training_seconds_total']:.0f} s",
            "- Packages: " + ", ".join(f"{k} {v}" for k, v in prov["packages"].items()),
            f"- Generated {prov['generated_utc']}; full record in `provenance.json`.", ""]


def headline_metrics(tables_dir: Path) -> dict:
    """The numbers `dvc metrics show` lists: top-1 per model at the smallest and full fraction, and gaps."""
    summary = pd.read_csv(tables_dir / "curves" / "data_efficiency.csv")
    gaps = pd.read_csv(tables_dir / "curves" / "gaps.csv")
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
