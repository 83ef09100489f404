"""``study run --jobs N``: the engine's local pool, without Ray.

The quick tests run a tiny DVC project whose stages are short Python scripts that note when they ran and the
variables they saw: what may run at once (jobs, CPUs, GPU shares), what a failure stops, what a killed run leaves
for the next one, and the one-line errors. The slow one runs six stages of the smoke study from scratch with
``--jobs 2`` and compares them with the sequential ``dvc repro`` of conftest's ``smoke_study``; the whole study is
compared through the warm workers the README's command uses (tests/infra/test_warm.py).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
import yaml

from study.core.checkout import own_code_env
from study.infra.engine.local import LocalPool
from study.infra.engine.lockfile import JOURNAL
from study.infra.engine.resources import Reservation
from study.infra.engine.tasks import Job
from tests.faults.test_faults import SMOKE, _dvc, cli
from tests.infra.test_engine_gpus import _most_at_once as most_at_once

# A stage: fail if named in ./fail, hang if named in ./hang, else sleep; note its times and environment.
STAGE = textwrap.dedent("""\
    import json, os, sys, time
    name, seconds = sys.argv[1], float(sys.argv[2])
    start = time.time()
    if os.path.exists("fail") and open("fail").read().strip() == name:
        sys.exit(print(f"error: injected failure of {name}", file=sys.stderr) or 2)
    if os.path.exists("hang") and open("hang").read().strip() == name:
        open(f"{name}.pid", "w").write(str(os.getpid()))
        time.sleep(300)
    time.sleep(seconds)
    variables = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "STUDY_THREADS", "CUDA_VISIBLE_DEVICES", "DVC_STAGE")
    record = {"start": start, "end": time.time(), "env": {v: os.environ.get(v) for v in variables}}
    os.makedirs("out", exist_ok=True)
    json.dump(record, open(f"out/{name}.json", "w"))
    print(f"{name}: done")
""")
# prepare, then three independent stages, then one that needs them all; `other` needs nothing.
GRAPH = {"prepare": [], "t1": ["prepare"], "t2": ["prepare"], "t3": ["prepare"], "report": ["t1", "t2", "t3"],
         "other": []}
SECONDS = 1.0


def _dvc_yaml(seconds: float) -> dict:
    stages = {}
    for name, upstream in GRAPH.items():
        stages[name] = {"cmd": f"{sys.executable} stage.py {name} {seconds}",
                        "deps": ["stage.py", *(f"out/{u}.json" for u in upstream)], "outs": [f"out/{name}.json"]}
    return {"stages": stages}


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A DVC project (without git) of :data:`GRAPH`'s stages, and the smoke study's params; the current folder."""
    root = tmp_path / "project"
    root.mkdir()
    _dvc(root, "init", "--no-scm", "-q")
    (root / "stage.py").write_text(STAGE)
    (root / "dvc.yaml").write_text(yaml.safe_dump(_dvc_yaml(SECONDS)))
    (root / "params.yaml").write_text(yaml.safe_dump(SMOKE))  # train.threads 2: every stage reserves 2 CPUs
    monkeypatch.chdir(root)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    return root


def _records(project: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in (project / "out").glob("*.json")}


def _most_at_once(records: dict[str, dict]) -> int:
    """The largest number of stages that ran at one moment."""
    return most_at_once([(record["start"], record["end"]) for record in records.values()])


def _changed(project: Path) -> set[str]:
    """The stages `dvc status` reports as changed."""
    return {line.rstrip(":") for line in _dvc(project, "status").stdout.splitlines()
            if line and not line.startswith((" ", "\t"))} - {"Data and pipelines are up to date."}


def test_two_jobs_run_independent_stages_at_once_and_record_every_one(project, capsys):
    code, out, err = cli(capsys, "run", "--jobs", "2", "--cpus", "4")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("run: 6 stage(s) ran and 0 were up to date"), out
    assert "on a local pool of 2 job(s) (4 CPU(s))" in out.splitlines()[-1]
    assert "t1 (1 s): t1: done" in out
    records = _records(project)
    assert _most_at_once(records) == 2
    for name, upstream in GRAPH.items():  # nothing started before what it depends on had ended
        assert all(records[u]["end"] <= records[name]["start"] for u in upstream), name
    env = records["t1"]["env"]
    oversubscribed = 4 > len(os.sched_getaffinity(0))  # two 2-thread stages on fewer than 4 cores: passive waiting
    assert env == {"OMP_WAIT_POLICY": "PASSIVE" if oversubscribed else None, "OMP_NUM_THREADS": "2",
                   "STUDY_THREADS": None, "CUDA_VISIBLE_DEVICES": None, "DVC_STAGE": "t1"}
    assert (project / ".dvc" / "tmp" / "study-run" / "t1.out").read_text() == "t1: done\n"
    assert _changed(project) == set()
    assert cli(capsys, "run", "--jobs", "2")[1].strip() == "run: every stage is up to date; nothing to run"


