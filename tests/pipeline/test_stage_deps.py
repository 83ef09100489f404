"""DVC sees every line a stage runs, and nothing else, so that an edit reruns exactly the stages it can change:
each stage's code deps in dvc.yaml are exactly the files its command imports, bytecode never enters a hash, and
an edited module makes just its stages stale."""

from __future__ import annotations

import compileall
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import dvc
from tests.pipeline.stage_imports import PIPELINES, ROOT, command_files


def _code_deps(deps: list, prefix: str, base: Path) -> set[Path]:
    """The study/ files a stage's deps name, folders expanded (as DVC hashes them, without bytecode)."""
    files: set[Path] = set()
    for dep in deps:
        path = dep if isinstance(dep, str) else next(iter(dep))
        if not path.startswith(prefix + "study"):
            continue
        target = (base / path).resolve()
        files.update(target.rglob("*.py") if target.is_dir() else [target])
    return files


def _stages():
    for name, prefix in PIPELINES.items():
        path = ROOT / name
        for stage, body in yaml.safe_load(path.read_text())["stages"].items():
            yield pytest.param(path, prefix, stage, body, id=f"{name}:{stage}")


@pytest.mark.parametrize("path, prefix, stage, body", list(_stages()))
def test_a_stage_depends_on_exactly_the_code_it_runs(path, prefix, stage, body):
    words = body["cmd"].split()
    assert words[0] == "study", f"{stage}: its command is not a `study` command"
    runs = command_files(words[1])
    listed = _code_deps(body["deps"], prefix, path.parent)
    missing = sorted(str(f.relative_to(ROOT)) for f in runs - listed)
    extra = sorted(str(f.relative_to(ROOT)) for f in listed - runs)
    fix = (f"`python tests/pipeline/stage_imports.py {words[1]}` prints the list, "
           "`python tests/pipeline/stage_imports.py --write` rewrites every stale one")
    assert not missing, f"{path.name}, stage {stage}: imports files its deps do not list: {missing}; {fix}"
    assert not extra, f"{path.name}, stage {stage}: lists code it never imports: {extra}; {fix}"


def test_the_import_walk_sees_imports_inside_functions_and_skips_type_checking(tmp_path, monkeypatch):
    from tests.pipeline.stage_imports import _imported_names

    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from study.unused import X\n"
              "def f():\n    from study.data import prepared\n    import study.core.io\n")
    import ast

    names = _imported_names(ast.parse(source), "study.core.entry")
    assert {"study.data", "study.data.prepared", "study.core.io"} <= names
    assert not any(n.startswith("study.unused") for n in names)


def test_dvcignore_keeps_bytecode_and_caches_out_of_every_hash():
    ignored = (ROOT / ".dvcignore").read_text().split()
    assert {"__pycache__/", "*.py[cod]", ".pytest_cache/", ".ipynb_checkpoints/"} <= set(ignored)


def _stale(project) -> set[str]:
    """The stages `dvc status` calls changed (their names, with the matrix suffix dropped)."""
    return {line.rstrip(":").strip().split("@")[0] for line in dvc("status", cwd=project).stdout.splitlines()
            if line and not line.startswith(("\t", " "))}


@pytest.mark.slow
@pytest.mark.parametrize("module, expected", [
    ("study/distillation/agreement.py", {"distillation"}),  # a question's maths: its own stage
    ("study/attention/report.py", {"report"}),  # a question's prose: the report alone, not its analysis
    # shared statistics: every stage that computes an interval
    ("study/stats/intervals.py", {"curves", "distillation", "cka", "attention", "robustness", "controls", "plan",
                                  "ladder", "budget_check", "report"}),
])
def test_bytecode_leaves_the_pipeline_clean_and_an_edit_stales_only_its_stages(smoke_scratch, module, expected):
    """After a full `dvc repro`: Python writing bytecode into the package changes nothing; a comment appended to a
    module makes exactly the stages that run it stale (training stays clean: it runs none of these)."""
    assert "changed" not in dvc("status", cwd=smoke_scratch).stdout
    compileall.compile_dir(str(smoke_scratch / "study"), quiet=1, force=True)
    assert list((smoke_scratch / "study").rglob("*.pyc")), "compileall wrote no bytecode"
    status = dvc("status", cwd=smoke_scratch).stdout
    assert "changed" not in status, status
    path = smoke_scratch / module
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"# an edit\n")
        assert _stale(smoke_scratch) == expected
    finally:
        path.write_bytes(original)
        for cache in (smoke_scratch / "study").rglob("__pycache__"):
            shutil.rmtree(cache)


# The stages that train (dvc.yaml's two templates and the budget check's instances of them).
TRAINING = {"train", "distill", "train_2x", "distill_2x", "check_1x", "check_distill_1x", "check_2x",
            "check_distill_2x"}


def _stale_after_edit(project: Path, module: str, old: str, new: str) -> set[str]:
    """The stages ``dvc status`` calls changed once ``old`` is replaced by ``new`` in ``module`` (then restored)."""
    path = project / module
    original = path.read_text()
    assert old in original, f"{module} no longer holds {old!r}; update this test's edit"
    try:
        path.write_text(original.replace(old, new))
        return _stale(project)
    finally:
        path.write_text(original)


@pytest.mark.slow
def test_an_analysis_schema_edit_leaves_every_training_run_fresh(smoke_scratch):
    """A field of the robustness schema gets another default: only the stages that read that schema are stale (each
    question owns its section's schema, study/<question>/params.py); no run trains again."""
    field = "images: StrictInt = Field(default={}, ge=1)"
    stale = _stale_after_edit(smoke_scratch, "study/robustness/params.py", field.format(2000), field.format(2001))
    assert stale and not stale & TRAINING, stale
    assert "robustness" in stale and stale <= {"robustness", "controls", "plan", "ladder", "report"}, stale


@pytest.mark.slow
def test_a_training_schema_edit_makes_every_training_stage_stale(smoke_scratch):
    """A field of the training schema (study/core/config.py) gets another default: every stage that trains is stale
    (the smoke preset renders train, distill, train_2x and distill_2x)."""
    stale = _stale_after_edit(smoke_scratch, "study/core/config.py",
                              "checkpoint_every: StrictInt = Field(default=200, gt=0)",
                              "checkpoint_every: StrictInt = Field(default=201, gt=0)")
    assert {"train", "distill", "train_2x", "distill_2x"} <= stale, stale
