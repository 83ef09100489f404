"""The report stage: one formatter per kind of number, the committed studies' reports re-rendered from their own
tables, and a provenance record whose digests a reader can recompute from the files."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from study.core import cli
from study.writing.format import confidence_levels, interval, no_detectable, percent, plural, share
from study.report.provenance import pipeline_code

ROOT = Path(__file__).resolve().parents[2]
STUDIES = {"default": ROOT / "reports", "quick": ROOT / "reports" / "quick", "priors": ROOT / "reports" / "priors",
           "distillation": ROOT / "reports" / "distillation",
           "distillation_soft": ROOT / "reports" / "distillation_soft",
           "small_data": ROOT / "reports" / "small_data", "priors_10pct": ROOT / "reports" / "priors_10pct",
           "controls": ROOT / "reports" / "controls"}
SETUP_TABLES = ("models", "budgets", "compute", "deit_heads")  # committed with each report; must re-render exactly


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- formatting ------------------------------------------------------------------------------------------


def test_each_preset_report_has_a_title_naming_its_study():
    from study.report.render import report_title
    from study.report.stage import setup_facts
    from tests.conftest import load_study, study_files

    titles = {name: report_title(setup_facts(load_study(name))) for name in study_files()}
    assert len(set(titles.values())) == len(titles), titles
    assert titles["pilot.yaml"] == ("When does a Vision Transformer beat a CNN? Fashion-MNIST, 0.25%–4% of the "
                                    "training set, 30 epochs of each fraction's data, at least 300 steps")
    # the confirmatory study differs from the pilot in its fractions and its soft distillation, and says so
    assert titles["params.yaml"] == ("When does a Vision Transformer beat a CNN? Fashion-MNIST, 0.5%–4% of the "
                                     "training set, 30 epochs of each fraction's data, at least 300 steps, soft "
                                     "distillation (τ = 3, λ = 0.1)")
    assert titles["quick.yaml"].endswith("Fashion-MNIST, 1%–100% of the training set, 2 epochs of each fraction's "
                                         "data, at least 150 steps")
    # The two distillation presets differ only in the kind of distillation, and their titles say so.
    assert titles["distillation_soft.yaml"] == titles["distillation.yaml"] + ", soft distillation (τ = 3, λ = 0.1)"


def test_the_report_prints_how_its_study_was_designed_from_its_parameters_files_header():
    from study.report.stage import header_comment

    assert header_comment("# The study\n# - why: x\n#\ndata:\n  a: 1  # not this\n# nor this\n") == "The study\n- why: x"
    assert header_comment("data: {}\n") == ""
    # The pilot's header says which criterion chose the augmentation, since it was not validation top-1; the
    # confirmatory study's says where its seeds, fractions and plan came from.
    assert "no augmentation, chosen for CONVERGENCE, not for validation top-1" in header_comment(
        (ROOT / "configs" / "pilot.yaml").read_text()).replace("\n", " ")
    confirmatory = header_comment((ROOT / "params.yaml").read_text()).replace("\n", " ")
    assert "The confirmatory study" in confirmatory and "seeds 100-105 draw fresh subsets" in confirmatory


def test_set_fractions_print_exactly_and_never_as_zero():
    assert [percent(f) for f in (0.005, 0.01, 0.03, 0.05, 0.1, 0.29, 1.0)] == \
        ["0.5%", "1%", "3%", "5%", "10%", "29%", "100%"]
    assert f"{0.005:.0%}" == "0%"  # the formatter it replaces


def test_measured_shares_keep_one_decimal_and_say_when_missing():
    assert (share(0.90134), share(0.01), share(float("nan")), share(None)) == ("90.1%", "1.0%", "n/a", "n/a")


def test_intervals_and_counts():
    assert interval(0.61, 0.744, 2) == "CI 0.61 to 0.74"
    assert interval(-0.2063, -0.0214, 1, scale=100, signed=True, label="adjusted CI") == "adjusted CI -20.6 to -2.1"
    assert interval(-0.5, 1.25, 2, signed=True, unit=" px") == "CI -0.50 to +1.25 px"
    assert interval(float("nan"), 1.0, 2) == "no interval"
    assert (plural(1, "seed"), plural(3, "seed"), plural(0, "degree")) == ("1 seed", "3 seeds", "0 degrees")


def test_a_null_result_states_the_differences_its_interval_excludes():
    ci = interval(-0.02, 0.03, 1, scale=100, signed=True, label="adjusted CI")
    assert no_detectable("difference", "+0.5 points", ci, 0.03, 1, scale=100, unit=" points") == \
        "no detectable difference (+0.5 points, adjusted CI -2.0 to +3.0; differences beyond ±3.0 points excluded)"
    assert no_detectable("difference", "-0.32 px", "CI -0.97 to +0.32 px", 0.97, 2, unit=" px",
                         versus=" from initialisation") == \
        "no detectable difference from initialisation (-0.32 px, CI -0.97 to +0.32 px; differences beyond ±0.97 px " \
        "excluded)"
    assert no_detectable("trend", "+0.1", "no interval", float("nan"), 1) == "no detectable trend (+0.1, no interval)"


def test_the_confidence_levels_are_explained_with_holms_levels():
    text = confidence_levels(0.95)
    assert text.startswith("Intervals are 95% Student-t intervals over seeds")
    assert "1 − α/(m − k + 1) with α = 5% (hence 97.5%, 98.3%, 98.8% …)" in text
    assert "with α = 10% (hence 95.0%, 96.7%, 97.5% …)" in confidence_levels(0.9)


def test_only_hard_distillation_is_said_to_add_little_where_the_teacher_fits_its_images():
    from study.distillation.report import distillation_sentences

    teacher = pd.DataFrame({"model": ["resnet", "resnet"], "train_images": [290, 1140], "train_top1_mean": [1.0, 0.98],
                            "test_top1_mean": [0.75, 0.82]})
    no_gaps = pd.DataFrame(columns=["comparison"])
    hard, = distillation_sentences(teacher, pd.DataFrame(), no_gaps, hard=True)
    soft, = distillation_sentences(teacher, pd.DataFrame(), no_gaps, hard=False)
    assert "hard distillation adds little signal" in hard
    assert soft == hard[:hard.index(" Where train top-1")] and soft.startswith("Teacher (resnet) top-1")


def test_distillation_sentences_carry_the_equivalence_bound_of_a_null_agreement_gap():
    from study.distillation.report import distillation_sentences

    gap = {"comparison": "deit - vit", "fraction": 1.0, "train_images": 57000, "seeds": 3, "gap_mean": 0.005,
           "adj_ci_low": -0.02, "adj_ci_high": 0.03, "significant": False, "inference": True,
           "equivalence_bound": 0.03, "under_trained_a": 0, "under_trained_b": 0}
    sentence, = distillation_sentences(pd.DataFrame(), pd.DataFrame(), pd.DataFrame([gap]))
    assert sentence == ("Agreement with the teacher, deit − vit: at 57,000 images no detectable difference (+0.5 "
                        "points, adjusted CI -2.0 to +3.0; differences beyond ±3.0 points excluded). Intervals are "
                        "Holm-adjusted across the 1 fraction.")


# --- the report stage on a committed study ---------------------------------------------------------------


def _metrics(run) -> dict:
    """A run's metrics.json, rebuilt from its row of the committed run table (collect_runs reads it back)."""
    optional = {k: getattr(run, k) for k in ("test_top1_cls", "test_top1_dist") if not pd.isna(getattr(run, k))}
    return {
        "model": run.model, "arch": run.arch, "fraction": run.fraction, "seed": run.seed,
        "budget": {"train_images": run.train_images, "steps": run.steps, "images_seen": run.images_seen,
                   "epochs": run.epochs, "convention": run.convention, "source": run.budget_source},
        "convergence": {"still_improving": bool(run.under_trained)},
        "test_top1": run.test_top1, "test_loss": run.test_loss, "val_top1": run.val_top1,
        "train_top1": run.train_top1, **optional,
        "params": run.params, "train_flops": run.train_flops, "teacher_flops": run.teacher_flops,
        "train_seconds": run.train_seconds, "throughput_images_per_s": run.throughput, "device": run.device,
    }