def test_the_stages_threads_never_exceed_the_cpus_and_one_job_waits_as_dvc_repro_does(project, capsys, monkeypatch):
    """Every stage holds train.threads = 2: on 2 CPUs, 3 jobs still run one stage at a time, and a stage that never
    shares its cores keeps OpenMP's own waiting (passive waiting slows a lone training by about a quarter); an
    empty OMP_WAIT_POLICY in the driver's environment is not passed on (libgomp warns)."""
    monkeypatch.setenv("OMP_WAIT_POLICY", "")
    assert cli(capsys, "run", "--jobs", "3", "--cpus", "2", "t1", "t2")[0] == 0
    records = _records(project)
    assert sorted(records) == ["prepare", "t1", "t2"] and _most_at_once(records) == 1
    assert records["t1"]["env"]["OMP_WAIT_POLICY"] is None
    monkeypatch.delenv("OMP_WAIT_POLICY")
    assert cli(capsys, "run", "--jobs", "1", "other")[0] == 0
    assert _records(project)["other"]["env"]["OMP_WAIT_POLICY"] is None


def test_a_failed_stage_skips_only_its_dependants_and_a_rerun_finishes(project, capsys):
    (project / "fail").write_text("t2")
    code, out, err = cli(capsys, "run", "--jobs", "2", "--cpus", "4")
    assert code == 2
    assert err.splitlines() == [
        "t2: error: injected failure of t2",
        "error: 1 stage(s) failed, 1 skipped downstream of them, 4 done and recorded in dvc.lock; fix the failure(s) "
        "and rerun `study run` (logs: .dvc/tmp/study-run/)",
    ]
    assert "t2: FAILED; skipping 1 stage(s) downstream" in out
    assert _changed(project) == {"t2", "report"}
    (project / "fail").unlink()
    code, out, err = cli(capsys, "run", "--jobs", "2", "--cpus", "4")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("run: 2 stage(s) ran and 0 were up to date"), out
    assert _changed(project) == set()


@pytest.mark.slow  # a SIGKILL drill of the driver: waits on processes for 15 s
def test_a_killed_run_resumes_without_redoing_finished_stages_and_never_imports_ray(project):
    """The driver is SIGKILLed while t3 hangs: t3's command dies with it, the stages that finished stay recorded,
    and the same command then runs only what is left. Ray is never imported on the way."""
    script = ("import sys; from study.core.cli import main; code = main(sys.argv[1:]); "
              "print('ray imported' if 'ray' in sys.modules else 'no ray'); sys.exit(code)")
    command = [sys.executable, "-c", script, "run", "--jobs", "2", "--cpus", "4"]
    (project / "hang").write_text("t3")
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not (project / "t3.pid").is_file() or not (project / "t3.pid").read_text():
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()[0]
        time.sleep(0.05)
    hung = psutil.Process(int((project / "t3.pid").read_text()))
    while len(_records(project)) < 4:  # prepare, t1, t2 and other (2 CPUs next to t3's 2)
        assert time.monotonic() < deadline, "the other stages did not finish"
        time.sleep(0.05)
    time.sleep(0.5)  # they are recorded right after their commands end
    driver.kill()
    driver.wait()
    deadline = time.monotonic() + 15
    while hung.is_running() and hung.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the stage's command outlived the killed driver"
        time.sleep(0.1)
    # Each finished stage is in dvc.lock or, if its entry was still waiting for a batched write, in the journal
    # (which the next run writes first): `dvc status` sees only the latter as not run.
    journaled = {path.stem for path in (project / JOURNAL).glob("*.json")}
    assert journaled <= {"prepare", "t1", "t2", "other"}
    assert _changed(project) == {"t3", "report"} | journaled

    (project / "hang").unlink()
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    lines = rerun.stdout.splitlines()
    if journaled:  # written into dvc.lock first
        assert lines.pop(0) == f"run: {len(journaled)} stage(s) that a killed run had finished now recorded in dvc.lock"
    assert lines[0] == "run: 2 stage(s) to check or run, on a local pool of 2 job(s) (4 CPU(s))", lines
    assert lines[-2].startswith("run: 2 stage(s) ran and 0 were up to date") and lines[-1] == "no ray", lines
    assert _changed(project) == set()


@pytest.mark.parametrize("args, message", [
    (["--jobs", "0"], "--jobs 0: give at least 1"),
    (["--jobs", "2", "--address", "127.0.0.1:1"], "--jobs runs stages on this machine without Ray"),
    (["--jobs", "2", "--cpus", "0"], "--cpus 0: give at least 1"),
    (["--jobs", "2", "--gpus", "-1"], "--gpus -1: give 0 or more"),
])
def test_bad_options_are_one_line_before_any_work(project, capsys, args, message):
    code, out, err = cli(capsys, "run", *args)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert out == "" and not (project / "out").exists()


