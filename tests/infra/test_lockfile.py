"""dvc.lock written in batches (study.infra.engine.lockfile): the same bytes as ``dvc repro`` writes, whether the
entries are written together or replayed from the journal of a driver that was killed before writing them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from study.infra.engine import lockfile
from study.infra.engine.pipeline import RUN, Pipeline
from tests.faults.test_faults import _dvc

# Stages whose outputs are the same bytes in every run (so that two runs' dvc.lock can be compared whole), one
# reading a float parameter: a diamond, then a stage that needs nothing.
GRAPH = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": []}


def _dvc_yaml() -> dict:
    stages = {}
    for name, upstream in GRAPH.items():
        write = f"open('out/{name}', 'w').write('{name}' + ''.join(open(f'out/{{u}}').read() for u in {upstream!r}))"
        stages[name] = {"cmd": f"{sys.executable} -c \"import os; os.makedirs('out', exist_ok=True); {write}\"",
                        "deps": [f"out/{u}" for u in upstream], "outs": [f"out/{name}"],
                        **({"params": ["rate"]} if name == "b" else {})}
        if not stages[name]["deps"]:
            del stages[name]["deps"]
    return {"stages": stages}


@pytest.fixture
def projects(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """Two copies of a small DVC project (no git); the first is the current folder, the second was run by
    ``dvc repro`` and holds its dvc.lock."""
    root = tmp_path / "project"
    root.mkdir()
    _dvc(root, "init", "--no-scm", "-q")
    (root / "dvc.yaml").write_text(yaml.safe_dump(_dvc_yaml()))
    (root / "params.yaml").write_text("rate: 5.0e-4\n")
    reference = tmp_path / "reference"
    shutil.copytree(root, reference)
    result = _dvc(reference, "repro")
    assert result.returncode == 0, result.stdout + result.stderr
    monkeypatch.chdir(root)
    return root, reference


def _run_every_stage(pipeline: Pipeline, count: int | None = None) -> list[str]:
    """The first ``count`` planned stages in turn, as the driver runs them: prepare, the command, record (its
    entry journaled). Nothing is written to dvc.lock."""
    names = []
    for stage in pipeline.plan([]).stages[:count]:
        assert pipeline.prepare(stage) == RUN
        for command in pipeline.commands(stage):
            subprocess.run(command, shell=True, check=True, cwd=stage.wdir)
        pipeline.record(stage)
        names.append(stage.addressing)
    return names


def _journal(project: Path) -> list[str]:
    return sorted(path.stem for path in (project / lockfile.JOURNAL).glob("*.json"))


def test_entries_written_together_are_the_bytes_dvc_repro_writes_one_by_one(projects):
    project, reference = projects
    pipeline = Pipeline()
    names = _run_every_stage(pipeline)
    assert names == ["a", "b", "c", "d", "e"]
    assert not (project / "dvc.lock").exists()  # recorded, journaled, not yet written
    assert _journal(project) == sorted(names) and pipeline.lock_writer.waiting == names
    pipeline.write_lock(force=True)
    assert (project / "dvc.lock").read_bytes() == (reference / "dvc.lock").read_bytes()
    assert _journal(project) == [] and pipeline.lock_writer.waiting == []
    pipeline.close()
    assert "up to date" in _dvc(project, "status").stdout


def test_a_killed_drivers_journal_is_written_by_the_next_one_before_dvc_reads_the_pipeline(projects):
    """A driver that dies after recording leaves its entries in the journal only: `dvc status` sees those stages
    as not run, and the next driver writes them first, so they are up to date and nothing runs again."""
    project, reference = projects
    killed = Pipeline()
    _run_every_stage(killed)  # and then it dies: no write, no close
    assert not (project / "dvc.lock").exists() and _journal(project) == ["a", "b", "c", "d", "e"]

    pipeline = Pipeline()
    assert sorted(pipeline.replayed) == ["a", "b", "c", "d", "e"] and _journal(project) == []
    assert (project / "dvc.lock").read_bytes() == (reference / "dvc.lock").read_bytes()
    assert pipeline.plan([]).stages == []  # every stage up to date
    pipeline.close()
    assert "up to date" in _dvc(project, "status").stdout


def test_a_write_waits_until_it_is_due_unless_forced(projects, monkeypatch):
    """After a write that took w seconds, the next waits until SPACING * w have passed since, unless forced (the
    driver forces it whenever no stage runs, and at its end)."""
    project, _reference = projects
    clock = [1000.0]
    monkeypatch.setattr(lockfile.time, "monotonic", lambda: clock[0])
    pipeline = Pipeline()
    writer = pipeline.lock_writer
    assert _run_every_stage(pipeline, count=2) == ["a", "b"]
    writer._write_seconds = 0.5  # as if the last write took half a second
    clock[0] += lockfile.SPACING * 0.5 - 1
    pipeline.write_lock(force=False)
    assert writer.waiting == ["a", "b"] and not (project / "dvc.lock").exists()
    clock[0] += 1
    pipeline.write_lock(force=False)
    assert writer.waiting == [] and set(yaml.safe_load((project / "dvc.lock").read_text())["stages"]) == {"a", "b"}
    pipeline.close()


def test_an_unreadable_journal_entry_is_ignored_in_one_line_and_its_stage_runs_again(projects, capsys):
    project, _reference = projects
    killed = Pipeline()
    _run_every_stage(killed, count=2)
    (project / lockfile.JOURNAL / "b.json").write_text('{"lockfile": "dvc.lock", "sta')  # cut short by hand
    pipeline = Pipeline()
    assert pipeline.replayed == ["a"] and _journal(project) == []
    assert capsys.readouterr().out.count("unreadable journal entry, ignored") == 1
    assert [stage.addressing for stage in pipeline.plan([]).stages] == ["b", "c", "d", "e"]
    pipeline.close()
