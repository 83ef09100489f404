"""The SLURM executor of the engine (:mod:`~study.infra.engine.executor`), through submitit, the launcher DeiT and
ConvNeXt are trained with: ``study run --submitit slurm`` submits each stage's command as a SLURM job.

A job runs :func:`~study.infra.engine.tasks.run_job`, as a Ray worker does (its own process group, the watcher,
the stage's logs under .dvc/tmp/study-run/), so a stage behaves the same wherever it runs; submitit's own files
(the pickled call, its result, SLURM's output) go to .dvc/tmp/study-run/submitit/. SLURM queues the jobs, so the
driver submits every stage whose upstream stages are done. A job reserves the stage's CPUs (``cpus_per_task``) and,
on a cluster with GPUs, one whole GPU (SLURM hands out GPUs, not shares of one), for at most
``engine.job_minutes``.

``--submitit local`` runs the same jobs as processes of this machine through submitit's local executor: how the
tests exercise this path, and a way to try a set-up before a cluster. submitit starts a local job at once, so this
executor holds jobs back until their CPUs fit this machine's cores (or ``--cpus``), as the local pool does.

Stopping: ``study run`` interrupted cancels its jobs (``scancel``: SLURM signals every process of the job). A driver
killed outright cannot: its SLURM jobs run on, unrecorded, and ``squeue --me`` lists them under their stages' names;
``scancel`` them before the rerun, which trains the interrupted runs on from their ``resume.pt``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dvc.repo import Repo

from study.core.errors import StudyError
from study.infra.engine.executor import LOG_DIR
from study.infra.engine.resources import Reservation
from study.infra.engine.tasks import Job, Outcome, run_job

CLUSTERS = ("slurm", "local")
# Seconds between two looks at the jobs while waiting for one to end: submitit reads a result file (and, on SLURM,
# asks sacct at most once a minute), so a look costs little.
_POLL_SECONDS = 0.5


@dataclass(eq=False)
class _Handle:
    """The driver's handle to one stage: its submitit job once submitted (local jobs may wait for room first)."""

    job: Job
    reservation: Reservation
    submitted: object | None = None  # submitit.Job


