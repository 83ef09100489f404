"""Pre-registration checked against git history: a ``before_runs`` plan must be committed before the first commit
of its runs; a plan edited after them is demoted to exploratory; one never committed is refused in one line."""

from __future__ import annotations

import subprocess
import types
from pathlib import Path

import pytest
import yaml

from study.core.errors import StudyError
from study.plan import registration as R

PLAN = {"declared": "before_runs", "history": "Written before any run.", "seeds": 3,
        "effects": {"clean": 0.02, "robustness": 0.05}, "claims": [{"name": "clean", "arm": "vit"}]}
RAW = {"fractions": [0.5, 1.0], "seeds": [100, 101, 102], "analysis": {"plan": PLAN, "robustness": {"seed": 0}}}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


def write(root: Path, raw: dict) -> Path:
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def write_runs(root: Path, seeds) -> None:
    table = root / R.RUNS_TABLE
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("model,fraction,seed,top1\n" + "".join(f"vit,0.5,{s},0.7\n" for s in seeds))


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    (tmp_path / "README").write_text("a project\n")
    commit(tmp_path, "start")
    return tmp_path


def test_the_digest_covers_the_declared_fields_and_not_the_history():
    assert R.plan_digest(RAW) == R.plan_digest({**RAW, "analysis": {**RAW["analysis"], "plan": {
        **PLAN, "history": "reworded"}}})
    for changed in ({**RAW, "seeds": [100, 101, 103]}, {**RAW, "analysis": {**RAW["analysis"], "plan": {
            **PLAN, "effects": {"clean": 0.03, "robustness": 0.05}}}}):
        assert R.plan_digest(changed) != R.plan_digest(RAW)


def test_a_plan_in_no_commit_is_refused_in_one_line(repo):
    path = write(repo, RAW)
    with pytest.raises(StudyError, match="declared fields are in no commit; commit params.yaml before the runs") as err:
        R.registration(path, RAW)
    assert "\n" not in str(err.value)


def test_a_plan_committed_before_its_runs_is_registered(repo):
    path = write(repo, RAW)
    planned = commit(repo, "the plan")
    found = R.registration(path, RAW)
    assert found.status == R.REGISTERED and found.plan_commit == planned and not found.runs_commit
    write_runs(repo, [0, 1])  # another study's seeds: not this plan's runs
    commit(repo, "a pilot's runs")
    assert not R.registration(path, RAW).runs_commit
    write_runs(repo, [100, 101, 102])
    runs = commit(repo, "the runs")
    found = R.registration(path, RAW)
    assert (found.status, found.plan_commit, found.runs_commit) == (R.REGISTERED, planned, runs)
    assert found.plan_date and found.runs_date and planned[:7] in found.message and runs[:7] in found.message


def test_a_plan_changed_after_its_runs_is_demoted_to_exploratory(repo):
    from study.plan.stage import registered
    from tests.plan.test_plan import plan_params

    write(repo, RAW)
    planned = commit(repo, "the plan")
    write_runs(repo, [100, 101, 102])
    runs = commit(repo, "the runs")
    moved = {**RAW, "analysis": {**RAW["analysis"], "plan": {**PLAN, "effects": {"clean": 0.05, "robustness": 0.05}}}}
    path = write(repo, moved)
    commit(repo, "a smaller effect, after the runs")
    found = R.registration(path, moved)
    assert (found.status, found.plan_commit, found.runs_commit) == (R.CHANGED, planned, runs)
    assert "every verdict is exploratory" in found.message
    plan, record = registered(types.SimpleNamespace(source=str(path)), plan_params())
    assert record.status == R.CHANGED and {c.role for c in plan.claims} == {"exploratory"}


def test_a_plan_committed_with_its_runs_is_not_before_them(repo):
    path = write(repo, RAW)
    write_runs(repo, [100, 101, 102])
    commit(repo, "plan and runs together")
    with pytest.raises(StudyError, match="no plan was committed before its runs' first commit"):
        R.registration(path, RAW)


def test_outside_git_the_registration_is_unverifiable(tmp_path):
    path = write(tmp_path, RAW)
    assert R.registration(path, RAW).status == R.UNVERIFIABLE
