"""What a worker does for one stage: run its command, as ``dvc repro`` would, and report how it ended.

The worker is a Ray worker, or a thread of the local pool (:mod:`~study.infra.engine.local`).

This module is imported on every worker node, so it needs nothing but the standard library: no DVC, no
torch. The command runs in the stage's working directory through the user's shell (DVC's choice of shell
and flags), with DVC's ``DVC_ROOT``/``DVC_STAGE`` variables, in a process group of its own so that the
whole command can be stopped, even when the worker itself dies (``_WATCHER``), and with its output in two
log files from which the driver takes the stage's summary (last line of stdout) and its ``error:`` line.
The worker never touches DVC's records: the driver commits a stage only after this function returned
success, so an interrupted stage is never recorded.

With ``Job.warm``, a command that is one plain ``study ...`` line runs in a fork of a warm worker instead
(:mod:`~study.infra.engine.warm`: the same ``study`` entry point without a new Python and torch to start), with the
same process group, watcher, logs and exit status; other commands run through the shell either way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from study.infra.engine.warm import Zygotes, runs_this_study, study_argv

# Seconds a stopped command gets to exit after SIGTERM before SIGKILL (`study train` dies at once; its
# resume state is written atomically, so nothing is half written either way).
_GRACE_SECONDS = 10.0
_POLL_SECONDS = 0.5
_ALL_CLEAR = b"."  # what the worker tells its watcher once the command exited by itself
# This process's idle warm workers (a Ray worker keeps its own between tasks; they end when it does).
_ZYGOTES = Zygotes()

# The watcher of one command, run by the worker's Python before the command starts. It detaches (a fork
# whose parent exits at once) so that it is not a child of the worker: nothing that kills the worker's children
# (Ray does, on its way out) reaches it. It reads the command's process group from a pipe whose only writer is
# the worker, then waits. End of file before the all-clear means the worker died, or saw the command die from
# a signal (``_run``): either way it kills that group.
# PR_SET_PDEATHSIG would reach only the shell, and /bin/sh (dash) forks a single command instead of exec'ing
# it, so the stage itself would outlive the worker. Ray's own remedy (the raylet as subreaper,
# RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper) is set when a cluster starts, which the
# engine does not control for `--address`.
_WATCHER = """
import os, signal, sys
if os.fork():
    os._exit(0)
pipe = os.fdopen(int(sys.argv[1]), "rb")
group = pipe.readline()
if group.strip() and pipe.read(1) != {all_clear!r}:
    try:
        os.killpg(int(group), signal.SIGKILL)
    except ProcessLookupError:
        pass
""".format(all_clear=_ALL_CLEAR)


@dataclass(frozen=True)
class Job:
    """One stage's command, as the driver hands it to a worker (plain data: it crosses the network)."""

    stage: str  # DVC's addressing, e.g. train@vit-0.5-0
    commands: tuple[str, ...]  # run one after the other, as DVC runs a list `cmd`
    cwd: str  # the stage's working directory: on a cluster, a path every node shares
    log: str  # path prefix of the stage's logs: <log>.out and <log>.err
    env: dict[str, str] = field(default_factory=dict)  # added to the worker's environment
    warm: bool = False  # run a plain `study ...` command in a fork of a warm worker (module docstring)


@dataclass(frozen=True)
class Outcome:
    stage: str
    returncode: int  # 0: every command succeeded
    seconds: float
    summary: str  # the last line the command printed on stdout
    error: str  # on failure: the command's `error: ...` line, else its last line on stderr
    node: str  # the host that ran it
    warm: bool = False  # a warm worker ran its commands (Job.warm)


def run_job(job: Job, stop: threading.Event | None = None) -> Outcome:
    """Run ``job``'s commands in order; stop at the first failure. Ray calls this in a worker, the local pool
    in a thread of the driver.

    If the task is cancelled (Ray raises KeyboardInterrupt here; the local pool sets ``stop``, as a thread
    cannot be interrupted) the command is stopped first and KeyboardInterrupt raised, so no stage keeps
    running after the engine gave up on it.
    """
    keep_exit_status()
    with _interruptible():
        return _run_commands(job, stop)


