"""``study run``: the DVC pipeline with independent stages as Ray tasks, recorded by DVC.

The fast tests cover the engine's logic without a cluster: the schedule (what may start, what a failure
skips), the resources and threads each stage gets, the ``engine`` params section, the threads override,
the worker's command runner, and the one-line errors. The slow ones work in copies of the sequential smoke
study (conftest's ``smoke_study``): a teacher, its student and two independent runs from scratch on a local Ray
instance must leave the same results and the same dvc.lock entries as ``dvc repro`` (the whole study is compared
through warm workers, tests/infra/test_warm.py); on an existing cluster (``ray start --head``, 2 CPUs,
``--address``) a failed stage must skip only its dependants, and a stopped or killed engine must resume
without redoing finished stages.
"""

from __future__ import annotations

import _thread
import copy
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch
import yaml

from study.core.checkout import own_code_env
from study.core.config import parse_params
from study.infra.engine.params import EngineParams
from study.infra.engine.resources import Reservation, is_training, reservation, with_cpus_per_run
from study.infra.engine.schedule import DONE, FAILED, RUNNING, SKIPPED, WAITING, Schedule
from study.infra.engine.tasks import _WATCHER, Job, run_job, shell_command
from study.core.errors import StudyError
from tests.faults.test_faults import SMOKE, _copy_study, _dvc, _env, assert_same_run, cli
from study.infra.engine.params import engine_params

STUDY = str(Path(sys.executable).parent / "study")


# --- the schedule ---------------------------------------------------------------------------------------

# A miniature of the study's graph: two teachers' chains and one independent run, then one analysis.
ORDER = ["prepare", "train@a", "train@t", "distill@t", "train@v", "curves"]
UPSTREAM = {"train@a": ["prepare"], "train@t": ["prepare"], "distill@t": ["train@t", "prepare"],
            "train@v": ["prepare"], "curves": ["train@a", "train@t", "distill@t", "train@v"]}


def test_a_stage_is_ready_once_every_upstream_stage_is_done_in_pipeline_order():
    schedule = Schedule(ORDER, UPSTREAM)
    assert schedule.ready() == ["prepare"]
    schedule.start("prepare")
    assert schedule.ready() == [] and not schedule.finished
    schedule.finish("prepare")
    assert schedule.ready() == ["train@a", "train@t", "train@v"]  # independent: all at once
    for name in ("train@a", "train@t", "train@v"):
        schedule.start(name)
    schedule.finish("train@t")
    assert schedule.ready() == ["distill@t"]  # its teacher is done; curves still waits for the others


def test_upstream_stages_outside_the_plan_are_up_to_date_and_not_waited_for():
    schedule = Schedule(["distill@t", "curves"], UPSTREAM)  # e.g. only the student changed
    assert schedule.ready() == ["distill@t"]


def test_a_failure_skips_exactly_its_dependants_and_the_others_finish():
    schedule = Schedule(ORDER, UPSTREAM)
    schedule.finish("prepare")
    for name in ("train@a", "train@t", "train@v"):
        schedule.start(name)
    assert schedule.fail("train@t") == ["distill@t", "curves"]  # a dependant of a dependant too
    assert schedule.skipped_by == {"distill@t": "train@t", "curves": "train@t"}
    assert not schedule.finished  # train@a and train@v still run
    schedule.finish("train@a")
    schedule.finish("train@v")
    assert schedule.finished and schedule.ready() == []
    assert [schedule.count(s) for s in (WAITING, RUNNING, DONE, FAILED, SKIPPED)] == [0, 0, 3, 1, 2]


def test_the_schedule_refuses_a_stage_listed_before_what_it_waits_for_or_moved_twice():
    with pytest.raises(ValueError, match="listed before"):
        Schedule(["curves", "prepare"], {"curves": ["prepare"]})
    schedule = Schedule(["prepare"], {})
    schedule.finish("prepare")
    with pytest.raises(ValueError, match="cannot fail"):
        schedule.fail("prepare")


# --- resources, threads and the `engine` section ------------------------------------------------------


