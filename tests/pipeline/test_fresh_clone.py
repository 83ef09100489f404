"""What a fresh clone shows before any run: the committed reports through DVC's own commands, and the pipeline's
commands through a dry run (docs/pipeline.md, "What DVC's own commands give here")."""

from __future__ import annotations

import shutil
import subprocess

import yaml

from tests.conftest import dvc
from tests.pipeline.stage_imports import ROOT


def _fresh_clone(tmp_path):
    """The tracked files of this checkout's pipeline (no runs, no data, no DVC cache), as a clone has them."""
    for name in ("dvc.yaml", "dvc.lock", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / ".dvc", tmp_path / ".dvc", ignore=shutil.ignore_patterns("cache", "tmp", "config.local"))
    shutil.copytree(ROOT / "reports", tmp_path / "reports")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    return tmp_path


def test_metrics_and_plots_read_the_committed_reports(tmp_path):
    clone = _fresh_clone(tmp_path)
    shown = dvc("metrics", "show", "--json", cwd=clone).stdout
    metrics = yaml.safe_load(shown)  # JSON is YAML
    files = {path for revision in metrics.values() for path in revision.get("data", {})}
    assert files == {"reports/metrics.json"}  # the report's metrics, no per-run file missing before the runs
    out = dvc("plots", "show", "-o", str(tmp_path / "plots"), cwd=clone, check=False)
    assert (tmp_path / "plots" / "index.html").is_file(), out.stderr
    declared = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
    images = [next(iter(p)) if isinstance(p, dict) else p for p in declared]
    # the budget check's figure exists only where the study checks a fraction (the confirmatory study checks none)
    from study.core.config import load_params

    unchecked = () if load_params(ROOT / "params.yaml").budget_check.fractions else (
        "reports/figures/budget_check/budget_check.png",)
    missing = [image for image in images if not (ROOT / image).is_file() and image not in unchecked]
    assert not missing, f"a declared plot is not committed under reports/: {missing}"


def test_a_dry_run_lists_every_command_of_a_fresh_clone(tmp_path):
    clone = _fresh_clone(tmp_path)
    listed = dvc("repro", "--dry", "--force", cwd=clone).stdout
    stages = [line for line in listed.splitlines() if line.startswith("Running stage")]
    assert stages[0] == "Running stage 'prepare':" and stages[-1] == "Running stage 'report':"
    assert any(s.startswith("Running stage 'train@vit-") for s in stages)
    assert not (clone / "runs").exists() and not (clone / "data").exists()  # a dry run runs nothing
