"""The smoke preset end to end through `dvc repro`, in a fresh copy of the project."""

import json

import pandas as pd
import torch
import yaml

from tests.conftest import dvc
from study.report.provenance import cpu_description

FIGURES = {
    "curves": ["data_efficiency", "gaps"],
    "cka": ["cka_within", "cka_across", "cka_to_full"],
    "attention": ["attention_distance", "attention_maps_vit_class_first", "attention_maps_deit_distillation_last"],
    "budget_check": ["budget_check"],
}


def test_repro_writes_every_output(smoke_study):
    reports = smoke_study / "reports"
    for folder, stems in FIGURES.items():
        for stem in stems:
            for suffix in (".png", ".pdf", ".csv"):
                assert (reports / "figures" / folder / f"{stem}{suffix}").stat().st_size > 0, (folder, stem, suffix)
    for table in ["curves/data_efficiency", "curves/gaps", "curves/power_law", "curves/crossings", "curves/gap_trends",
                  "distillation/teacher", "distillation/agreement", "distillation/agreement_gaps", "cka/cka_to_full",
                  "attention/attention_distance", "setup/models", "setup/budgets", "setup/deit_heads",
                  "budget_check/budget_check", "budget_check/runs"]:
        assert (reports / "tables" / f"{table}.csv").is_file()
        assert "\\toprule" in (reports / "tables" / f"{table}.tex").read_text()
    report = (reports / "report.md").read_text()
    for figure in ("figures/curves/data_efficiency.png", "figures/cka/cka_within.png", "figures/attention/attention_distance.png"):
        assert f"]({figure})" in report
    metrics = json.loads((reports / "metrics.json").read_text())
    assert set(metrics) >= {"resnet", "vit", "deit", "gaps"}
    provenance = json.loads((reports / "provenance.json").read_text())
    assert len(provenance["git_commit"]) == 40 and provenance["packages"]["torch"]
    assert provenance["cpu"]["logical_cpus"] >= 1 and provenance["cpu"]["model_name"]


def test_provenance_names_the_processor_the_numbers_came_from(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
                       "model name\t: AMD EPYC\n\n"
                       "processor\t: 1\ncpu family\t: 99\nmodel name\t: other\n")
    cpu = cpu_description(cpuinfo)
    assert (cpu["model_name"], cpu["family"], cpu["model"]) == ("AMD EPYC", "26", "2")  # the first processor's
    assert cpu["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()  # the kernels torch runs
    missing = cpu_description(tmp_path / "absent")  # not Linux: still a description, never an error
    assert missing["family"] is None and missing["model_name"]


def test_every_model_gets_the_same_budget_at_a_fraction(smoke_study):
    runs = pd.read_csv(smoke_study / "reports" / "tables" / "curves" / "runs.csv")
    params = yaml.safe_load((smoke_study / "params.yaml").read_text())
    assert len(runs) == len(params["fractions"]) * len(params["seeds"]) * 3
    per_fraction = runs.groupby("fraction")[["steps", "images_seen", "train_images"]].nunique()
    assert (per_fraction == 1).all().all(), per_fraction
    assert set(runs["convention"]) == {params["budget"]["convention"]}


def test_distilled_runs_record_both_heads(smoke_study):
    metrics = json.loads((smoke_study / "runs" / "deit" / "f1.0_s0" / "metrics.json").read_text())
    assert {"test_top1_cls", "test_top1_dist"} <= set(metrics)
    assert metrics["distill"]["teacher"] == "resnet" and metrics["teacher_flops"] > 0


def test_second_repro_runs_nothing_and_one_lr_change_reruns_only_that_model(smoke_scratch):
    again = dvc("repro", cwd=smoke_scratch)
    assert "Running stage" not in again.stdout, again.stdout
    assert "up to date" in dvc("status", cwd=smoke_scratch).stdout

    params_path = smoke_scratch / "params.yaml"
    original = params_path.read_text()
    raw = yaml.safe_load(original)
    raw["models"]["vit"]["lr"] *= 2
    params_path.write_text(yaml.safe_dump(raw))
    try:
        changed = {line.rstrip(":") for line in dvc("status", cwd=smoke_scratch).stdout.splitlines()
                   if line and not line.startswith((" ", "\t"))}
    finally:
        params_path.write_text(original)
    # The vit runs, its longer runs of the budget check, the report, whose setup section prints every recipe, and the
    # controls, which read the ViT's patch grid from the models' parameters.
    expected = ({f"train@vit-{f}-{s}" for f in raw["fractions"] for s in raw["seeds"]} | {"report", "controls"}
                | {f"train_2x@vit-{f}-{s}" for f in raw["budget_check"]["fractions"] for s in raw["seeds"]})
    assert changed == expected


def test_report_claims_exactly_the_differences_its_adjusted_intervals_support(smoke_study):
    gaps = pd.read_csv(smoke_study / "reports" / "tables" / "curves" / "gaps.csv")
    report = (smoke_study / "reports" / "report.md").read_text()
    findings = report.split("## Setup")[0]
    assert (gaps["seeds"] >= 3).all() and gaps["inference"].all()  # the smoke preset has 3 seeds
    for r in gaps.itertuples():
        a, b = r.comparison.split(" - ")
        where = f"at {r.train_images:,} images"
        if r.significant:
            winner = a if r.gap_mean > 0 else b
            assert f"{where} {100 * r.gap_mean:+.1f} points, {winner} ahead" in findings
        else:
            assert f"{where} no detectable difference" in findings
    assert "Holm-adjusted" in findings and "no inference is drawn" not in findings


def test_runs_record_convergence_train_accuracy_and_predictions(smoke_study):
    import numpy as np

    run = smoke_study / "runs" / "deit" / "f1.0_s0"
    metrics = json.loads((run / "metrics.json").read_text())
    assert set(metrics["convergence"]) == {"val_loss_change_last_quarter", "still_improving"}
    assert 0.0 <= metrics["train_top1"] <= 1.0 and metrics["budget"]["source"] in {"epochs", "floor"}
    predictions = np.load(run / "predictions.npy")
    test_size = json.loads((smoke_study / "data" / "prepared" / "manifest.json").read_text())["arrays"]["test_labels"]["shape"][0]
    assert predictions.shape == (3, test_size)  # the averaged heads, then the class and distillation heads
    history = pd.read_csv(run / "history.csv")
    assert len(history) == 4 and history["step"].iloc[-1] == metrics["budget"]["steps"]


def test_the_budget_check_pairs_every_checked_run_with_its_longer_run(smoke_study):
    params = yaml.safe_load((smoke_study / "params.yaml").read_text())
    check = params["budget_check"]
    pairs = pd.read_csv(smoke_study / "reports" / "tables" / "budget_check" / "runs.csv")
    assert len(pairs) == len(check["fractions"]) * len(params["seeds"]) * 3
    assert set(pairs["fraction"]) == set(check["fractions"]) and (pairs["factor"] == check["factor"]).all()
    assert (abs(pairs["steps_2x"] - 2 * pairs["steps_1x"]) <= 1).all()
    student = json.loads((smoke_study / "runs_2x" / "deit" / f"f{check['fractions'][0]}_s0" / "metrics.json").read_text())
    assert student["budget_factor"] == check["factor"] and student["distill"]["teacher"] == "resnet"
    cells = pd.read_csv(smoke_study / "reports" / "tables" / "budget_check" / "budget_check.csv")
    assert set(cells["verdict"]) <= {"converged", "budget-bound", "undetermined"} and (cells["seeds"] == 3).all()
