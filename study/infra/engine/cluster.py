"""The Ray executor of the engine (:mod:`~study.infra.engine.executor`): connect, submit a stage's command as a
task, collect how it ended, stop it.

Without ``--address`` the engine starts a private Ray instance on this machine and stops it at the end;
with one it joins an existing cluster (``ray start --head`` / ``ray start --address=...``) and leaves it
running. Every problem a user can fix (Ray missing, an address nobody answers at, a cluster that would
never fit a stage) is a one-line :class:`StudyError`.
"""

from __future__ import annotations

import logging
import os
import socket
from contextlib import contextmanager
from pathlib import Path

from study.infra.engine.resources import Reservation
from study.infra.engine.tasks import Job, Outcome, keep_exit_status, run_job
from study.core.errors import StudyError

# Seconds to wait for a TCP answer at --address before giving up: Ray itself retries for minutes.
_CONNECT_TIMEOUT = 5.0
# The local instance moves only file paths and one-line results, so a small object store suffices
# (Ray's default takes 30% of the machine's memory).
_OBJECT_STORE_BYTES = 128 * 1024**2
# A busy machine can make Ray's local start fail (its raylet waits only 15 s for the dashboard agent, a known
# Ray bug: https://github.com/ray-project/ray/issues/65983); a second try usually succeeds.
_START_ATTEMPTS = 2


def preflight(address: str | None, cpus: int | None, gpus: int | None = None) -> None:
    """Fail in seconds, before any planning: options an existing cluster ignores, Ray missing, or nothing
    answering at ``address`` (the options every executor takes are checked in :func:`executor.choose`)."""
    for option, value in (("cpus", cpus), ("gpus", gpus)):
        if address is not None and value is not None:
            raise StudyError(f"--{option} sizes the local Ray instance; an existing cluster (--address) has its own "
                             f"{option.upper()}s")
    _import_ray()
    if address is not None:
        _check_reachable(address)