def _distill_as_list(params_text: str) -> str:
    """``params_text`` with a ``distill`` mapping (the committed quick and distillation reports' params hold one)
    as the one-entry list the params take; comments and every other line unchanged."""
    block = re.search(r"^distill:[ \t]*(#[^\n]*)?\n((?:  [^\n]*\n)+)", params_text, re.M)
    flow = re.search(r"^distill: (\{[^}\n]*\})", params_text, re.M)
    if flow:
        return params_text[:flow.start(1)] + f"[{flow.group(1)}]" + params_text[flow.end(1):]
    if block:
        entry = yaml.safe_load(block.group(2))
        listed = "distill: [{" + ", ".join(f"{k}: {v}" for k, v in entry.items()) + "}]"
        comment = f"  {block.group(1)}" if block.group(1) else ""
        return params_text[:block.start()] + listed + comment + "\n" + params_text[block.end():]
    return params_text


def _project(committed: Path, tmp: Path) -> Path:
    """A project in ``tmp`` holding what the report stage reads: the committed study's parameters, analysis
    tables and figure names, runs rebuilt from its run table (with stand-in weights), this checkout's code
    and dvc.yaml, and a stand-in data manifest."""
    provenance = json.loads((committed / "provenance.json").read_text())
    # a study whose statistics `study rerender` recomputed was rendered with the parameters it recorded
    rendered_with = provenance.get("rerendered", {}).get("params") or provenance["params"]
    (tmp / "params.yaml").write_text(_distill_as_list(rendered_with))
    shutil.copy(ROOT / "dvc.yaml", tmp / "dvc.yaml")
    (tmp / "study").symlink_to(ROOT / "study", target_is_directory=True)  # this checkout's code, as installed
    (tmp / "data" / "prepared").mkdir(parents=True)
    (tmp / "data" / "prepared" / "manifest.json").write_text('{"arrays": {}}\n')
    shutil.copytree(committed / "tables", tmp / "reports" / "tables", ignore=shutil.ignore_patterns("setup"))
    for png in (committed / "figures").rglob("*.png"):  # the report links the figures that exist
        target = tmp / "reports" / "figures" / png.relative_to(committed / "figures")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    rng = np.random.default_rng(0)
    for run in pd.read_csv(committed / "tables" / "curves" / "runs.csv").itertuples():
        folder = tmp / "runs" / run.model / f"f{run.fraction}_s{run.seed}"
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps(_metrics(run), default=lambda x: x.item()))
        for name in ("init.pt", "model.pt", "predictions.npy", "history.csv"):
            (folder / name).write_bytes(rng.bytes(32))
    return tmp