def test_by_default_every_stage_keeps_the_threads_dvc_repro_uses():
    engine = EngineParams()
    assert reservation(True, engine, 2, 16, False) == Reservation(cpus=2, gpus=0.0, threads=None)
    assert reservation(False, engine, 2, 16, False) == Reservation(cpus=2, gpus=0.0, threads=None)
    # train.threads = 0 is torch's default, every core: the stage reserves the whole node.
    assert reservation(True, engine, 0, 16, False) == Reservation(cpus=16, gpus=0.0, threads=None)
    assert reservation(False, engine, 32, 16, False).cpus == 16  # never more than a node has


def test_cpus_per_run_sets_a_training_runs_cpus_and_threads_and_nothing_else():
    engine = EngineParams(cpus_per_run=1)
    assert reservation(True, engine, 2, 16, False) == Reservation(cpus=1, gpus=0.0, threads=1)
    assert reservation(False, engine, 2, 16, False) == Reservation(cpus=2, gpus=0.0, threads=None)
    assert reservation(True, EngineParams(cpus_per_run=64), 2, 16, False) == Reservation(16, 0.0, 16)


def test_cpus_per_run_on_the_command_line_replaces_the_params_for_one_run_only():
    params = parse_params(copy.deepcopy(SMOKE))
    assert engine_params(params).cpus_per_run is None
    once = with_cpus_per_run(params, 1)
    assert engine_params(once).cpus_per_run == 1 and engine_params(params).cpus_per_run is None  # frozen: a new object
    assert engine_params(once).gpus_per_run == engine_params(params).gpus_per_run and once.train == params.train
    assert with_cpus_per_run(params, None) is params


def test_every_stage_takes_a_gpu_share_only_where_there_are_gpus():
    engine = EngineParams(cpus_per_run=2, gpus_per_run=0.25)
    assert reservation(True, engine, 0, 16, True) == Reservation(cpus=2, gpus=0.25, threads=2)
    assert reservation(False, engine, 0, 16, True).gpus == 0.25  # CKA and attention use the GPU too
    assert reservation(True, engine, 0, 16, False).gpus == 0.0


def test_a_training_run_is_a_stage_whose_command_is_study_train():
    assert is_training("study train --model vit --fraction 0.5 --seed 0 --prepared data/prepared")
    assert not is_training("study curves --runs runs")
    assert not is_training("python study/train.py")


def test_the_engine_section_is_optional_and_validated_in_one_line():
    assert engine_params(parse_params(copy.deepcopy(SMOKE))) == EngineParams(cpus_per_run=None, gpus_per_run=0.25)
    raw = {**copy.deepcopy(SMOKE), "engine": {"cpus_per_run": 1, "gpus_per_run": 0.5}}
    assert engine_params(parse_params(raw)) == EngineParams(cpus_per_run=1, gpus_per_run=0.5)
    for section, expected in [({"cpus_per_run": 0}, "engine.cpus_per_run = 0"),
                              ({"cpus_per_run": 1.5}, "engine.cpus_per_run = 1.5"),
                              ({"gpus_per_run": 2.0}, "engine.gpus_per_run = 2.0"),
                              ({"workers": 4}, "unknown key 'engine.workers'")]:
        with pytest.raises(StudyError, match=expected.replace(".", r"\.").replace("(", r"\(")) as err:
            engine_params(parse_params({**copy.deepcopy(SMOKE), "engine": section}))
        assert "\n" not in str(err.value)


def test_study_threads_replaces_train_threads_once_at_configure(monkeypatch):
    from study.core import runtime

    previous = torch.get_num_threads()
    try:
        monkeypatch.setenv(runtime.THREADS_VARIABLE, "1")
        runtime.configure(threads=2)
        assert torch.get_num_threads() == 1
        monkeypatch.delenv(runtime.THREADS_VARIABLE)
        runtime.configure(threads=2)
        assert torch.get_num_threads() == 2
        monkeypatch.setenv(runtime.THREADS_VARIABLE, "two")
        with pytest.raises(StudyError, match="STUDY_THREADS = 'two': must be a positive integer"):
            runtime.configure(threads=2)
    finally:
        torch.set_num_threads(previous)


# --- the worker's side: one stage's command -------------------------------------------------------------