class Submitit:
    """Stages as submitit jobs, on SLURM or (``cluster="local"``) on this machine; a context manager."""

    def __init__(self, cluster: str, partition: str | None, job_minutes: int, cpus: int | None = None,
                 gpus: int | None = None) -> None:
        """``partition``: SLURM's (None: the cluster's default); ``cpus``/``gpus``: what the local executor shares
        out (None: this machine's)."""
        if cluster not in CLUSTERS:
            raise StudyError(f"--submitit {cluster}: give one of {', '.join(CLUSTERS)}")
        if cluster == "slurm" and (cpus is not None or gpus is not None):
            raise StudyError("--cpus and --gpus size a run on this machine; SLURM's nodes have their own "
                             "(drop them, or use --submitit local)")
        _import_submitit()  # the problems a user can fix, before any planning
        if cluster == "slurm" and shutil.which("sbatch") is None:
            raise StudyError("--submitit slurm: SLURM's sbatch is not on the PATH; run `study run` on a node that "
                             "submits jobs (a login node), or use --submitit local on this machine")
        self.cluster, self.partition, self.job_minutes = cluster, partition, job_minutes
        self.cpus = cpus if cpus is not None else len(os.sched_getaffinity(0))
        self._gpus_given = gpus
        self._waiting: list[_Handle] = []  # local jobs held back for room, in submission order
        self._running: list[_Handle] = []

    def __enter__(self) -> Submitit:
        submitit = _import_submitit()
        # submitit's files beside the stages' logs, in the project: a path every node mounts
        self.folder = Path(Repo.find_root(), LOG_DIR, "submitit")
        self.folder.mkdir(parents=True, exist_ok=True)
        self._executor = submitit.AutoExecutor(folder=self.folder, cluster=self.cluster)
        return self

    def __exit__(self, *exc) -> None:
        pass  # submitit keeps no connection; jobs still running were cancelled by the driver or outlive it

    @property
    def where(self) -> str:
        if self.cluster == "local":
            return "submitit's local executor"
        return f"SLURM (partition {self.partition})" if self.partition else "SLURM"

    @property
    def side_by_side(self) -> bool:
        return True  # a node may run several stages at once

    def node_cpus(self) -> int:
        """CPUs of the largest node (SLURM's ``sinfo``), or those of this machine given to the local executor."""
        if self.cluster == "local":
            return self.cpus
        counts = [int(word.rstrip("+")) for word in self._sinfo("%c").split() if word.rstrip("+").isdigit()]
        if not counts:
            raise StudyError(f"--submitit slurm: sinfo lists no node with CPUs{self._in_partition}")
        return max(counts)

    def has_gpus(self) -> bool:
        if self.cluster == "local":
            return bool(self._gpu_count())
        return "gpu" in self._sinfo("%G")  # generic resources, e.g. gpu:a100:8

    def submit(self, job: Job, reservation: Reservation) -> _Handle:
        handle = _Handle(job, reservation)
        self._waiting.append(handle)
        self._start_what_fits()
        return handle

    def finished(self, handles: list, timeout: float) -> list:
        """The handles among ``handles`` whose job has ended, waiting at most ``timeout`` seconds for one."""
        deadline = time.monotonic() + timeout
        while True:
            self._start_what_fits()
            done = [h for h in handles if h.submitted is not None and h.submitted.done()]
            if done or time.monotonic() >= deadline:
                for handle in done:
                    if handle in self._running:
                        self._running.remove(handle)
                self._start_what_fits()
                return done
            time.sleep(min(_POLL_SECONDS, max(0.0, deadline - time.monotonic())))

    def outcome(self, handle: _Handle, job: Job) -> Outcome:
        """How the job ended; one submitit could not finish (killed, timed out, cancelled) is a failed stage."""
        submitted = handle.submitted
        try:
            if self.cluster == "local" and not submitted.paths.result_pickle.exists():
                # a local job writes no result only if it was killed (submitit would wait 15 s for a slow NFS)
                raise RuntimeError(f"killed ({submitted.state})")
            return submitted.result()
        except Exception as err:  # noqa: BLE001 - submitit's UncompletedJobError and FailedJobError, or the pickle
            reason = " ".join(str(err).split())[:200]
            return Outcome(stage=job.stage, returncode=-1, seconds=0.0, summary="",
                           error=f"error: its {self.cluster} job did not finish ({type(err).__name__}: {reason}); "
                                 f"submitit's log: {submitted.paths.stderr}", node="")

    def cancel(self, handles: list, timeout: float) -> None:
        """Cancel the jobs (each stops its command, SIGTERM then SIGKILL) and wait at most ``timeout`` for them."""
        for handle in handles:
            if handle in self._waiting:
                self._waiting.remove(handle)
            elif handle.submitted is not None:
                handle.submitted.cancel(check=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(h.submitted is not None and not h.submitted.done() for h in handles):
            time.sleep(_POLL_SECONDS)

    def _start_what_fits(self) -> None:
        """Submit waiting jobs: all of them on SLURM (its scheduler queues them), on this machine those whose CPUs
        fit beside the running ones (the first always starts, so a stage larger than the machine still runs)."""
        for handle in list(self._waiting):
            if self.cluster == "local" and self._running:
                held = sum(h.reservation.cpus for h in self._running)
                if held + handle.reservation.cpus > self.cpus:
                    continue
            self._waiting.remove(handle)
            handle.submitted = self._submit(handle)
            if self.cluster == "local":
                self._running.append(handle)

    def _submit(self, handle: _Handle):
        parameters = {"name": handle.job.stage, "timeout_min": self.job_minutes, "nodes": 1, "tasks_per_node": 1,
                      "cpus_per_task": handle.reservation.cpus}
        if handle.reservation.gpus:
            parameters["gpus_per_node"] = 1
        if self.cluster == "slurm" and self.partition:
            parameters["slurm_partition"] = self.partition
        self._executor.update_parameters(**parameters)
        try:
            if self.cluster == "local":
                with _controller_start(self.folder / f"{Path(handle.job.log).name}.controller.err"):
                    return self._executor.submit(run_job, handle.job)
            return self._executor.submit(run_job, handle.job)
        except Exception as err:  # noqa: BLE001 - sbatch's refusal (FailedSubmissionError) and the like
            raise StudyError(f"--submitit {self.cluster}: could not submit {handle.job.stage} "
                             f"({' '.join(str(err).split())[:300]})") from None

    def _gpu_count(self) -> int:
        if self._gpus_given is not None:
            return self._gpus_given
        import torch

        return torch.cuda.device_count()

    @property
    def _in_partition(self) -> str:
        return f" in partition {self.partition}" if self.partition else ""

    def _sinfo(self, field_format: str) -> str:
        command = ["sinfo", "--noheader", f"--format={field_format}"]
        if self.partition:
            command.append(f"--partition={self.partition}")
        try:
            return subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError) as err:
            reason = " ".join(str(err).split())[:200]
            raise StudyError(f"--submitit slurm: SLURM's sinfo failed{self._in_partition} ({reason}); run "
                             "`study run` on a node of the cluster") from None


@contextmanager
def _controller_start(log: Path):
    """What a local job's controller, started in the block, inherits: its stderr in ``log`` (it prints a traceback
    when cancelled), and SIGINT not ignored. submitit cancels a local job by SIGINT, which a process started from
    a background shell (or a pytest-xdist worker) would ignore, as the children it starts would; a Python handler,
    unlike an ignored signal, is reset to the default by exec."""
    sys.stderr.flush()
    saved, file = os.dup(2), os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    main = threading.current_thread() is threading.main_thread()
    ignored = main and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    try:
        if ignored:
            signal.signal(signal.SIGINT, lambda *_: None)  # still ignored here, in effect
        os.dup2(file, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(file)
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _import_submitit():
    try:
        import submitit
    except ImportError:
        raise StudyError("`study run --submitit` needs submitit, which is not installed; install the project's "
                         "`cluster` extra (`pip install -e \".[cluster]\"`)") from None
    return submitit