class Cluster:
    """A connection to Ray for the length of one engine run (a context manager)."""

    def __init__(self, address: str | None = None, cpus: int | None = None, gpus: int | None = None) -> None:
        """``cpus``/``gpus`` size a local instance (None: what Ray detects). Ray's GPUs are logical: on a
        machine without one, ``gpus`` still schedules by GPU shares and sets CUDA_VISIBLE_DEVICES."""
        self.address, self.cpus, self.gpus = address, cpus, gpus
        self.ray = None

    def __enter__(self) -> Cluster:
        self.ray = _import_ray()
        if self.address is None:
            self._start_local()
        else:
            self._connect(self.address)
        keep_exit_status()  # ray.init ignored SIGCHLD here too: the driver's own commands (dvc) must keep theirs
        self._task = self.ray.remote(max_retries=0)(run_job)  # a failed stage is reported, never retried blindly
        return self

    def __exit__(self, *exc) -> None:
        self.ray.shutdown()  # stops a local instance; only disconnects from an existing cluster

    @property
    def where(self) -> str:
        return f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"

    @property
    def side_by_side(self) -> bool:
        return True  # a node runs as many stages as its CPUs fit

    def node_cpus(self) -> int:
        """CPUs of the largest live node: no single stage can reserve more."""
        cpus = [node["Resources"].get("CPU", 0) for node in self.ray.nodes() if node.get("Alive")]
        if not cpus or max(cpus) < 1:
            raise StudyError(f"{self.where} has no node with a CPU to run stages on")
        return int(max(cpus))

    def has_gpus(self) -> bool:
        return self.ray.cluster_resources().get("GPU", 0) > 0

    def submit(self, job: Job, reservation: Reservation):
        """Start ``job`` once a node has its reservation; return Ray's handle to its result."""
        options = {"num_cpus": reservation.cpus, "name": job.stage}
        if reservation.gpus:
            # Ray then sets CUDA_VISIBLE_DEVICES to the GPU it chose, and runs no more tasks on a GPU than
            # their shares fit (4 of 0.25); a share below 1 always lies on one GPU.
            options["num_gpus"] = reservation.gpus
        return self._task.options(**options).remote(job)

    def finished(self, handles: list, timeout: float) -> list:
        """The handles among ``handles`` whose task has ended, waiting at most ``timeout`` seconds for one."""
        done, _ = self.ray.wait(handles, num_returns=1, timeout=timeout)
        return done

    def outcome(self, handle, job: Job) -> Outcome:
        """How the task ended; a worker that died or a task Ray could not run is a failed stage."""
        try:
            return self.ray.get(handle)
        except self.ray.exceptions.RayError as err:
            reason = " ".join(str(err).split())[:300]
            return Outcome(stage=job.stage, returncode=-1, seconds=0.0, summary="",
                           error=f"error: Ray could not finish the task ({type(err).__name__}: {reason})", node="")

    def cancel(self, handles: list, timeout: float) -> None:
        """Stop running tasks: each stops its command (SIGTERM, then SIGKILL) before it ends.

        If Ray is gone already (Ctrl-C reaches the local instance's processes too), its workers have died
        and taken their commands with them, so there is nothing left to stop.
        """
        try:
            for handle in handles:
                self.ray.cancel(handle, force=False)
            if handles:
                self.ray.wait(handles, num_returns=len(handles), timeout=timeout)
        except Exception:  # noqa: BLE001 - any Ray error here means the cluster is already gone
            pass

    def _start_local(self) -> None:
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                # address="local": a new instance even where `ray start` runs one (ray.init() would join it)
                with _local_instance_environment():
                    self.ray.init(address="local", num_cpus=self.cpus, num_gpus=self.gpus, include_dashboard=False,
                                  log_to_driver=False,
                                  logging_level=logging.ERROR, object_store_memory=_OBJECT_STORE_BYTES)
                return
            except Exception as err:  # noqa: BLE001 - Ray raises plain Exception when its processes fail to start
                self.ray.shutdown()
                if attempt == _START_ATTEMPTS:
                    raise StudyError(
                        f"the local Ray instance did not start ({_one_line(err)}); see "
                        f"{Path(_ray_temp_dir(), 'session_latest', 'logs')}/raylet.out, retry when the machine "
                        "is less busy, or start one with `ray start --head` and pass --address"
                    ) from None

    def _connect(self, address: str) -> None:
        try:
            self.ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        except Exception as err:  # noqa: BLE001 - ConnectionError, ValueError, RpcError ... all mean the same here
            fix = "start one with `ray start --head` or fix the address"
            if "uthentication" in str(err) or "uthentication" in type(err).__name__:
                fix = ("the cluster uses token authentication: set RAY_AUTH_MODE=token, with its token in "
                       "~/.ray/auth_token or RAY_AUTH_TOKEN")
            raise StudyError(f"--address {address}: could not join a Ray cluster there ({_one_line(err)}); {fix}") from None


@contextmanager
def _local_instance_environment():
    """A private instance's settings (no usage report; the raylet reaps what a crashed worker leaves behind) in this
    process's environment only while ``ray.init`` starts its processes, which inherit them. Left set, they would
    reach what this process starts later: every stage's command, and a cluster started from the same process
    (`ray start`), whose raylet then treats a dying worker's processes by its own rules: in the test suite, a
    stage of such a cluster outlived its SIGKILLed driver whenever a local instance had run first in that process."""
    settings = {"RAY_USAGE_STATS_ENABLED": "0",
                "RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper": "true"}
    saved = {name: os.environ.get(name) for name in settings}
    for name, value in settings.items():
        os.environ.setdefault(name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _import_ray():
    try:
        import ray
    except ImportError:
        raise StudyError("`study run` needs Ray, which is not installed; install the project's `cluster` extra "
                         "(`pip install -e \".[cluster]\"`), or run the stages without Ray: "
                         "`study run --jobs N`") from None
    return ray


def _check_reachable(address: str) -> None:
    """Fail in seconds when nothing listens at ``host:port`` (Ray would retry for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # "auto", or a form Ray resolves itself: let ray.init judge it
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_TIMEOUT).close()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise StudyError(f"--address {address}: no Ray cluster answers there ({reason}); start one with "
                         "`ray start --head` on that node or fix the address") from None


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _ray_temp_dir() -> str:
    return os.environ.get("RAY_TMPDIR", "/tmp/ray")