def _job(tmp_path: Path, *commands: str) -> Job:
    return Job(stage="train@x", commands=commands, cwd=str(tmp_path), log=str(tmp_path / "logs" / "train@x"),
               env={"DVC_STAGE": "train@x"})


def test_a_stage_command_reports_its_last_line_and_runs_with_dvcs_variables(tmp_path):
    outcome = run_job(_job(tmp_path, 'echo "epoch 1"; echo "train: x done in $DVC_STAGE"', "pwd > where.txt"))
    assert outcome.returncode == 0 and outcome.error == ""
    assert outcome.summary == "train: x done in train@x"
    assert (tmp_path / "where.txt").read_text().strip() == str(tmp_path)  # the stage's working directory


def test_a_failing_stage_reports_its_error_line_and_stops_at_the_first_failing_command(tmp_path):
    outcome = run_job(_job(tmp_path, "echo warning >&2; echo 'error: the teacher is corrupt' >&2; "
                                     "echo more >&2; exit 2", "touch never"))
    assert outcome.returncode == 2 and outcome.error == "error: the teacher is corrupt"
    assert not (tmp_path / "never").exists()
    assert "warning" in (tmp_path / "logs" / "train@x.err").read_text()  # the whole output stays in the log
    assert run_job(_job(tmp_path, "echo oops >&2; exit 3")).error == "oops"
    assert run_job(_job(tmp_path / "nowhere", "true")).error.endswith("at the same path")


def test_a_cancelled_stage_stops_its_whole_command_at_once(tmp_path):
    """Ray cancels a running task by interrupting the worker's main thread, as _thread.interrupt_main does."""
    timer = threading.Timer(1.0, _thread.interrupt_main)
    timer.start()
    tic = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_job(_job(tmp_path, "sleep 60 & echo $! > child.pid; wait"))
    assert time.monotonic() - tic < 10
    child = int((tmp_path / "child.pid").read_text())  # a grandchild: the stage's own subprocess
    deadline = time.monotonic() + 10
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the command's subprocess survived the cancellation"
        time.sleep(0.1)


def _watchers() -> list[psutil.Process]:
    return [process for process in psutil.process_iter(["cmdline"]) if _WATCHER in (process.info["cmdline"] or [])]


def _wait_until_gone(pid: int, seconds: float, why: str) -> None:
    deadline = time.monotonic() + seconds
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, why
        time.sleep(0.1)


def test_a_command_dies_with_its_worker_even_where_the_shell_forks_it(tmp_path):
    """A worker killed outright (SIGKILL: a lost node, Ray killing it when its driver died) cannot stop its
    command, and /bin/sh (dash) runs even a single command as a child of its own."""
    job = _job(tmp_path, "sleep 120 & echo $! > child.pid; wait")
    worker = subprocess.Popen([sys.executable, "-c", f"from study.infra.engine.tasks import *; run_job({job!r})"],
                              env={**os.environ, "SHELL": "/bin/sh"})
    deadline = time.monotonic() + 30
    while not (tmp_path / "child.pid").is_file() or not (tmp_path / "child.pid").read_text().strip():
        assert time.monotonic() < deadline and worker.poll() is None, "the command never started"
        time.sleep(0.05)
    child = int((tmp_path / "child.pid").read_text())
    os.kill(child, signal.SIGSTOP)  # a paused command cannot act on anything but SIGKILL
    worker.kill()
    worker.wait()
    _wait_until_gone(child, 10, "the command outlived its worker")


def _kill_the_shell_of_a_paused_stage(tmp_path: Path, before: str = "", pause: float = 0.0) -> tuple[str, int]:
    """Run a job in a worker process (``before``: its code to run first) whose shell forks the stage; pause the
    stage, wait ``pause`` seconds, then kill the shell alone, as Ray's KillChildProcs kills a worker's direct
    children; return what the worker printed (its Outcome) and the stage's pid."""
    job = _job(tmp_path, "sleep 120 & echo $! > child.pid; wait")
    script = f"from study.infra.engine.tasks import *\n{before}\nprint(run_job({job!r}))"
    worker = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "SHELL": "/bin/sh"},
                              stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "child.pid").is_file() or not (tmp_path / "child.pid").read_text().strip():
        assert time.monotonic() < deadline and worker.poll() is None, "the command never started"
        time.sleep(0.05)
    child = int((tmp_path / "child.pid").read_text())
    os.kill(child, signal.SIGSTOP)
    time.sleep(pause)
    psutil.Process(child).parent().kill()
    output, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, output  # the worker lived on and saw the kill
    return output, child


