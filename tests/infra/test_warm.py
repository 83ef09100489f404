"""Warm workers (study.infra.engine.warm): a fork of a process that imported torch once runs each stage.

Every test starts worker processes that import torch, so the whole file is `slow` (10 to 26 s a test on a
2-core EPYC of family 23, machine factor 2.7). Most drive one zygote with a probe (tests/infra/warm_probe.py) in
place of the CLI: a stage that spoils the process's state leaves nothing for the next one; a failed stage leaves the
worker usable; a killed worker takes its stage with it; workers are kept apart by the variables a fork cannot
change. The last runs the smoke study with `study run --jobs 2 --warm` and compares every run's bytes with the
sequential `dvc repro`'s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from study.infra.engine.tasks import Job, close_warm_workers, run_job
from study.infra.engine.warm import Zygote, Zygotes, load_time_key, runs_this_study, study_argv
from tests.conftest import ROOT

PROBE = "tests.infra.warm_probe:main"
pytestmark = pytest.mark.slow  # every test starts processes that import torch


def _env(**extra: str) -> dict[str, str]:
    """This environment with the repository on PYTHONPATH, so a zygote's child can import the probe."""
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    return {**os.environ, "PYTHONPATH": path, **extra}


def _probe(zygote: Zygote, tmp_path: Path, *argv: str, name: str = "stage", env: dict | None = None) -> tuple[int, str, str]:
    """Run the probe in a child of ``zygote``: its exit status, stdout and stderr."""
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    zygote.start(list(argv), str(tmp_path), env or {}, str(out), str(err), entry=PROBE)
    code = zygote.wait()
    return code, out.read_text(), err.read_text()


@pytest.fixture
def zygote():
    z = Zygote(_env())
    yield z
    z.close()


def test_a_stage_leaves_nothing_to_the_next_one(zygote, tmp_path):
    """Threads, determinism, the RNG seed, module globals, imported study modules and variables set by one stage
    are gone for the next, which sees what the first child of a fresh zygote sees; each child is the leader of its
    own process group (what the engine stops)."""
    code, spoiled, _ = _probe(zygote, tmp_path, "spoil", name="spoil")
    assert code == 0
    spoiled = json.loads(spoiled)
    assert spoiled["touched"] and spoiled["threads"] == 1 and spoiled["study_train_imported"]
    code, after, _ = _probe(zygote, tmp_path, "observe", name="after")
    after = json.loads(after)
    fresh = Zygote(_env())
    try:
        _, first, _ = _probe(fresh, tmp_path, "observe", name="fresh")
    finally:
        fresh.close()
    first = json.loads(first)
    moving = {"pid", "group", "torch_seed"}  # torch draws its default seed when a process imports it
    assert {k: v for k, v in after.items() if k not in moving} == {k: v for k, v in first.items() if k not in moving}
    assert not after["touched"] and after["spoiled_variable"] is None and not after["study_train_imported"]
    assert after["torch_seed"] != 5 and after["threads"] != 1 and not after["deterministic"]
    assert after["group"] == after["pid"] != spoiled["pid"]


def test_a_failed_stage_reports_its_status_and_the_worker_goes_on(zygote, tmp_path):
    code, _, err = _probe(zygote, tmp_path, "fail", name="fail")
    assert code == 1 and "RuntimeError: the probe's injected failure" in err  # its traceback, in its own log
    assert _probe(zygote, tmp_path, "exit", "2", name="exit")[0] == 2
    code, out, _ = _probe(zygote, tmp_path, "observe", name="ok", env={"DVC_STAGE": "train@x"})
    assert code == 0 and json.loads(out)["stage"] == "train@x" and json.loads(out)["cwd"] == str(tmp_path)


def test_a_stage_that_ends_before_its_pid_is_read_is_still_reported(zygote, tmp_path):
    """Both answers (the pid, then the exit status) can reach the client in one read: the second must not wait."""
    zygote._send({"argv": ["exit", "3"], "cwd": str(tmp_path), "env": {}, "out": str(tmp_path / "o"),
                  "err": str(tmp_path / "e"), "entry": PROBE})
    time.sleep(3)  # the child has long exited, and the zygote written both lines
    assert zygote._receive(None)["pid"] > 0
    assert zygote.wait(timeout=1) == 3


