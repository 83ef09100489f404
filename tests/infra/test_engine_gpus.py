"""The engine's GPU scheduling, on a CPU-only Ray instance with logical GPUs.

Ray's GPUs are logical resources: ``ray.init(num_gpus=2)`` on a machine without one schedules by GPU shares
and sets CUDA_VISIBLE_DEVICES all the same. So the engine's own path (``Cluster.submit`` of a stage's
reservation, ``run_job`` running its command) is checked here: every stage sees exactly one GPU, and no GPU
ever holds more stages at once than its shares allow; and on that local instance (which runs with the raylet as
subreaper) a failing command still fails its stage. Without DVC: the stages are plain shell commands.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from study.core.config import parse_params
from study.infra.engine.params import EngineParams
from study.infra.engine.cluster import Cluster
from study.infra.engine.resources import Reservation, concurrency_warning, reservation
from study.infra.engine.tasks import Job
from study.presets import preset_params
from tests.conftest import ROOT

SECONDS = 2.0  # each stage's length: long enough that stages which may overlap do
# A stage: note CUDA_VISIBLE_DEVICES and when it started and ended (time.time, comparable across processes).
STAGE = """import os, sys, time
start = time.time()
time.sleep(float(sys.argv[2]))
with open(sys.argv[1], "w") as out:
    out.write(f"{os.environ.get('CUDA_VISIBLE_DEVICES')} {start} {time.time()}")
"""


def _run_stages(tmp_path: Path, cluster: Cluster, count: int, share: float) -> list[tuple[str, float, float]]:
    """``count`` stages, each reserving 1 CPU and ``share`` of a GPU; (CUDA_VISIBLE_DEVICES, start, end) of each."""
    script = tmp_path / "stage.py"
    script.write_text(STAGE)
    handles = []
    for i in range(count):
        command = f"{sys.executable} {script} {tmp_path / f'stage{i}.txt'} {SECONDS}"
        job = Job(stage=f"train@{i}", commands=(command,), cwd=str(tmp_path), log=str(tmp_path / f"log{i}"))
        handles.append((cluster.submit(job, Reservation(cpus=1, gpus=share, threads=None)), job))
    for handle, job in handles:
        outcome = cluster.outcome(handle, job)
        assert outcome.returncode == 0, outcome.error
    records = []
    for i in range(count):
        devices, start, end = (tmp_path / f"stage{i}.txt").read_text().split()
        records.append((devices, float(start), float(end)))
    return records


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals that share one moment."""
    events = sorted(itertools.chain(((s, 1) for s, _ in intervals), ((e, -1) for _, e in intervals)))
    running = most = 0
    for _, step in events:  # at equal times an end (-1) sorts first: touching intervals do not overlap
        running += step
        most = max(most, running)
    return most


@pytest.fixture(scope="module")
def two_logical_gpus():
    """A local Ray instance with 8 logical CPUs and 2 logical GPUs on this CPU-only machine."""
    with Cluster(cpus=8, gpus=2) as cluster:
        yield cluster


def test_a_cluster_of_logical_gpus_is_one_the_engine_schedules_on(two_logical_gpus):
    assert two_logical_gpus.has_gpus()
    # the local instance's own settings stay out of this process's environment, hence out of what it starts next
    assert "RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper" not in os.environ
    shares = reservation(training=True, engine=EngineParams(gpus_per_run=0.5), train_threads=1, node_cpus=8,
                         gpus_available=two_logical_gpus.has_gpus())
    assert shares.gpus == 0.5


def test_each_stage_sees_one_gpu_and_no_gpu_holds_more_stages_than_its_shares_allow(two_logical_gpus, tmp_path):
    records = _run_stages(tmp_path, two_logical_gpus, count=8, share=0.5)  # 2 per GPU, 4 at once in all
    assert {devices for devices, _, _ in records} == {"0", "1"}  # one GPU each, and both GPUs used
    for gpu in ("0", "1"):
        assert _most_at_once([(s, e) for d, s, e in records if d == gpu]) <= 2, gpu
    assert _most_at_once([(s, e) for _, s, e in records]) <= 4
    # 8 stages of SECONDS, at most 4 at once: at least two waves, so the limit was binding.
    span = max(e for _, _, e in records) - min(s for _, s, _ in records)
    assert span >= 2 * SECONDS


def test_a_whole_gpu_per_stage_runs_one_stage_per_gpu(two_logical_gpus, tmp_path):
    records = _run_stages(tmp_path, two_logical_gpus, count=4, share=1.0)
    assert {devices for devices, _, _ in records} == {"0", "1"}
    for gpu in ("0", "1"):
        assert _most_at_once([(s, e) for d, s, e in records if d == gpu]) == 1, gpu


def test_a_failing_command_fails_its_stage_and_the_driver_still_sees_exit_statuses(two_logical_gpus, tmp_path):
    """The local instance runs with the raylet as subreaper, which makes Ray ignore SIGCHLD in its workers and in
    the driver: without ``keep_exit_status`` both saw every command exit 0 (a failed stage passed as done, and
    the fault tests after this module saw a killed `dvc repro` exit 0)."""
    job = Job(stage="train@failing", commands=("true", "exit 3", "true"), cwd=str(tmp_path), log=str(tmp_path / "log"))
    outcome = two_logical_gpus.outcome(two_logical_gpus.submit(job, Reservation(cpus=1, gpus=0, threads=None)), job)
    assert outcome.returncode == 3
    assert subprocess.run([sys.executable, "-c", "raise SystemExit(4)"]).returncode == 4


def test_gpus_with_an_address_or_below_zero_is_one_line(capsys):
    from study.core.cli import main

    params = str(Path(__file__).resolve().parents[2] / "params.yaml")
    for args, message in ((["--address", "auto", "--gpus", "2"], "--gpus sizes the local Ray instance"),
                          (["--gpus", "-1"], "--gpus -1: give 0 or more")):
        assert main(["run", "--params", params, *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


def test_a_pool_warns_where_cpu_reservations_hold_it_below_its_jobs():
    """train.threads 0 reserves every core: a pool of 8 on 16 cores then trains one stage at a time (the first
    whole-range run on an H200 did, 2026-11-28), and `study run` says so."""
    every_core = reservation(training=True, engine=EngineParams(gpus_per_run=0.125), train_threads=0, node_cpus=16,
                             gpus_available=True)
    warning = concurrency_warning(8, 16, every_core)
    assert warning is not None and "at most 1 of the 8 jobs" in warning and "train.threads" in warning
    two = reservation(training=True, engine=EngineParams(), train_threads=2, node_cpus=16, gpus_available=True)
    assert concurrency_warning(8, 16, two) is None


@pytest.mark.parametrize("name", ["whole_range_gpu", "confirmatory_gpu", "ladder_gpu"])
def test_the_gpu_presets_train_eight_stages_at_once_on_sixteen_cores(name):
    """The device machine has 16 cores; the presets' commands use --jobs 8 with a GPU share of 1/8 each."""
    params = parse_params(preset_params(ROOT, name), source=f"configs/{name}.yaml")
    training = reservation(training=True, engine=EngineParams(gpus_per_run=0.125), train_threads=params.train.threads,
                           node_cpus=16, gpus_available=True)
    assert concurrency_warning(8, 16, training) is None
