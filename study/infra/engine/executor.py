"""Where ``study run`` runs stage commands: the interface the driver talks to, and the choice of one per run.

Three implementations: :class:`~study.infra.engine.cluster.Cluster` hands each stage to Ray (a local instance, or
an existing cluster with ``--address``), :class:`~study.infra.engine.local.LocalPool` runs at most ``--jobs N``
of them as subprocesses of this machine, without Ray, and :class:`~study.infra.engine.slurm.Submitit` submits
each as a SLURM job (``--submitit slurm``, or ``local`` to run them through submitit on this machine). The driver plans, schedules and records the same way
with either; only where a command runs, and what waits for room, differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from study.core.errors import StudyError
from study.infra.engine.params import EngineParams
from study.infra.engine.resources import Reservation
from study.infra.engine.tasks import Job, Outcome

# Where each stage's stdout and stderr go, under the project root (DVC's scratch folder, not tracked).
LOG_DIR = Path(".dvc", "tmp", "study-run")


class Executor(Protocol):
    """Runs stage commands (:class:`Job`) once there is room for their :class:`Reservation`; a context manager
    for the length of one engine run. Handles are opaque to the driver."""

    @property
    def where(self) -> str:
        """Where the stages run, for the progress lines and the summary (e.g. ``a local Ray instance``)."""

    @property
    def side_by_side(self) -> bool:
        """Whether stage commands running at the same time may hold more threads than their node's cores (their
        OpenMP threads then compete, and must wait passively)."""

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc) -> None: ...

    def node_cpus(self) -> int:
        """The most CPUs one stage can reserve."""

    def has_gpus(self) -> bool: ...

    def submit(self, job: Job, reservation: Reservation):
        """Start ``job`` once there is room for ``reservation``; return a handle."""

    def finished(self, handles: list, timeout: float) -> list:
        """The handles among ``handles`` whose command has ended, waiting at most ``timeout`` seconds for one."""

    def outcome(self, handle, job: Job) -> Outcome:
        """How a finished command ended; one that could not run at all is a failed stage."""

    def cancel(self, handles: list, timeout: float) -> None:
        """Stop these commands (SIGTERM, then SIGKILL), waiting at most ``timeout`` seconds for them to end."""


def choose(address: str | None, jobs: int | None, cpus: int | None, gpus: int | None,
           cpus_per_run: int | None, submitit: str | None = None,
           engine: EngineParams | None = None) -> Executor:
    """The executor for ``study run``'s options, checked before any planning (one-line errors).

    ``--jobs`` picks the local pool, ``--submitit`` submitit (``engine``: its partition and time limit);
    without either, Ray (the default).
    """
    if cpus is not None and cpus < 1:
        raise StudyError(f"--cpus {cpus}: give at least 1")
    if gpus is not None and gpus < 0:
        raise StudyError(f"--gpus {gpus}: give 0 or more")
    if cpus_per_run is not None and cpus_per_run < 1:
        raise StudyError(f"--cpus-per-run {cpus_per_run}: give at least 1 CPU per training run")
    if submitit is not None:
        for option, value in (("--jobs", jobs), ("--address", address)):
            if value is not None:
                raise StudyError(f"{option} picks another executor than --submitit {submitit}; give one of them")
        from study.infra.engine.slurm import Submitit

        engine = engine or EngineParams()
        return Submitit(submitit, engine.slurm_partition, engine.job_minutes, cpus, gpus)
    if jobs is None:
        from study.infra.engine.cluster import Cluster, preflight

        preflight(address, cpus, gpus)
        return Cluster(address, cpus, gpus)
    if jobs < 1:
        raise StudyError(f"--jobs {jobs}: give at least 1 (stage commands at once on this machine)")
    if address is not None:
        raise StudyError(f"--jobs runs stages on this machine without Ray; drop --jobs to run them on the Ray "
                         f"cluster at --address {address}")
    from study.infra.engine.local import LocalPool

    return LocalPool(jobs, cpus, gpus)