def test_without_ray_the_error_points_to_jobs(project, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    code, _out, err = cli(capsys, "run")
    assert code == 2 and err.count("\n") == 1 and "needs Ray, which is not installed" in err and "--jobs N" in err


# --- the pool alone: GPU shares -----------------------------------------------------------------------------

def _run_in_pool(pool: LocalPool, tmp_path: Path, count: int, reservation: Reservation) -> dict[str, dict]:
    (tmp_path / "stage.py").write_text(STAGE)
    with pool:
        handles = []
        for i in range(count):
            job = Job(stage=f"train@{i}", commands=(f"{sys.executable} stage.py s{i} {SECONDS}",), cwd=str(tmp_path),
                      log=str(tmp_path / "logs" / f"s{i}"))
            handles.append((pool.submit(job, reservation), job))
        for handle, job in handles:
            while not pool.finished([handle], timeout=1.0):
                pass
            assert pool.outcome(handle, job).returncode == 0
    return _records(tmp_path)


def test_training_stages_share_a_gpu_by_their_shares_and_each_sees_one(tmp_path):
    """floor(1 / gpus_per_run) stages at once per GPU: 0.5 on 2 logical GPUs, 8 jobs and 16 CPUs, runs 4 at once."""
    records = _run_in_pool(LocalPool(jobs=8, cpus=16, gpus=2), tmp_path, 8, Reservation(cpus=2, gpus=0.5, threads=2))
    devices = {name: r["env"]["CUDA_VISIBLE_DEVICES"] for name, r in records.items()}
    assert set(devices.values()) == {"0", "1"}
    for gpu in ("0", "1"):
        assert _most_at_once({n: r for n, r in records.items() if devices[n] == gpu}) <= 2, gpu
    assert _most_at_once(records) == 4


def test_a_stage_without_a_gpu_share_gets_no_cuda_variable_and_cancel_drops_the_queue(tmp_path):
    pool = LocalPool(jobs=1, cpus=2, gpus=0)
    (tmp_path / "stage.py").write_text(STAGE)
    (tmp_path / "hang").write_text("s0")
    jobs = [Job(stage=f"s{i}", commands=(f"{sys.executable} stage.py s{i} 0",), cwd=str(tmp_path),
                log=str(tmp_path / f"s{i}")) for i in range(2)]
    with pool:
        handles = [pool.submit(job, Reservation(cpus=1, gpus=0.0, threads=None)) for job in jobs]
        deadline = time.monotonic() + 30
        while not (tmp_path / "s0.pid").is_file() or not (tmp_path / "s0.pid").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert pool.finished(handles, timeout=0.1) == []  # s0 hangs, s1 waits for room
        tic = time.monotonic()
        pool.cancel(handles, timeout=20)
        assert time.monotonic() - tic < 15
        assert pool.finished(handles, timeout=0) == handles
        outcomes = [pool.outcome(handle, job) for handle, job in zip(handles, jobs)]
    assert all(o.returncode != 0 and o.error.startswith("error: the local pool could not run it") for o in outcomes)
    assert not (tmp_path / "s1.out").exists()  # never started


# --- end to end (slow) ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_jobs_leave_the_results_of_dvc_repro_and_a_clean_status(smoke_study, tmp_path):
    """A teacher, its student and two independent runs of the smoke study from scratch with `--jobs 2 --cpus 4`:
    two 2-thread stages at once on this 2-core machine, each with train.threads, so every run's metrics and model
    bytes equal the sequential `dvc repro`'s. Ray is made unimportable: the local pool must never need it. (The
    whole study, 6.4 minutes here on a 2-core Zen 3, is compared with `--warm`: tests/infra/test_warm.py.)"""
    from study.core.config import parse_params
    from tests.infra.test_engine import SUBSET_TARGETS, _fresh_copy, assert_subset_as_repro

    project = _fresh_copy(smoke_study, tmp_path / "study")
    assert parse_params(copy.deepcopy(SMOKE)).train.threads == 2
    script = "import sys; sys.modules['ray'] = None; from study.core.cli import main; sys.exit(main(sys.argv[1:]))"
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = own_code_env(project, {**os.environ, "PATH": path})  # the copy runs its own code, as `study` requires
    result = subprocess.run([sys.executable, "-c", script, "run", "--jobs", "2", "--cpus", "4", *SUBSET_TARGETS],
                            cwd=project, env=env, capture_output=True, text=True, timeout=3600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.splitlines()[-1].startswith("run: 6 stage(s) ran and 0 were up to date"), result.stdout
    assert_subset_as_repro(project, smoke_study)
