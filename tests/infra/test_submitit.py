"""`study run --submitit`: stages as submitit jobs (study/infra/engine/slurm.py), run here through submitit's local
executor, which starts each job as SLURM would start it on a node: a new Python that unpickles the call."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from study.core.checkout import own_code_env
from study.infra.engine.resources import Reservation
from study.infra.engine.slurm import Submitit
from study.infra.engine.tasks import Job
from tests.faults.test_faults import _copy_study, _dvc, assert_same_run, cli
from tests.infra.test_local_jobs import GRAPH, _changed, _most_at_once, _records, project  # noqa: F401 - a fixture


def test_local_jobs_run_the_graph_in_order_two_at_once_and_record_every_stage(project, capsys):  # noqa: F811
    """Every stage reserves train.threads = 2 CPUs: on 4, two jobs run at once, never more, and none before the
    stages it depends on; each runs where its Ray task would (its logs, DVC_STAGE, its own job folder)."""
    code, out, err = cli(capsys, "run", "--submitit", "local", "--cpus", "4")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("run: 6 stage(s) ran and 0 were up to date"), out
    assert "on submitit's local executor" in out.splitlines()[-1]
    records = _records(project)
    assert _most_at_once(records) == 2
    for name, upstream in GRAPH.items():
        assert all(records[u]["end"] <= records[name]["start"] for u in upstream), name
    assert records["t1"]["env"]["DVC_STAGE"] == "t1"
    assert (project / ".dvc" / "tmp" / "study-run" / "t1.out").read_text() == "t1: done\n"
    assert len(list((project / ".dvc" / "tmp" / "study-run" / "submitit").glob("*_result.pkl"))) == 6
    assert _changed(project) == set()


@pytest.mark.slow  # the engine's handling of a failure, tested quick with the local pool; here the job's exit status
def test_a_failed_job_skips_only_its_dependants(project, capsys):  # noqa: F811
    (project / "fail").write_text("t2")
    code, _out, err = cli(capsys, "run", "--submitit", "local", "--cpus", "4")
    assert code == 2
    assert "t2: error: injected failure of t2" in err
    assert set(_records(project)) == {"prepare", "t1", "t3", "other"}  # report waited on t2
    (project / "fail").unlink()
    assert cli(capsys, "run", "--submitit", "local", "--cpus", "4")[0] == 0
    assert _changed(project) == set()


def test_cancel_stops_a_running_command_and_drops_a_waiting_job(tmp_path, monkeypatch):
    """One CPU: the second job waits for the first; cancelling both ends the first's command (its own process
    group, as on Ray) and never submits the second."""
    (tmp_path / ".dvc").mkdir()  # the executor keeps its files under the DVC project's root
    monkeypatch.chdir(tmp_path)
    one = Reservation(cpus=1, gpus=0.0, threads=None)
    with Submitit("local", partition=None, job_minutes=5, cpus=1) as executor:
        jobs = [Job(stage=name, commands=("sleep 300",), cwd=str(tmp_path), log=str(tmp_path / name))
                for name in ("first", "second")]
        first, second = (executor.submit(job, one) for job in jobs)
        assert first.submitted is not None and second.submitted is None
        deadline = time.monotonic() + 120
        while not _sleeps_in(tmp_path):
            assert time.monotonic() < deadline, "the first job's command never started"
            time.sleep(0.2)
        executor.cancel([first, second], timeout=60)
        assert first.submitted.done() and second.submitted is None
        assert executor.outcome(first, jobs[0]).returncode != 0
    assert _sleeps_in(tmp_path) == []


@pytest.mark.parametrize("args, message", [
    (["--submitit", "local", "--jobs", "2"], "--jobs picks another executor than --submitit local"),
    (["--submitit", "slurm", "--address", "127.0.0.1:1"], "--address picks another executor than --submitit slurm"),
    (["--submitit", "slurm", "--cpus", "4"], "--cpus and --gpus size a run on this machine"),
])
def test_bad_options_are_one_line_before_any_work(project, capsys, args, message):  # noqa: F811
    code, out, err = cli(capsys, "run", *args)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert out == "" and not (project / "out").exists()


def test_slurm_without_sbatch_is_one_line(project, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # python and dvc, no SLURM
    code, _out, err = cli(capsys, "run", "--submitit", "slurm")
    assert code == 2 and err.count("\n") == 1 and "SLURM's sbatch is not on the PATH" in err, err
    assert not (project / "out").exists()


def test_without_submitit_the_error_names_the_extra(project, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setitem(sys.modules, "submitit", None)  # `import submitit` now fails as if it were not installed
    code, _out, err = cli(capsys, "run", "--submitit", "local")
    assert code == 2 and err.count("\n") == 1 and "needs submitit" in err and "[cluster]" in err, err


@pytest.mark.slow
def test_two_training_stages_as_local_jobs_leave_the_bytes_of_dvc_repro(smoke_study, tmp_path):
    """Two ViT runs of the smoke study trained again as submitit jobs, side by side with train.threads each: their
    weights, predictions and metrics equal the sequential `dvc repro`'s, and DVC records them up to date."""
    project = _copy_study(smoke_study, tmp_path / "study")
    runs = ["vit/f0.5_s0", "vit/f1.0_s1"]
    for run in runs:
        shutil.rmtree(project / "runs" / run)
    env = own_code_env(project, dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"))
    targets = ["train@vit-0.5-0", "train@vit-1.0-1"]
    result = subprocess.run([str(Path(sys.executable).parent / "study"), "run", "--submitit", "local", "--cpus", "4",
                             *targets], cwd=project, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.splitlines()[-1].startswith("run: 2 stage(s) ran"), result.stdout
    for run in runs:
        assert_same_run(project / "runs" / run, smoke_study / "runs" / run)
    assert "up to date" in _dvc(project, "status", *targets).stdout


def _sleeps_in(folder: Path) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cwd", "cmdline"])
            if p.info["cwd"] == str(folder) and "sleep" in (p.info["cmdline"] or [])]
