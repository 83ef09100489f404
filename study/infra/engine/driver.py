"""``study run``: what ``dvc repro`` does, with independent stages running at the same time.

The driver (this process) plans with DVC, hands every stage whose upstream stages are done to an executor
(:mod:`~study.infra.engine.executor`: Ray, or with ``--jobs`` a local pool) which starts it as soon as there is
room for it, and records each stage in DVC the moment its command succeeds (its dvc.lock entry journaled, and
written with others in a batch: :mod:`~study.infra.engine.lockfile`). So at any time dvc.lock and the journal
hold exactly the stages that finished: kill the driver however you like, and the same command resumes, with
finished stages up to date and interrupted training runs continuing from their ``resume.pt``. A failed stage
stops only the stages downstream of it; the others run to the end, and the failures are listed once at the end.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

from study.core.config import Params
from study.infra.engine.params import engine_params
from study.infra.engine.executor import LOG_DIR, Executor, choose
from study.infra.engine.interrupts import Interrupts
from study.infra.engine.pipeline import RECORDED, RUN, UP_TO_DATE, Pipeline, Plan
from study.infra.engine.progress import Progress
from study.infra.engine.resources import (Reservation, concurrency_warning, is_training, reservation,
                                         with_cpus_per_run)
from study.infra.engine.schedule import DONE, SKIPPED, Schedule
from study.infra.engine.tasks import Job
from study.core.errors import StudyError
from study.core.runtime import THREADS_VARIABLE

# Seconds between checks for signals while waiting on the executor (Ray's wait is not interruptible).
_POLL_SECONDS = 1.0
# Seconds stopped stages get to end (each SIGTERMs, then SIGKILLs, its command).
_STOP_SECONDS = 20.0


def run_study(params: Params, targets: list[str], address: str | None = None, cpus: int | None = None,
              cpus_per_run: int | None = None, gpus: int | None = None, jobs: int | None = None,
              warm: bool = False, submitit: str | None = None) -> str:
    """Bring the pipeline (or ``targets`` and their upstream stages) up to date; return a one-line summary.

    ``cpus_per_run`` replaces ``engine.cpus_per_run`` for this run (``--cpus-per-run``); ``jobs`` runs the stages
    in a local pool of that many instead of on Ray, ``submitit`` (``slurm`` or ``local``) as submitit jobs; ``cpus``
    and ``gpus`` size the local Ray instance or pool;
    ``warm`` runs each ``study`` command in a fork of a warm worker (:mod:`~study.infra.engine.warm`).
    """
    tic = time.monotonic()
    executor = choose(address, jobs, cpus, gpus, cpus_per_run, submitit, engine_params(params))
    params = with_cpus_per_run(params, cpus_per_run)
    pipeline = Pipeline()
    if pipeline.replayed:
        print(f"run: {len(pipeline.replayed)} stage(s) that a killed run had finished now recorded in dvc.lock")
    try:
        plan = pipeline.plan(targets)
        if not plan.stages:
            return "run: every stage is up to date; nothing to run"
        with executor, pipeline.scm_context(), Interrupts() as interrupts:
            driver = _Driver(params, pipeline, plan, executor, interrupts, warm)
            if jobs and (warning := concurrency_warning(jobs, driver.node_cpus, driver.training_reservation())):
                print(warning, file=sys.stderr)
            driver.run()
        # Failures are raised only now, after DVC's git bookkeeping, so the stages that did finish keep their
        # .gitignore entries and (with core.autostage) are staged; `dvc repro` takes them back on any error.
        return driver.summary(time.monotonic() - tic)
    finally:
        pipeline.close()


class _Driver:
    """One engine run: the schedule, the tasks in flight, and what failed."""

    def __init__(self, params: Params, pipeline: Pipeline, plan: Plan, executor: Executor,
                 interrupts: Interrupts, warm: bool = False) -> None:
        self.params, self.pipeline, self.executor, self.interrupts = params, pipeline, executor, interrupts
        self.warm = warm
        self.stages = {stage.addressing: stage for stage in plan.stages}
        self.schedule = Schedule(list(self.stages), plan.upstream)
        self.node_cpus = executor.node_cpus()
        self.gpus = executor.has_gpus() and params.train.device != "cpu"
        self.in_flight: dict[str, tuple] = {}  # stage handed to the executor -> (its handle, Job)
        self.failures: dict[str, str] = {}  # stage -> its error line
        self.ran = 0
        self.ran_warm = 0  # of those, the stages a warm worker ran

    def run(self) -> None:
        self.progress = Progress(self.schedule, self.executor.where, started=lambda: len(self._started()))
        try:
            while not self.schedule.finished:
                self._start_ready()
                self._collect()
                self._write_lock(force=not self.in_flight)  # nothing runs: the write slows nothing
                self.progress.refresh()
        except KeyboardInterrupt:
            self._stop()
            raise
        finally:
            self._write_lock(force=True)
            self.progress.close()

    def summary(self, seconds: float) -> str:
        """The final line; with failures, first one line per failure on stderr, then a StudyError."""
        s = self.schedule
        if self.failures:
            for name, error in self.failures.items():
                print(f"{name}: {error}", file=sys.stderr)
            raise StudyError(
                f"{len(self.failures)} stage(s) failed, {s.count(SKIPPED)} skipped downstream of them, "
                f"{s.count(DONE)} done and recorded in dvc.lock; fix the failure(s) and rerun `study run` "
                f"(logs: {LOG_DIR}/)"
            )
        warm = f"; {self.ran_warm} ran in warm workers" if self.warm else ""
        return (f"run: {self.ran} stage(s) ran and {s.count(DONE) - self.ran} were up to date, in {seconds:.0f} s "
                f"on {self.executor.where}; dvc.lock records them{warm}")

    def _start_ready(self) -> None:
        """Start every stage whose upstream stages are done (DVC may find some up to date at once)."""
        while ready := self.schedule.ready():
            for name in ready:
                self._start(name)

    def _start(self, name: str) -> None:
        stage = self.stages[name]
        try:
            with self.interrupts.protected():  # outputs removed and locks taken together, or not at all
                decision = self.pipeline.prepare(stage)
        except StudyError as err:
            self._fail(name, f"error: {err}")
            return
        if decision == UP_TO_DATE:
            self.schedule.finish(name)
            self.progress.up_to_date(name)
        elif decision == RECORDED:
            self.schedule.finish(name)
            self.progress.recorded(name, "restored by DVC and recorded")
        else:
            assert decision == RUN
            job = self._job(stage)
            for log in _logs(job):
                log.unlink(missing_ok=True)  # the worker creates them when the stage starts: see _started
            self.in_flight[name] = (self.executor.submit(job, self._reservation(stage)), job)
            self.schedule.start(name)
            self.progress.refresh()

    def _job(self, stage) -> Job:
        commands = self.pipeline.commands(stage)
        env = self.pipeline.environment(stage)
        threads = self._reservation(stage).threads
        if threads is not None:
            env[THREADS_VARIABLE] = str(threads)
        # Stages side by side can hold more OpenMP threads than the node has cores; threads that spin while they
        # wait then starve each other. Measured on this project's 2-core CPU, two 2-thread processes of small
        # convolutions: 33x slower each than one alone with OpenMP's default waiting, 2.8x with passive waiting.
        # Within the cores passive waiting only costs: a default 2-thread training alone ran at about 3,550 img/s
        # with it against 4,500-5,300 without (same bytes). Waiting changes no result. A value set in the driver's
        # environment is kept; an empty one is not (libgomp warns about it on stderr, in every stage).
        if self.executor.side_by_side and not os.environ.get("OMP_WAIT_POLICY"):
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        log = Path(self.pipeline.root, LOG_DIR, re.sub(r"[^\w@.,=+-]", "_", stage.addressing))
        return Job(stage=stage.addressing, commands=commands, cwd=stage.wdir, log=str(log), env=env, warm=self.warm)

    def training_reservation(self) -> Reservation:
        """What one training stage reserves (engine.cpus_per_run, else train.threads)."""
        return reservation(True, engine_params(self.params), self.params.train.threads, self.node_cpus, self.gpus)

    def _reservation(self, stage):
        training = is_training(self.pipeline.commands(stage)[0])
        return reservation(training, engine_params(self.params), self.params.train.threads, self.node_cpus, self.gpus)

    def _started(self) -> list[str]:
        """The stages in flight that a worker has begun; the others wait in the executor's queue for room."""
        return [name for name, (_handle, job) in self.in_flight.items() if _logs(job)[0].exists()]

    def _collect(self) -> None:
        """Wait (briefly) for a task to end; record each one that ended well, fail the others."""
        if not self.in_flight:
            return
        handles = {handle: name for name, (handle, _job) in self.in_flight.items()}
        for handle in self.executor.finished(list(handles), timeout=_POLL_SECONDS):
            name = handles[handle]
            job = self.in_flight.pop(name)[1]
            outcome = self.executor.outcome(handle, job)
            if outcome.returncode != 0:
                self.pipeline.release(name)
                self._fail(name, outcome.error or f"exit status {outcome.returncode}")
                continue
            try:
                with self.interrupts.protected():  # a stage is recorded whole, or not at all
                    self.pipeline.record(self.stages[name])
            except StudyError as err:
                self._fail(name, f"error: its command succeeded but DVC could not record it: {err}")
                continue
            self.schedule.finish(name)
            self.ran += 1
            self.ran_warm += outcome.warm
            self.progress.finished(outcome)

    def _write_lock(self, force: bool) -> None:
        """dvc.lock gets the recorded stages' entries in batches (:mod:`~study.infra.engine.lockfile`)."""
        with self.interrupts.protected():  # never a half-written dvc.lock
            self.pipeline.write_lock(force)

    def _fail(self, name: str, error: str) -> None:
        self.failures[name] = error
        skipped = self.schedule.fail(name)
        self.progress.failed(name, skipped)

    def _stop(self) -> None:
        """Interrupted: stop the stages in flight (none is recorded) and let go of their locks."""
        started = self._started()
        names = [f"{name} ({'running' if name in started else 'queued'})" for name in self.in_flight]
        self.progress.line(f"interrupted: stopping {len(names)} stage(s): {', '.join(names) or 'none'}")
        with self.interrupts.protected():
            self.executor.cancel([handle for handle, _job in self.in_flight.values()], timeout=_STOP_SECONDS)
            for name in self.in_flight:
                self.pipeline.release(name)
        self.in_flight.clear()



def _logs(job: Job) -> tuple[Path, Path]:
    """The stage's stdout and stderr logs, as the worker writes them."""
    return Path(f"{job.log}.out"), Path(f"{job.log}.err")