@pytest.fixture(params=list(STUDIES), ids=list(STUDIES))
def rendered(request, tmp_path, monkeypatch):
    """(committed study folder, project folder) after `study report` ran in the project."""
    committed = STUDIES[request.param]
    project = _project(committed, tmp_path)
    monkeypatch.chdir(project)
    code = cli.main(["report", "--params", "params.yaml", "--runs", "runs", "--tables", "reports/tables",
                     "--figures", "reports/figures", "--manifest", "data/prepared/manifest.json",
                     "--pipeline", "dvc.yaml", "--out", "reports/report.md", "--metrics", "reports/metrics.json",
                     "--provenance", "reports/provenance.json", "--setup-tables", "reports/tables/setup"])
    assert code == 0
    return committed, project


def test_the_committed_report_re_renders_from_its_tables_up_to_its_provenance(rendered):
    committed, project = rendered
    before = lambda text: text.split("## Provenance")[0]  # noqa: E731
    assert before((project / "reports" / "report.md").read_text()) == before((committed / "report.md").read_text())
    assert json.loads((project / "reports" / "metrics.json").read_text()) == \
        json.loads((committed / "metrics.json").read_text())
    for stem in SETUP_TABLES:  # recomputed from the runs (study.report.setup), byte for byte the committed ones
        for suffix in (".csv", ".tex"):
            name = f"{stem}{suffix}"
            assert (project / "reports/tables/setup" / name).read_bytes() == (committed / "tables/setup" / name).read_bytes()


def test_provenance_digests_equal_those_recomputed_from_the_files(rendered):
    _, project = rendered
    prov = json.loads((project / "reports" / "provenance.json").read_text())
    assert "dvc_lock_sha256" not in prov  # rewritten by DVC right after the stage: never checkable
    assert prov["params_sha256"] == sha256(project / "params.yaml")
    recorded = {**prov["code_sha256"], **prov["data_sha256"], **prov["runs_sha256"]}
    assert recorded == {path: sha256(project / path) for path in recorded}
    assert set(prov["data_sha256"]) == {"data/prepared/manifest.json"}
    runs = {str(p.relative_to(project)) for p in (project / "runs").rglob("*") if p.is_file()}
    assert set(prov["runs_sha256"]) == {p for p in runs if not p.endswith("history.csv")}  # read by no analysis
    # Every study/ file a stage of dvc.yaml lists, folders expanded, and nothing Python or DVC writes.
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"].values()
    listed = {dep if isinstance(dep, str) else next(iter(dep)) for s in stages for dep in s["deps"]}
    expected = set()
    for dep in (d for d in listed if d.startswith("study")):
        target = project / dep
        expected |= ({str(p.relative_to(project)) for p in target.rglob("*.py")} if target.is_dir() else {dep})
    assert set(prov["code_sha256"]) == expected
    written = {"reports/report.md", "reports/metrics.json", "reports/provenance.json", "dvc.lock"}
    assert not written & set(recorded)