def keep_exit_status() -> None:
    """Let this process see its children's exit status again, whatever Ray did to SIGCHLD.

    In a Ray instance started with RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper (the engine's
    local one is), every process that joins it, workers and driver alike, has SIGCHLD set to SIG_IGN: the
    kernel then reaps children itself, ``waitpid`` finds none, and ``subprocess`` reports every command as exit
    status 0 (measured with Ray 2.60 here: ``false`` returned 0 in a worker and in the driver, even after
    ``ray.shutdown()``), so a failed stage would pass as done. The raylet, a separate process, still reaps
    what a dead worker leaves behind. Python sets handlers only from the main thread, where Ray runs a task and
    the engine's driver runs; elsewhere this does nothing rather than fail the stage.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def _run_commands(job: Job, stop: threading.Event | None) -> Outcome:
    tic = time.monotonic()
    if not Path(job.cwd).is_dir():
        return _outcome(job, 2, tic, error=f"error: {job.cwd} does not exist on {os.uname().nodename}; on a cluster "
                                         "the project must be on a file system every node mounts at the same path")
    out, err = Path(f"{job.log}.out"), Path(f"{job.log}.err")
    out.parent.mkdir(parents=True, exist_ok=True)
    returncode, warm = 0, False
    with out.open("w") as stdout, err.open("w") as stderr:
        for command in job.commands:
            returncode, in_warm = _run(command, job, stdout, stderr, stop)
            warm = warm or in_warm
            if returncode != 0:
                break
    return _outcome(job, returncode, tic, summary=_last_line(out), error=_error_line(err, returncode), warm=warm)


def _run(command: str, job: Job, stdout, stderr, stop: threading.Event | None) -> tuple[int, bool]:
    """The command's exit status, and whether a warm worker ran it."""
    argv = study_argv(command) if job.warm else None
    if argv is not None and (returncode := _run_warm(argv, job, stop)) is not None:
        return returncode, True
    with _watcher() as watcher:  # started first: no command ever runs unwatched
        process = subprocess.Popen(
            shell_command(command), cwd=job.cwd, env=_environment(job), stdout=stdout, stderr=stderr,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        watcher.watch(process.pid)  # the command's process group: start_new_session made it its own
        returncode = _wait(process, stop)
        # Killed by a signal, the shell may be only the first of its group to die: a worker that Ray
        # force-exits (its job's driver died) first kills its own children, i.e. the shell, and a moment later
        # itself, and this loop can see the shell's death in between. So the watcher stands down only after the
        # command exited by itself; otherwise it kills whatever is left of the group.
        if returncode >= 0:
            watcher.release()
        return returncode, False


def _environment(job: Job) -> dict[str, str]:
    """A stage's environment: this process's, the job's on top, without an empty OMP_WAIT_POLICY (libgomp warns
    about one on stderr, in every stage)."""
    env = {**os.environ, **job.env}
    if env.get("OMP_WAIT_POLICY") == "":
        del env["OMP_WAIT_POLICY"]
    return env


def _run_warm(argv: list[str], job: Job, stop: threading.Event | None) -> int | None:
    """``study *argv`` in a fork of a warm worker, watched and stopped as a command of its own is (:func:`_run`);
    ``None`` where the ``study`` on the stage's PATH is another environment's, or no warm worker could start it:
    the command then runs on its own (where an error shows as it would without warm workers)."""
    env = _environment(job)
    if not runs_this_study(env):
        return None
    zygote = _ZYGOTES.borrow(env)
    try:
        with _watcher() as watcher:
            try:
                zygote.start(argv, job.cwd, job.env, f"{job.log}.out", f"{job.log}.err")
            except OSError:
                zygote.close()
                return None
            watcher.watch(zygote.pid)  # the child's process group: it started a session of its own
            returncode = _wait(zygote, stop)
            if returncode >= 0:
                watcher.release()
    except BaseException:  # cancelled, or the worker died before its child started: no stage keeps it
        zygote.close()
        raise
    _ZYGOTES.give_back(zygote, env)
    return returncode


def close_warm_workers() -> None:
    """End this process's idle warm workers (the local pool, at the end of a run)."""
    _ZYGOTES.close()


def _wait(process: subprocess.Popen, stop: threading.Event | None) -> int:
    """The command's exit status; if this task is cancelled or the worker shuts down, stop it first."""
    try:
        while True:
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt  # the local pool's cancel, stopped below as Ray's is
            # Wait in short slices: Ray cancels a task by interrupting its main thread, which a plain
            # blocking wait() would not notice until the command ended.
            if isinstance(process, subprocess.Popen):
                if (returncode := _reaped(process, _POLL_SECONDS)) is not None:
                    return returncode
                continue
            try:
                return process.wait(timeout=_POLL_SECONDS)
            except subprocess.TimeoutExpired:
                continue
    except BaseException:  # cancelled (KeyboardInterrupt) or the worker is shutting down (SystemExit)
        _stop(process)
        raise


def _reaped(process: subprocess.Popen, seconds: float) -> int | None:
    """The command's exit status once it ended, waiting at most ``seconds``, else None. A Ray worker on its way out may have SIGCHLD ignored
    (Ray's SetSigchldIgnore): the kernel then reaps the shell itself and its status is lost, which ``Popen.wait``
    reports as 0, a success that would stand the watcher down while the stage the shell forked runs on (Ray kills
    the shell first). A lost status is reported as a kill, never as a success, so the watcher kills the group."""
    deadline, delay = time.monotonic() + seconds, 0.0005
    while True:
        try:
            pid, status = os.waitpid(process.pid, os.WNOHANG)
        except ChildProcessError:  # reaped by the kernel (SIGCHLD ignored): the status is lost
            process.returncode = -signal.SIGKILL
            return process.returncode
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode
        if time.monotonic() >= deadline:
            return None
        delay = min(delay * 2, 0.05, max(0.0, deadline - time.monotonic()))  # Popen.wait's own polling
        time.sleep(delay)


class _Watch:
    """The worker's end of a watcher's pipe: ``watch(group)`` arms it, ``release()`` stands it down."""

    def __init__(self, write: int):
        self._write = write

    def watch(self, group: int) -> None:
        os.write(self._write, b"%d\n" % group)

    def release(self) -> None:
        with suppress(BrokenPipeError):  # the watcher is gone (someone killed it): nothing to stand down
            os.write(self._write, _ALL_CLEAR)


@contextmanager
def _watcher():
    """Start a watcher (``_WATCHER``) and yield its ``_Watch``: unless released before the block ends (or if
    this process dies first), the watcher kills the group it was given."""
    read, write = os.pipe()  # both ends close on exec: the command inherits neither
    try:
        subprocess.run([sys.executable, "-c", _WATCHER, str(read)], pass_fds=(read,), stdin=subprocess.DEVNULL,
                       cwd="/", start_new_session=True, check=True)  # returns at once: the watcher detached
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    try:
        yield _Watch(write)
    finally:
        os.close(write)  # end of file: a watcher not released kills its group now


@contextmanager
def _interruptible():
    """Make sure Ray's cancel reaches this task: Ray interrupts the main thread as SIGINT would, which does
    nothing while SIGINT is ignored (a worker started from a background shell inherits that)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, signal.SIG_DFL, None):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def shell_command(command: str) -> list[str]:
    """``command`` through the user's shell without its startup files: how ``dvc repro`` runs a stage."""
    shell = os.environ.get("SHELL") or "/bin/sh"
    flags = {"bash": ["--noprofile", "--norc"], "zsh": ["--no-rcs"]}.get(Path(shell).name, [])
    return [shell, *flags, "-c", command]


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the command's process group, then SIGKILL what is left after the grace period."""
    for sig, wait in ((signal.SIGTERM, _GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _outcome(job: Job, returncode: int, tic: float, summary: str = "", error: str = "", warm: bool = False) -> Outcome:
    return Outcome(stage=job.stage, returncode=returncode, seconds=time.monotonic() - tic, summary=summary,
                   error=error, node=os.uname().nodename, warm=warm)


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _error_line(path: Path, returncode: int) -> str:
    """The stage's own one-line error (``error: ...``), else its last line on stderr, else the exit status."""
    if returncode == 0:
        return ""
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    if errors:
        return errors[-1]
    if returncode < 0:
        return f"killed by signal {-returncode}" + (f"; last output: {lines[-1]}" if lines else "")
    return lines[-1] if lines else f"exit status {returncode}"
