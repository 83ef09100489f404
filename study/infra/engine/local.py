"""The local executor of ``study run --jobs N``: at most N stage commands at once on this machine, without Ray.

Each stage's command runs as it does on a Ray worker (:func:`~study.infra.engine.tasks.run_job`: its own
process group, a watcher that kills it if the driver dies, its logs), from a thread of the driver. A stage
starts once the pool has room for its :class:`Reservation`, as Ray would start it:

* at most ``jobs`` commands at once;
* their CPUs (each stage's threads) add up to at most the pool's CPUs: this machine's cores, or ``--cpus``,
  which may ask for more (two 2-thread trainings on 2 cores, byte-identical to `dvc repro`'s);
* on GPUs (CUDA as torch sees it, or ``--gpus`` logical ones) each stage takes its share of one GPU, named in
  its CUDA_VISIBLE_DEVICES, and a GPU holds no more stages than its shares fit (4 of 0.25).

Queued stages start in the order they were submitted, but one that fits may pass one that does not.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from concurrent import futures
from dataclasses import dataclass, field

from study.core.errors import StudyError
from study.infra.engine.resources import Reservation
from study.infra.engine.tasks import Job, Outcome, close_warm_workers, run_job

# Shares such as 0.1 do not add up to exactly 1.0 in floating point.
_SHARE_SLACK = 1e-9


@dataclass(eq=False)
class _Task:
    """One submitted stage: the driver's handle to it."""

    job: Job
    reservation: Reservation
    future: futures.Future = field(default_factory=futures.Future)
    stop: threading.Event = field(default_factory=threading.Event)
    gpu: int | None = None  # index into the pool's GPUs while it runs


class LocalPool:
    """A pool of at most ``jobs`` stage commands at once on this machine (a context manager)."""

    def __init__(self, jobs: int, cpus: int | None = None, gpus: int | None = None) -> None:
        """``cpus``: CPU threads the running stages may hold in all (None: this machine's cores); ``gpus``: GPUs
        to share out (None: those torch sees; on a machine without, logical ones, as Ray's ``--gpus``)."""
        self.jobs, self.cpus = jobs, cpus if cpus is not None else len(os.sched_getaffinity(0))
        self._gpus_given = gpus
        self._lock = threading.Lock()
        self._queued: list[_Task] = []
        self._running: list[_Task] = []

    def __enter__(self) -> LocalPool:
        self.gpu_ids = _gpu_ids(self._gpus_given)
        return self

    def __exit__(self, *exc) -> None:
        # Commands still running here were given up on by a cancel that timed out: their threads are daemons, and
        # the watchers kill the commands once this process is gone.
        close_warm_workers()

    @property
    def where(self) -> str:
        gpus = f", {len(self.gpu_ids)} GPU(s)" if self.gpu_ids else ""
        return f"a local pool of {self.jobs} job(s) ({self.cpus} CPU(s){gpus})"

    @property
    def side_by_side(self) -> bool:
        """Only where ``--cpus`` lets the running stages hold more threads than this machine has cores: within
        them no thread waits for a core, and passive waiting would only slow each stage."""
        return self.jobs > 1 and self.cpus > len(os.sched_getaffinity(0))

    def node_cpus(self) -> int:
        return self.cpus

    def has_gpus(self) -> bool:
        return bool(self.gpu_ids)

    def submit(self, job: Job, reservation: Reservation) -> _Task:
        task = _Task(job, reservation)
        with self._lock:
            self._queued.append(task)
            self._admit()
        return task

    def finished(self, handles: list, timeout: float) -> list:
        done, _ = futures.wait([task.future for task in handles], timeout=timeout, return_when=futures.FIRST_COMPLETED)
        return [task for task in handles if task.future in done]

    def outcome(self, handle: _Task, job: Job) -> Outcome:
        try:
            return handle.future.result(timeout=0)
        except BaseException as err:  # noqa: BLE001 - cancelled, or the thread failed before the command ran
            reason = " ".join(str(err).split())[:300] or type(err).__name__
            return Outcome(stage=job.stage, returncode=-1, seconds=0.0, summary="",
                           error=f"error: the local pool could not run it ({reason})", node=os.uname().nodename)

    def cancel(self, handles: list, timeout: float) -> None:
        with self._lock:
            for task in handles:
                if task in self._queued:
                    self._queued.remove(task)
                    task.future.cancel()
                    task.future.set_running_or_notify_cancel()  # only then does futures.wait count it as done
                task.stop.set()  # a running command is stopped by its thread (SIGTERM, then SIGKILL)
        futures.wait([task.future for task in handles], timeout=timeout)

    def _admit(self) -> None:
        """Start every queued stage there is room for (the lock is held)."""
        for task in list(self._queued):
            if len(self._running) >= self.jobs:
                return
            room, gpu = self._gpu_for(task.reservation)
            if not room or sum(t.reservation.cpus for t in self._running) + task.reservation.cpus > self.cpus:
                continue
            self._queued.remove(task)
            self._running.append(task)
            task.gpu = gpu
            task.future.set_running_or_notify_cancel()
            threading.Thread(target=self._work, args=(task,), name=task.job.stage, daemon=True).start()

    def _gpu_for(self, reservation: Reservation) -> tuple[bool, int | None]:
        """Whether a GPU has room for the stage's share, and which (the fullest that fits: the others stay free
        for larger shares); (True, None) for a stage that takes no GPU."""
        if not reservation.gpus:
            return True, None
        used = [sum(t.reservation.gpus for t in self._running if t.gpu == i) for i in range(len(self.gpu_ids))]
        fits = [i for i, share in enumerate(used) if share + reservation.gpus <= 1 + _SHARE_SLACK]
        return (True, max(fits, key=lambda i: used[i])) if fits else (False, None)

    def _work(self, task: _Task) -> None:
        job = dataclasses.replace(task.job, env={**task.job.env, **self._ray_variables(task)})
        try:
            task.future.set_result(run_job(job, task.stop))
        except BaseException as err:  # noqa: BLE001 - KeyboardInterrupt from a cancel, or an OSError
            task.future.set_exception(err)
        finally:
            with self._lock:
                self._running.remove(task)
                self._admit()


    def _ray_variables(self, task: _Task) -> dict[str, str]:
        """What a Ray worker adds to a task's environment, so that a stage runs alike in either executor: its
        GPU, and OpenMP threads as many as its CPUs (numpy's BLAS reads them; torch's threads are set apart)."""
        env = {}
        if task.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu_ids[task.gpu]
        if not os.environ.get("OMP_NUM_THREADS"):  # Ray keeps a value the driver has, too
            env["OMP_NUM_THREADS"] = str(task.reservation.cpus)
        return env


def _gpu_ids(gpus: int | None) -> list[str]:
    """The GPUs to share out, as CUDA_VISIBLE_DEVICES names them for a child of this process."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    names = [name.strip() for name in visible.split(",") if name.strip()] if visible else None
    if gpus is None:
        import torch

        gpus = torch.cuda.device_count()  # honours CUDA_VISIBLE_DEVICES
        if names is None:
            return [str(i) for i in range(gpus)]
        return names[:gpus]
    if names is not None and len(names) < gpus:
        raise StudyError(f"--gpus {gpus}: CUDA_VISIBLE_DEVICES={visible} names only {len(names)}; give at most "
                         f"{len(names)} or unset it")
    return names[:gpus] if names is not None else [str(i) for i in range(gpus)]