def test_the_budget_check_and_the_teacher_views_enter_the_report_and_the_provenance(tmp_path, monkeypatch):
    """A smoke-sized study from synthetic runs (curves and distillation stages run for real, distilled runs with
    teacher view counts) with a budget check added: the report gains the check's sentences under Convergence, a
    section with its figure and table, and the view sentences and table under Distillation; the provenance digests
    the longer runs (runs_2x) as it digests the runs."""
    from study.budget_check.check import RUN_COLUMNS, budget_check_table
    from study.core.config import parse_params
    from study.budget_check.report import budget_check_sentences
    from study.distillation.report import teacher_view_sentences
    from study.outputs.tables import read_table, write_table
    import study.curves.stage as curves
    import study.distillation.stage as distillation
    from tests.budget_check.test_budget_check import SMOKE
    from tests.distillation.test_teacher_views import _study_runs

    project, params = tmp_path, parse_params(SMOKE)
    (project / "params.yaml").write_text(yaml.safe_dump(SMOKE))
    shutil.copy(ROOT / "dvc.yaml", project / "dvc.yaml")
    (project / "data" / "prepared").mkdir(parents=True)
    (project / "data" / "prepared" / "manifest.json").write_text('{"arrays": {}}\n')
    runs, tables, figures = _study_runs(project / "runs", True), project / "reports/tables", project / "reports/figures"
    curves.run(params, runs, figures / "curves", tables / "curves")
    distillation.run(params, runs, tables / "distillation")
    deltas = {"resnet": [0.001, -0.002, 0.0005], "vit": [0.10, 0.11, 0.12], "deit": [-0.05, 0.0, 0.08]}
    pairs = pd.DataFrame([(m, 0.5, seed, 650, 2.0, 101, 202, 0.8, 0.8 + d, d, False, False)
                          for m, values in deltas.items() for seed, d in enumerate(values)], columns=RUN_COLUMNS)
    write_table(budget_check_table(pairs, 0.95, 0.01), tables / "budget_check" / "budget_check", "budget check")
    (figures / "budget_check").mkdir()
    (figures / "budget_check" / "budget_check.png").touch()
    longer = set()
    for model, fraction, seed in pairs[["model", "fraction", "seed"]].itertuples(index=False):
        folder = project / "runs_2x" / model / f"f{fraction}_s{seed}"
        folder.mkdir(parents=True)
        for name in ("metrics.json", "model.pt", "history.csv"):  # history.csv: digested for no run
            (folder / name).write_text(f"{model} {seed} {name}")
        longer |= {f"runs_2x/{model}/f{fraction}_s{seed}/{name}" for name in ("metrics.json", "model.pt")}
    monkeypatch.chdir(project)
    code = cli.main(["report", "--params", "params.yaml", "--runs", "runs", "--runs-2x", "runs_2x", "--tables",
                     "reports/tables", "--figures", "reports/figures", "--manifest", "data/prepared/manifest.json",
                     "--pipeline", "dvc.yaml", "--out", "reports/report.md", "--metrics", "reports/metrics.json",
                     "--provenance", "reports/provenance.json", "--setup-tables", "reports/tables/setup"])
    assert code == 0
    text = (project / "reports" / "report.md").read_text()
    findings = text.split("## Setup")[0]
    check = "\n".join(["#### Budget check", "", *(f"- {s}" for s in budget_check_sentences(
        read_table(tables / "budget_check" / "budget_check.csv")))])
    assert check in findings
    assert "- 1 of 3 cells converged, 0 not budget-bound, 1 budget-bound, 1 undetermined." in check
    assert findings.index("### Convergence") < findings.index(check) < findings.index("### Distillation")
    sentences = teacher_view_sentences(read_table(tables / "distillation" / "teacher_views.csv"), hard=True)
    assert len(sentences) == 2 and sentences[1].startswith("At 50% of the data the teacher gave every one of deit's")
    assert all(f"- {s}" in findings.split("### Distillation")[1] for s in sentences)
    section = text.split("\n## Budget check\n")[1].split("\n## ")[0]
    assert "](figures/budget_check/budget_check.png)" in section
    assert ("| model | fraction | train_images | seeds | steps_1x | steps_2x | top1_1x_mean | top1_2x_mean | "
            "delta_mean | adj_ci_low | adj_ci_high | verdict | seeds_to_converge | still_improving_1x | "
            "still_improving_2x |") in section
    assert "| vit | 0.5 | 650 | 3 | 101 | 202 | 0.8000 | 0.9100 | 0.1100 |" in section
    distilled = text.split("\n## Distillation\n")[1].split("\n## ")[0]
    assert "| model | fraction | train_images | seeds | views | disagreement_mean | ci_low | ci_high |" in distilled
    assert "| deit | 0.5 | 650 | 3 | 19200 | 0.0000 | 0.0000 | 0.0000 |" in distilled
    prov = json.loads((project / "reports" / "provenance.json").read_text())
    assert {p for p in prov["runs_sha256"] if p.startswith("runs_2x/")} == longer
    assert all(prov["runs_sha256"][p] == sha256(project / p) for p in longer)
    study_runs = {p.relative_to(project).as_posix() for p in (project / "runs").rglob("*") if p.is_file()}
    assert set(prov["runs_sha256"]) == longer | study_runs  # the runs' metrics and predictions, as before


