"""The benchmarks stay outside the pipeline: no stage runs their code, so that editing a benchmark never makes a
stage stale and no number of a report depends on one."""

from __future__ import annotations

import ast

import pytest
import yaml

from tests.pipeline.stage_imports import PIPELINES, ROOT, command_files


def _stage_commands() -> list[tuple[str, str, list]]:
    """(pipeline, the `study` command of a stage, its deps) for every stage of every pipeline."""
    found = []
    for name in PIPELINES:
        for stage, body in yaml.safe_load((ROOT / name).read_text())["stages"].items():
            found.append((f"{name}:{stage}", body["cmd"].split()[1], body.get("deps", [])))
    return found


def _imports_benchmarks(path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(n == "benchmarks" or n.startswith("benchmarks.") for n in names):
            return True
    return False


@pytest.mark.parametrize("stage, command, deps", _stage_commands(), ids=[s for s, _, _ in _stage_commands()])
def test_no_stage_runs_or_depends_on_a_benchmark(stage, command, deps):
    assert not [p for p in command_files(command) if _imports_benchmarks(p)], stage
    paths = [d if isinstance(d, str) else next(iter(d)) for d in deps]
    assert not [p for p in paths if p.lstrip("./").startswith("benchmarks")], stage


def test_the_import_check_sees_an_import_of_the_benchmarks(tmp_path):
    for line, expected in (("from benchmarks.measure import sync", True), ("import benchmarks.cka", True),
                           ("from study.train.step import TrainStep", False), ("from . import benchmarks", False)):
        (tmp_path / "m.py").write_text(line + "\n")
        assert _imports_benchmarks(tmp_path / "m.py") == expected, line