def test_a_command_whose_shell_is_killed_takes_its_group_with_it(tmp_path):
    """Ray force-exits a worker whose driver died by killing the worker's children (the shell) and, a moment
    later, the worker: in between, the worker sees its command end by SIGKILL while the stage the shell forked
    still runs. That stage must die too."""
    output, child = _kill_the_shell_of_a_paused_stage(tmp_path)
    assert "returncode=-9" in output
    _wait_until_gone(child, 10, "the stage outlived its killed shell")


def test_a_shell_killed_once_sigchld_is_ignored_still_takes_its_group_with_it(tmp_path):
    """The same kill after the worker's SIGCHLD became ignored, as a Ray worker's may on its way out: the kernel
    reaps the shell, its status is lost (``Popen.wait`` would read 0, a success), and the stage must die all the
    same, reported killed."""
    ignore_sigchld_in_a_second = (
        "import signal\n"
        "signal.signal(signal.SIGALRM, lambda *_: signal.signal(signal.SIGCHLD, signal.SIG_IGN))\n"
        "signal.alarm(1)  # in the main thread, while run_job waits")
    output, child = _kill_the_shell_of_a_paused_stage(tmp_path, ignore_sigchld_in_a_second, pause=1.5)
    assert "returncode=-9" in output, output
    _wait_until_gone(child, 10, "the stage outlived its killed shell")


def test_a_command_that_ends_releases_its_watcher_which_kills_nothing(tmp_path):
    """After a normal end the watcher stands down: even a process the command left running in its group
    survives (as under `dvc repro`); only a dead worker's command is killed."""
    before = {process.pid for process in _watchers()}
    outcome = run_job(_job(tmp_path, "sleep 30 & echo $! > left.pid", "echo two"))
    assert outcome.returncode == 0 and outcome.summary == "two"
    left = psutil.Process(int((tmp_path / "left.pid").read_text()))
    try:
        for watcher in _watchers():
            if watcher.pid not in before:
                _wait_until_gone(watcher.pid, 10, "a watcher outlived the command it watched")
        assert left.is_running() and left.status() != psutil.STATUS_ZOMBIE, "the watcher killed a finished command"
    finally:
        left.kill()


def test_the_command_runs_through_the_users_shell_without_its_startup_files(monkeypatch):
    monkeypatch.setenv("SHELL", "/bin/bash")
    assert shell_command("study train") == ["/bin/bash", "--noprofile", "--norc", "-c", "study train"]
    monkeypatch.delenv("SHELL")
    assert shell_command("study train") == ["/bin/sh", "-c", "study train"]


# --- one-line errors before any work --------------------------------------------------------------------


@pytest.fixture
def params_file(tmp_path) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(SMOKE))
    return path


def _assert_one_line(result: tuple[int, str, str], *fragments: str) -> None:
    code, _out, err = result
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_an_address_nobody_answers_at_is_one_line_in_seconds(params_file, capsys):
    import ray  # noqa: F401 - imported first, so that the clock measures the check, not a cold import
    import study.models  # noqa: F401

    tic = time.monotonic()
    result = cli(capsys, "run", "--params", params_file, "--address", "127.0.0.1:1")
    _assert_one_line(result, "--address 127.0.0.1:1: no Ray cluster answers there", "ray start --head")
    assert time.monotonic() - tic < 20  # Ray itself would retry for minutes