def test_bytecode_never_enters_the_code_digests(tmp_path):
    (tmp_path / "study" / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "study" / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "study" / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "study" / "one.py").write_text("y = 2\n")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "a": {"cmd": "study a", "deps": ["study/pkg", "data/x", "runs/${item.model}/model.pt"]},
        "b": {"cmd": "study b", "deps": [{"study/one.py": {}}]}}}))
    assert [p.relative_to(tmp_path).as_posix() for p in pipeline_code(tmp_path / "dvc.yaml")] == \
        ["study/one.py", "study/pkg/mod.py"]


def _latex_rows(tex: str) -> list[str]:
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
    return [line for line in body.split("\\\\") if line.strip()]


def test_the_findings_table_is_written_as_latex_a_paper_can_input(tmp_path):
    """findings.tex: booktabs, four wrapped text columns, one row per finding, and no character LaTeX's default
    fonts lack (the minus and ± of the intervals become math); compiled where pdflatex is installed."""
    from study.report.stage import write_findings

    table = pd.DataFrame([{"claim": "The ResNet beats the ViT on clean images", "evidence": "vit − resnet: −10.4 "
                           "(−23.6 to +2.8)", "control": "same images & seeds", "verdict": "inconclusive: effects "
                           "beyond ±23.6 points excluded"}] * 2)
    write_findings(table, tmp_path)
    tex = (tmp_path / "findings.tex").read_text()
    assert "\\begin{table}" in tex and "\\toprule" in tex and "p{3.6cm}p{4.2cm}p{4.2cm}p{3.6cm}" in tex
    rows = _latex_rows(tex)
    assert len(rows) == 2 and all(row.count(" & ") == 3 for row in rows)
    assert "−" not in tex and "±" not in tex and "$-$10.4" in tex and "$\\pm$23.6" in tex and "\\&" in tex
    assert pd.read_csv(tmp_path / "findings.csv").equals(table)
    if shutil.which("pdflatex"):
        document = ("\\documentclass{article}\\usepackage{booktabs}\\begin{document}" + tex + "\\end{document}")
        (tmp_path / "paper.tex").write_text(document)
        done = __import__("subprocess").run(["pdflatex", "-interaction=nonstopmode", "paper.tex"], cwd=tmp_path,
                                            capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:]


def test_the_committed_findings_table_is_valid_latex():
    tex = (ROOT / "reports" / "findings.tex").read_text()
    rows = _latex_rows(tex)
    assert rows and all(row.count(" & ") == 3 for row in rows)
    assert not set(tex) & set("−±×≤≥αΔ")


def test_the_committed_reports_name_a_clean_commit_of_this_repository_and_the_version():
    """The default's report was rendered from a clean tree at a commit of this repository, and every committed
    preset's statistics were recomputed by one (study rerender): the provenance a paper cites is checkable. A
    shallow clone may lack the commit: then only the clean trees and the version are checked."""
    import subprocess

    from study.core.version import study_version

    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True,
                             text=True).stdout.strip() != "false"
    records = {"default": json.loads((ROOT / "reports" / "provenance.json").read_text())}
    for name, folder in STUDIES.items():
        if name != "default":
            records[name] = json.loads((folder / "provenance.json").read_text())["rerendered"]
    for name, record in records.items():
        assert record["git_dirty"] is False, name
        assert record["version"] == study_version(), name
        if not shallow:
            found = subprocess.run(["git", "cat-file", "-e", f"{record['git_commit']}^{{commit}}"], cwd=ROOT)
            assert found.returncode == 0, f"{name}: commit {record['git_commit']} is not in this repository"
