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
from dataclasses import replace
from pathlib import Path

from study.core.config import Params
from study.infra.engine.cells import cells, joined
from study.infra.engine.params import engine_params
from study.infra.engine.executor import LOG_DIR, Executor, choose
from study.infra.engine.interrupts import Interrupts
from study.infra.engine.pipeline import RECORDED, RUN, UP_TO_DATE, Pipeline, Plan
from study.infra.engine.progress import Progress
from study.infra.engine.resources import (Reservation, concurrency_warning, is_training, reservation,
                                         with_cpus_per_run)
from study.infra.engine.schedule import DONE, SKIPPED, WAITING, Schedule
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
        self.in_flight: dict[str, tuple] = {}  # stage handed to the executor -> (its handle, Job); a cell's share one
        self.cell_size = _cell_size(params, self.gpus)
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
        """Start every stage whose upstream stages are done (DVC may find some up to date at once); with
        ``train.cell`` above 1, the training stages of one cell as one job (:mod:`~study.infra.engine.cells`)."""
        while True:
            ready = self.schedule.ready()
            waiting = [n for n in self.schedule.order if self.schedule.state[n] == WAITING and n not in ready]
            groups, _held = cells(ready, waiting, lambda n: self.pipeline.commands(self.stages[n]), self.cell_size)
            if not groups:
                return
            for group in groups:
                self._start(group)

    def _start(self, group: list[str]) -> None:
        """Start the stages of ``group`` (one, or a cell's) that DVC finds out of date, as one job."""
        to_run = []
        for name in group:
            stage = self.stages[name]
            try:
                with self.interrupts.protected():  # outputs removed and locks taken together, or not at all
                    decision = self.pipeline.prepare(stage)
            except StudyError as err:
                self._fail(name, f"error: {err}")
                continue
            if decision == UP_TO_DATE:
                self.schedule.finish(name)
                self.progress.up_to_date(name)
            elif decision == RECORDED:
                self.schedule.finish(name)
                self.progress.recorded(name, "restored by DVC and recorded")
            else:
                assert decision == RUN
                to_run.append(name)
        if not to_run:
            return
        job = self._job([self.stages[name] for name in to_run])
        for log in _logs(job):
            log.unlink(missing_ok=True)  # the worker creates them when the stage starts: see _started
        handle = self.executor.submit(job, self._reservation(self.stages[to_run[0]]))
        for name in to_run:
            self.in_flight[name] = (handle, job)
            self.schedule.start(name)
        self.progress.refresh()

    def _job(self, stages: list) -> Job:
        """One stage's job, or one job training a cell's stages together (each stage's command joined)."""
        stage = stages[0]
        commands = self.pipeline.commands(stage)
        if len(stages) > 1:
            commands = (joined([self.pipeline.commands(s)[0] for s in stages]),)
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
        name = stage.addressing + (f"+{len(stages) - 1}" if len(stages) > 1 else "")  # a cell: its first stage's
        log = Path(self.pipeline.root, LOG_DIR, re.sub(r"[^\w@.,=+-]", "_", name))
        return Job(stage=name, commands=commands, cwd=stage.wdir, log=str(log), env=env, warm=self.warm)

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
        handles: dict = {}  # a handle -> its stages (a cell's several)
        for name, (handle, _job) in self.in_flight.items():
            handles.setdefault(handle, []).append(name)
        for handle in self.executor.finished(list(handles), timeout=_POLL_SECONDS):
            names = handles[handle]
            job = self.in_flight[names[0]][1]
            for name in names:
                del self.in_flight[name]
            outcome = self.executor.outcome(handle, job)
            for name in names:
                self._record(name, outcome)

    def _record(self, name: str, outcome) -> None:
        """Record one stage whose job ended (a cell's job ends for all its stages at once), or fail it."""
        if outcome.returncode != 0:
            self.pipeline.release(name)
            self._fail(name, outcome.error or f"exit status {outcome.returncode}")
            return
        try:
            with self.interrupts.protected():  # a stage is recorded whole, or not at all
                self.pipeline.record(self.stages[name])
        except StudyError as err:
            self._fail(name, f"error: its command succeeded but DVC could not record it: {err}")
            return
        self.schedule.finish(name)
        self.ran += 1
        self.ran_warm += outcome.warm
        if outcome.stage != name:  # one of a cell's stages: its line names the cell's job
            outcome = replace(outcome, stage=f"{name} (cell {outcome.stage})")
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
            self.executor.cancel(list({handle: None for handle, _job in self.in_flight.values()}),
                                 timeout=_STOP_SECONDS)
            for name in self.in_flight:
                self.pipeline.release(name)
        self.in_flight.clear()



def _cell_size(params: Params, gpus: bool) -> int:
    """Seeds per cell on the device the training stages get (``train.cell``); 1 where the cell step cannot train:
    it runs eagerly in float32 (study.cell.step), so bf16 (``auto`` on a GPU) or compile keep one seed per step."""
    train = params.train
    size = train.cell.cuda if gpus else train.cell.cpu
    bf16 = train.precision == "bf16" or (train.precision == "auto" and gpus)
    return 1 if bf16 or train.compile else size


def _logs(job: Job) -> tuple[Path, Path]:
    """The stage's stdout and stderr logs, as the worker writes them."""
    return Path(f"{job.log}.out"), Path(f"{job.log}.err")