def test_missing_ray_is_one_line(params_file, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    _assert_one_line(cli(capsys, "run", "--params", params_file), "needs Ray, which is not installed", "pip install")


def test_cpus_with_an_address_and_a_folder_without_dvc_are_one_line(params_file, capsys, monkeypatch):
    _assert_one_line(cli(capsys, "run", "--params", params_file, "--address", "auto", "--cpus", "2"),
                     "--cpus sizes the local Ray instance")
    _assert_one_line(cli(capsys, "run", "--params", params_file, "--cpus-per-run", "0"),
                     "--cpus-per-run 0: give at least 1")
    monkeypatch.chdir(params_file.parent)
    _assert_one_line(cli(capsys, "run", "--params", params_file), "not inside a DVC project")


# --- end to end (slow) ----------------------------------------------------------------------------------

# A run's files whose bytes hold wall-clock times (its seconds and throughput; the finished resume state keeps
# the seconds too), so that their DVC hashes differ between any two runs, sequential ones included. Their
# content is compared without the clock instead (test_faults.assert_same_run and _assert_same_results).
CLOCKED = ("metrics.json", "history.csv", "resume.pt")


def _fresh_copy(smoke_study: Path, dest: Path) -> Path:
    """The sequential smoke study's project, code and params identical, before its first `dvc repro`."""
    project = _copy_study(smoke_study, dest)
    from study.presets import COMMITTED_INPUTS

    for generated in ("dvc.lock", "runs", "data/prepared", "data/subsets", "reports", ".dvc/cache"):
        path = project / generated
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    for rel in COMMITTED_INPUTS:  # committed files under reports/ that a stage reads, not outputs
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(smoke_study / rel, project / rel)
    return project


def _study_run(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([STUDY, "run", *args], cwd=project, env=own_code_env(project, env or _env()),
                          capture_output=True, text=True, timeout=1800)


def _lock(project: Path) -> dict:
    """dvc.lock as a dict of stages, each dep and out keyed by path."""
    stages = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    return {name: {key: ({entry["path"]: entry for entry in value} if key in ("deps", "outs") else value)
                   for key, value in entry.items()} for name, entry in stages.items()}


def _assert_same_lock(project: Path, reference: Path, stages: list[str] | None = None) -> None:
    """Same stages (``stages``, or all of the reference's), commands, params, dependency and output paths, and the
    same hashes but where the content holds wall-clock times (then the files themselves are compared without the
    clock, elsewhere)."""
    ours, theirs = _lock(project), _lock(reference)
    if stages is not None:
        theirs = {name: theirs[name] for name in stages}
    assert sorted(ours) == sorted(theirs)
    for name in theirs:
        assert ours[name]["cmd"] == theirs[name]["cmd"] and ours[name].get("params") == theirs[name].get("params")
        for key in ("deps", "outs"):
            assert sorted(ours[name][key]) == sorted(theirs[name][key]), (name, key)
            differing = [path for path, entry in theirs[name][key].items() if ours[name][key][path] != entry]
            assert [path for path in differing if not _clocked(path)] == [], (name, key)


def assert_subset_as_repro(project: Path, reference: Path) -> None:
    """The six stages of :data:`SUBSET_TARGETS` as ``dvc repro`` left them in ``reference``: every run byte for byte,
    their dvc.lock entries, ``dvc status`` clean, and a second ``dvc repro`` running nothing."""
    for run in SUBSET_RUNS:
        assert_same_run(project / "runs" / run, reference / "runs" / run)
    _assert_same_lock(project, reference, SUBSET_STAGES)
    assert "up to date" in _dvc(project, "status", *SUBSET_TARGETS).stdout
    again = _dvc(project, "repro", *SUBSET_TARGETS)
    assert again.returncode == 0 and "Running stage" not in again.stdout, again.stdout


def _clocked(path: str) -> bool:
    """A path whose DVC hash differs between two runs because its content holds a wall-clock time."""
    if path.endswith(CLOCKED) or path in ("runs", "runs_2x"):  # they hold the runs' metrics.json and history.csv
        return True
    # The curves and the report's setup tables print training seconds and throughput, and provenance.json its
    # time of writing; the CKA and attention tables hold none.
    return path.startswith("reports/") and not path.startswith(("reports/tables/cka", "reports/tables/attention"))


# Six stages of the smoke study for the Ray and the local pool's tests: a teacher and its student (one after the
# other), two runs independent of both, and the data stages all of them wait for.
SUBSET_TARGETS = ("distill@d0-0.5-0", "train@vit-0.5-0", "train@vit-1.0-1")
SUBSET_STAGES = ["prepare", "subsets", "train@resnet-0.5-0", "distill@d0-0.5-0", "train@vit-0.5-0", "train@vit-1.0-1"]
SUBSET_RUNS = ["deit/f0.5_s0", "resnet/f0.5_s0", "vit/f0.5_s0", "vit/f1.0_s1"]


@pytest.mark.slow
def test_the_engine_leaves_the_results_and_dvc_lock_of_a_sequential_repro(smoke_study, tmp_path):
    """Six stages of the smoke study from scratch on a local Ray instance. It gets 4 logical CPUs on this 2-core
    machine, so that two 2-thread stages run at once: each stage keeps train.threads = 2, so the results must
    equal the sequential study's byte for byte. The whole study's 39 stages are compared through warm workers
    (tests/infra/test_warm.py); here they took 7 minutes on a 2-core Zen 3 and added nothing Ray-specific."""
    project = _fresh_copy(smoke_study, tmp_path / "study")
    result = _study_run(project, "--cpus", "4", *SUBSET_TARGETS)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.splitlines()[-1].startswith("run: 6 stage(s) ran and 0 were up to date"), result.stdout
    finished = [line for line in result.stdout.splitlines() if line.startswith("train@vit-0.5-0 (")]
    assert len(finished) == 1 and ": train: vit fraction 0.5 seed 0: test top-1 " in finished[0], result.stdout
    assert sorted(path.parent.relative_to(project / "runs").as_posix() for path in
                  (project / "runs").rglob("metrics.json")) == SUBSET_RUNS
    assert_subset_as_repro(project, smoke_study)
    assert _study_run(project, "--cpus", "4", *SUBSET_TARGETS).stdout.strip() == \
        "run: every stage is up to date; nothing to run"


# A stand-in for `study`, first on the PATH of the cluster's workers: it fails the stage named in the file
# $FAIL_STAGE_FILE the way a stage fails (`error: ...`, status 2), and runs every other command for real. DVC
# names the running stage in $DVC_STAGE, and the engine passes that on. The workers were started without the
# project's code on PYTHONPATH, so it puts the stage's folder (the project, a copy of this one) there: `study`
# refuses another checkout's package in a project.
FAILING_STUDY = textwrap.dedent('''\
    #!/bin/sh
    export PYTHONPATH="$PWD${{PYTHONPATH:+:$PYTHONPATH}}"
    if [ -f "$FAIL_STAGE_FILE" ] && [ "$DVC_STAGE" = "$(cat "$FAIL_STAGE_FILE")" ]; then
        echo "error: injected failure of $DVC_STAGE" >&2
        exit 2
    fi
    exec {study} "$@"
''')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """An existing Ray cluster (`ray start --head`, 2 CPUs) for `study run --address`, with token
    authentication as a shared cluster should have: ``cluster["env"]`` holds what a driver needs to join. Its
    workers see the failing stand-in for `study`, switched on by writing a stage's name into ``cluster["fail"]``."""
    folder = tmp_path_factory.mktemp("cluster")
    (folder / "bin").mkdir()
    (folder / "bin" / "study").write_text(FAILING_STUDY.format(study=STUDY))
    (folder / "bin" / "study").chmod(0o755)
    with socket.socket() as probe:  # a free port for the head
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    # SHELL=/bin/sh: dash forks even a single command, the case in which only the engine's watcher (not the
    # shell's death) stops a stage whose worker died. CI's shell; bash would exec it.
    env = _env(folder / "bin", FAIL_STAGE_FILE=str(folder / "fail"), RAY_USAGE_STATS_ENABLED="0", SHELL="/bin/sh",
               **auth)
    ray = str(Path(sys.executable).parent / "ray")
    head = subprocess.Popen([ray, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
                             "--include-dashboard=false", "--disable-usage-stats"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while subprocess.run([ray, "status", f"--address=127.0.0.1:{port}"], env=env, capture_output=True).returncode:
            assert head.poll() is None and time.monotonic() < deadline, "the Ray head did not start"
            time.sleep(2)
        yield {"address": f"127.0.0.1:{port}", "fail": folder / "fail", "env": _env(**auth)}
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # `ray start --block` stops its Ray processes on the way out
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_failed_stage_skips_only_its_dependants_and_the_others_are_recorded(smoke_study, cluster, tmp_path):
    """On a Ray cluster, a teacher's stage fails: its student is skipped, an independent run trains and is recorded;
    with the fault gone the same command trains only what is left, with the sequential study's bytes. (The skip
    through the whole graph, analyses and report included, is the engine's, whichever executor runs the stages:
    tests/infra/test_local_jobs.py.)"""
    project = _copy_study(smoke_study, tmp_path / "study")
    for run in ("resnet/f0.5_s1", "deit/f0.5_s1", "vit/f0.5_s1"):  # these train again
        shutil.rmtree(project / "runs" / run)
    targets = ("distill@d0-0.5-1", "train@vit-0.5-1")  # the teacher, its student, and a run of neither
    cluster["fail"].write_text("train@resnet-0.5-1")
    try:
        result = _study_run(project, "--address", cluster["address"], *targets, env=cluster["env"])
    finally:
        cluster["fail"].unlink()
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stderr.splitlines() == [
        "train@resnet-0.5-1: error: injected failure of train@resnet-0.5-1",
        "error: 1 stage(s) failed, 1 skipped downstream of them, 1 done and recorded in dvc.lock; fix the "
        "failure(s) and rerun `study run` (logs: .dvc/tmp/study-run/)",
    ]
    assert "train@resnet-0.5-1: FAILED; skipping 1 stage(s) downstream" in result.stdout
    assert_same_run(project / "runs" / "vit" / "f0.5_s1", smoke_study / "runs" / "vit" / "f0.5_s1")
    # The independent run is recorded; the failed stage and its student are not.
    stages = ("train@resnet-0.5-1", *targets)  # `dvc status` of a target reports that stage alone
    changed = {line.rstrip(":") for line in _dvc(project, "status", *stages).stdout.splitlines()
               if line and not line.startswith((" ", "\t"))}
    assert changed == {"train@resnet-0.5-1", "distill@d0-0.5-1"}

    final = _study_run(project, "--address", cluster["address"], *targets, env=cluster["env"])  # the fault gone
    assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
    assert "train@vit-0.5-1" not in final.stdout  # recorded by the first run: up to date, not even planned
    for run in ("resnet/f0.5_s1", "deit/f0.5_s1"):
        assert_same_run(project / "runs" / run, smoke_study / "runs" / run)
    assert "up to date" in _dvc(project, "status", *stages).stdout


def _training_step(run: Path) -> int:
    """The step of a run's resume state: 0 without one, -1 once the run finished."""
    from study.train.artifacts import read_checkpoint

    try:
        state = read_checkpoint(run / "resume.pt") if (run / "resume.pt").is_file() else {}
    except ValueError:  # replaced while being read
        return 0
    return -1 if state.get("fingerprint") == "complete" else state.get("step", 0)


def _start_and_stop(project: Path, args: list[str], env: dict, ready, sig: int) -> tuple[int, str]:
    """Start `study run ARGS` in a session of its own; once ``ready()`` holds, pause the stage commands it
    started (SIGSTOP) and send ``sig`` to its process group (the driver, and a local Ray instance's processes if
    it started one); return status and output.

    The pause makes the test independent of the CPU's speed: on a fast one a smoke run would otherwise finish
    its last steps before the engine's stop reaches it. A paused command ignores the engine's SIGTERM, so it
    also exercises the SIGKILL that follows it (SIGKILL ends a stopped process)."""
    engine = subprocess.Popen([STUDY, "run", *args], cwd=project, env=own_code_env(project, env),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 1200
    while engine.poll() is None and not ready():
        assert time.monotonic() < deadline, "the engine never reached the point to stop it"
        time.sleep(0.02)  # a smoke run takes a few milliseconds a step: look often
    paused = _pause_commands_in(project, but_session=engine.pid)
    assert engine.poll() is None, "the engine ended before it could be stopped:\n" + engine.communicate()[0]
    assert paused, "no stage command was running when the engine was to be stopped"
    os.killpg(engine.pid, sig)
    return engine.wait(timeout=120), engine.stdout.read()


def _pause_commands_in(project: Path, but_session: int) -> list[str]:
    """SIGSTOP every process working in ``project`` outside session ``but_session`` (the engine's own: its
    stage commands run in sessions of their own); return their command lines."""
    paused = []
    for process in _processes_in(project):
        try:
            if os.getsid(process.pid) != but_session:
                process.send_signal(signal.SIGSTOP)
                paused.append(" ".join(process.info["cmdline"] or []))
        except (psutil.NoSuchProcess, ProcessLookupError):  # ended meanwhile
            continue
    return paused


def _processes_in(project: Path) -> list[psutil.Process]:
    """Processes whose working directory is ``project`` (``info`` holds their command line)."""
    return [process for process in psutil.process_iter(["cwd", "cmdline"]) if process.info["cwd"] == str(project)]


def _commands_left_in(project: Path) -> list[str]:
    """Processes still working in ``project``: stage commands the engine left behind."""
    return [" ".join(process.info["cmdline"] or []) for process in _processes_in(project)]


def _wait_for_no_commands_in(project: Path, seconds: float = 300) -> None:
    """Wait until no stage command works in ``project``. After a SIGKILL of the driver it is Ray that ends the
    task's worker (and so its watcher the command): 0.0-0.2 s on an idle 2-core machine, more than 60 s on one
    loaded by the other xdist worker. The commands are paused, so waiting longer cannot let one finish."""
    start = time.monotonic()
    while (left := _commands_left_in(project)) and time.monotonic() < start + seconds:
        time.sleep(1)
    assert left == [], f"a stage command outlived the engine by {time.monotonic() - start:.0f} s: {left}"


@pytest.mark.slow
def test_a_stopped_or_killed_engine_resumes_without_redoing_finished_stages(smoke_study, cluster, tmp_path):
    """The teacher and its student train again, one after the other (`study run distill@d0-1.0-2`); the engine
    is stopped with SIGTERM while the teacher trains, then killed with SIGKILL while the student trains."""
    project = _copy_study(smoke_study, tmp_path / "study")
    teacher, student = project / "runs" / "resnet" / "f1.0_s2", project / "runs" / "deit" / "f1.0_s2"
    for run in (teacher, student):
        shutil.rmtree(run)
    logs = project / ".dvc" / "tmp" / "study-run"
    args = ["--address", cluster["address"], "distill@d0-1.0-2"]

    # SIGTERM while the teacher trains: the engine stops its command, records nothing, and exits 130.
    code, output = _start_and_stop(project, args, cluster["env"], lambda: _training_step(teacher) >= 20,
                                   signal.SIGTERM)
    assert code == 130, output
    assert "interrupted: stopping 1 stage(s): train@resnet-1.0-2 (running)" in output
    assert "rerun the same command" in output
    _wait_for_no_commands_in(project)
    assert not (teacher / "metrics.json").exists() and _training_step(teacher) >= 20  # its resume state stays
    assert "train@resnet-1.0-2" in _dvc(project, "status", "train@resnet-1.0-2").stdout  # not recorded

    # SIGKILL once the teacher is done, and so recorded, and the student is mid-way.
    code, output = _start_and_stop(project, args, cluster["env"], lambda: _training_step(student) >= 20,
                                   signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert "resuming at step" in (logs / "train@resnet-1.0-2.out").read_text()
    assert "up to date" in _dvc(project, "status", "train@resnet-1.0-2").stdout
    _wait_for_no_commands_in(project)
    teacher_written = (teacher / "model.pt").stat().st_mtime_ns

    final = _study_run(project, *args, env=cluster["env"])
    assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
    assert "train@resnet-1.0-2" not in final.stdout  # up to date: not even planned again
    assert (teacher / "model.pt").stat().st_mtime_ns == teacher_written
    assert "resuming at step" in (logs / "distill@d0-1.0-2.out").read_text()
    assert_same_run(teacher, smoke_study / "runs" / "resnet" / "f1.0_s2")
    assert_same_run(student, smoke_study / "runs" / "deit" / "f1.0_s2")
    assert "up to date" in _dvc(project, "status", "distill@d0-1.0-2").stdout