def test_a_killed_stage_is_reported_killed_and_a_killed_worker_takes_its_stage_with_it(zygote, tmp_path):
    out = tmp_path / "sleep.out"
    pid = zygote.start(["sleep", "60"], str(tmp_path), {}, str(out), str(tmp_path / "sleep.err"), entry=PROBE)
    os.killpg(pid, signal.SIGTERM)  # what the engine's stop sends first
    assert zygote.wait() == -signal.SIGTERM
    assert _probe(zygote, tmp_path, "exit", "0", name="still")[0] == 0  # the worker survived its stage's death

    pid = zygote.start(["sleep", "60"], str(tmp_path), {}, str(out), str(tmp_path / "sleep2.err"), entry=PROBE)
    zygote.process.kill()  # the worker dies under its stage
    assert zygote.wait() == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the stage outlived its worker"
    with pytest.raises(OSError):
        zygote.start(["exit", "0"], str(tmp_path), {}, str(out), str(tmp_path / "x.err"), entry=PROBE)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie that its dead parent left to init counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_workers_are_kept_apart_by_what_a_fork_cannot_change(tmp_path, monkeypatch):
    """OpenMP's variables are read when torch loads: a stage gets a worker started with its own values."""
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])  # a worker starts from this process's environment
    zygotes = Zygotes()
    try:
        one, two = _env(OMP_NUM_THREADS="1"), _env(OMP_NUM_THREADS="2")
        first = zygotes.borrow(one)
        assert load_time_key(one) != load_time_key(two) and ("OMP_NUM_THREADS", "1") in load_time_key(one)
        zygotes.give_back(first, one)
        other = zygotes.borrow(two)
        assert other is not first
        zygotes.give_back(other, two)
        again = zygotes.borrow(one)
        assert again is first  # reused, not started again
        code, out, _ = _probe(again, tmp_path, "observe")
        zygotes.give_back(again, one)  # close() stops idle workers only: one still borrowed outlived the test
        assert code == 0 and json.loads(out)["omp"] == "1"
    finally:
        zygotes.close()


def test_only_a_plain_study_command_of_this_environment_runs_warm():
    assert study_argv("study train --run vit-0.5-0 --out runs/vit/f0.5_s0") == [
        "train", "--run", "vit-0.5-0", "--out", "runs/vit/f0.5_s0"]
    for command in ("python stage.py", "study train && touch x", "study report > log", "FOO=1 study train",
                    "study", "study 'a b'"):
        assert study_argv(command) is None, command
    here = os.path.dirname(sys.executable)
    assert runs_this_study({"PATH": here}) == os.path.exists(os.path.join(here, "study"))
    assert not runs_this_study({"PATH": "/nonexistent"})


def test_a_study_script_that_execs_this_interpreter_runs_warm(tmp_path):
    """A device machine's `study` (scripts/device-install) is a shell script in a folder of its own that execs
    this interpreter; one that execs another Python does not run warm."""
    (tmp_path / "ours").mkdir()
    (tmp_path / "other").mkdir()
    for folder, python in (("ours", sys.executable), ("other", "/nonexistent/python3")):
        script = tmp_path / folder / "study"
        script.write_text(f'#!/bin/sh\nexec "{python}" -m study "$@"\n')
        script.chmod(0o755)
    assert runs_this_study({"PATH": str(tmp_path / "ours")})
    assert not runs_this_study({"PATH": str(tmp_path / "other")})


def test_a_job_runs_warm_as_it_runs_on_its_own(tmp_path):
    """The same `study` command through the engine's task, on its own and warm: same status, summary and error."""
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    outcomes = {}
    try:
        for warm in (False, True, True):
            for command in ("study --version", "study nosuch"):
                job = Job(stage="s", commands=(command,), cwd=str(tmp_path), log=str(tmp_path / f"{warm}"),
                          env={"PATH": path}, warm=warm)
                o = run_job(job)
                outcomes.setdefault((warm, command), []).append((o.returncode, o.summary, o.error))
    finally:
        close_warm_workers()
    for command in ("study --version", "study nosuch"):
        cold, warm = outcomes[(False, command)], outcomes[(True, command)]
        assert warm == cold * 2, (command, cold, warm)
    assert outcomes[(False, "study --version")][0][:2] == (0, subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "study"), "--version"], capture_output=True,
        text=True).stdout.strip())


# --- end to end ----------------------------------------------------------------------------------

def test_warm_workers_leave_the_results_of_dvc_repro_and_a_clean_status(smoke_study, tmp_path):
    """The smoke study from scratch with `--jobs 2 --cpus 4 --warm`: every run's metrics and weights, the
    analyses' tables and dvc.lock as the sequential `dvc repro` leaves them; a second `dvc repro` runs nothing."""
    from tests.faults.test_faults import _assert_same_results, _dvc
    from tests.infra.test_engine import _assert_same_lock, _fresh_copy
    from tests.infra.test_local_jobs import _changed

    from study.core.checkout import own_code_env

    project = _fresh_copy(smoke_study, tmp_path / "study")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = own_code_env(project, {**os.environ, "PATH": path})
    result = subprocess.run([sys.executable, "-m", "study", "run", "--jobs", "2", "--cpus", "4", "--warm"],
                            cwd=project, env=env, capture_output=True, text=True, timeout=3600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    last = result.stdout.splitlines()[-1]
    assert last.startswith("run: 39 stage(s) ran and 0 were up to date"), result.stdout
    assert last.endswith("; 39 ran in warm workers"), last  # every stage's command is a plain `study ...` line
    _assert_same_results(project, smoke_study)
    _assert_same_lock(project, smoke_study)
    assert _changed(project) == set()
    again = _dvc(project, "repro")
    assert again.returncode == 0 and "Running stage" not in again.stdout, again.stdout
