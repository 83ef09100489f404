"""Warm workers: a stage's ``study`` command run by a fork of a process that has already imported torch.

A stage's process spends most of a short run starting: Python, then torch, timm, pandas (about 3.7 s of a 4.5-s
smoke run on this project's 2-core CPU). A warm worker pays that once. It is a long-lived Python process (a
*zygote*, after Android's) that imports the third-party libraries the stages use and then waits; for each stage it
forks a child that runs the stage's command line through :func:`study.core.cli.main`, the very function the
``study`` console script calls, so there is one code path for a stage however it is started.

Why a fork for each stage and not the stage run in the worker itself: the child starts from the zygote's state,
which no stage ever touched, so nothing one stage sets (RNG states, torch's threads and deterministic flags,
imported study modules, open files) can reach the next one, and a crash or a kill takes only its own stage. The
zygote imports libraries only, never the study's own modules: each child imports the study's code afresh, as a
new process would, and checks that it is the project's own (:mod:`study.core.checkout`).

What a fork cannot change afterwards: variables that libraries read when they are loaded (OpenMP's and the BLAS
libraries' thread settings) and CUDA's device list (read when CUDA starts; the zygote never starts it, as a fork
of a process with CUDA is unusable). A zygote therefore serves only stages whose values of those variables
(:func:`load_time_key`) equal its own; :class:`Zygotes` keeps one per value.

The protocol, one JSON object per line: the client sends ``{"argv", "cwd", "env", "out", "err"}`` (and ``"entry"``,
``module:function``, where a test runs a probe instead of the CLI); the zygote
answers ``{"pid"}`` once the child runs (in a session of its own: its process group is its pid, so the client can
stop it and everything it started) and ``{"returncode"}`` when it ended (negative: killed by that signal, as
``subprocess`` reports it). End of file on the zygote's input (its client died) ends it.

This module's top level needs only the standard library: the engine imports it on every worker node.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from contextlib import suppress

# Variables read when a library is loaded or CUDA starts: a child cannot change them after the fork.
_LOAD_TIME_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "CUDA_", "PYTORCH_")
# A script's interpreter: its #! line, or a shell script's `exec "PYTHON" -m study`.
_SHEBANG = re.compile(r"\A#!\s*(\S+)")
_EXEC_MODULE = re.compile(r'^\s*exec\s+"?([^"\s]+)"?\s+-m\s+study\b', re.MULTILINE)
# What a stage imports beyond the standard library, in the order they import each other; a missing one is skipped.
_PRELOAD = ("numpy", "torch", "torchvision", "timm", "pandas", "scipy.stats", "matplotlib.figure", "seaborn")
# What a child runs: the function the `study` console script calls.
_CLI = "study.core.cli:main"
# Characters that make a command line more than one program with its arguments: those run through the shell.
_SHELL_SYNTAX = set("|&;<>()$`\\\"'*?[]#~{}\n")


def study_argv(command: str) -> list[str] | None:
    """The arguments of ``command`` if it is one plain ``study ...`` command line, else ``None`` (the shell runs it)."""
    if set(command) & _SHELL_SYNTAX:
        return None
    words = shlex.split(command)
    return words[1:] if len(words) > 1 and words[0] == "study" else None


def runs_this_study(env: dict[str, str]) -> bool:
    """Whether ``study`` on ``env``'s PATH runs this interpreter: its own console script, or a script whose
    interpreter line or ``exec`` names it (a device machine's ``study``, scripts/device-install, is
    ``exec python3 -m study``). Only then does a fork of a zygote (started with this interpreter) run what the
    command would."""
    found = shutil.which("study", path=env.get("PATH"))
    if found is None:
        return False
    if os.path.dirname(found) == os.path.dirname(sys.executable):
        return True
    try:
        with open(found, "rb") as script:
            head = script.read(1024).decode("utf-8", "replace")
    except OSError:
        return False
    named = _SHEBANG.findall(head) + _EXEC_MODULE.findall(head)
    return any(os.path.realpath(path) == os.path.realpath(sys.executable) for path in named)


def load_time_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of ``env`` a fork cannot change (see the module's docstring), as a hashable key."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(_LOAD_TIME_PREFIXES)))


class Zygote:
    """The client's handle to one warm worker: ``start`` one stage, then ``wait`` for it. One stage at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        # -P: no current folder on sys.path, so the zygote imports the `study` package the `study` command would
        self.process = subprocess.Popen([sys.executable, "-P", "-m", "study.infra.engine.warm"], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        start_new_session=True, bufsize=0)
        self.pid: int | None = None  # the running stage's process (and process group)
        self._received = b""  # what was read past the last whole line: both answers may come in one read

    def alive(self) -> bool:
        return self.process.poll() is None

    def start(self, argv: list[str], cwd: str, env: dict[str, str], out: str, err: str, entry: str = _CLI) -> int:
        """Fork a child that runs ``study *argv`` (``entry(argv)``) in ``cwd`` with ``env`` added, its output
        appended to ``out`` and ``err``; return its pid. Raises ``OSError`` if the zygote died."""
        self._send({"argv": argv, "cwd": cwd, "env": env, "out": out, "err": err, "entry": entry})
        self.pid = self._receive(None)["pid"]
        return self.pid

    def wait(self, timeout: float | None = None) -> int:
        """The stage's exit status, waiting at most ``timeout`` seconds (``subprocess.TimeoutExpired`` after)."""
        try:
            return self._receive(timeout)["returncode"]
        except OSError:  # the zygote died under its stage: stop what is left of the stage, report it killed
            with suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            return -signal.SIGKILL

    def close(self) -> None:
        with suppress(OSError):
            self.process.stdin.close()
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        if self.alive():
            self.process.kill()
        self.process.stdout.close()

    def _send(self, message: dict) -> None:
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
        except (BrokenPipeError, ValueError) as err:
            raise OSError("the warm worker is gone") from err

    def _receive(self, timeout: float | None) -> dict:
        """The next answer; unbuffered reads, so that ``select`` never waits on a line already read."""
        fd = self.process.stdout.fileno()
        while b"\n" not in self._received:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired("warm worker", timeout)
            chunk = os.read(fd, 4096)
            if not chunk:
                raise OSError("the warm worker ended")
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return json.loads(line)


class Zygotes:
    """Idle warm workers, one kind per :func:`load_time_key`; a stage borrows one and gives it back."""

    def __init__(self) -> None:
        self._idle: dict[tuple, list[Zygote]] = {}
        self._lock = threading.Lock()

    def borrow(self, env: dict[str, str]) -> Zygote:
        """An idle zygote whose load-time variables are ``env``'s (``env``: the stage's whole environment); a new
        one if none is idle."""
        key = load_time_key(env)
        with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                zygote = idle.pop()
                if zygote.alive():
                    return zygote
        return Zygote({k: v for k, v in os.environ.items() if not k.startswith(_LOAD_TIME_PREFIXES)}
                      | dict(key))

    def give_back(self, zygote: Zygote, env: dict[str, str]) -> None:
        if not zygote.alive():
            return
        with self._lock:
            self._idle.setdefault(load_time_key(env), []).append(zygote)

    def close(self) -> None:
        with self._lock:
            zygotes = [z for idle in self._idle.values() for z in idle]
            self._idle.clear()
        for zygote in zygotes:
            zygote.close()


def _child(request: dict, started: int) -> None:
    """In the forked child: become the stage's process and run its command; never returns. ``started``: the pipe
    on which it tells the zygote that its process group exists."""
    code = 1
    try:
        os.setsid()  # its own process group, as `subprocess` gives a stage with start_new_session
        os.write(started, b".")
        os.close(started)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as a new Python process takes it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.update(request["env"])
        for fd, path in ((1, request["out"]), (2, request["err"])):
            target = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(target, fd)
            os.close(target)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0 now is /dev/null, as a stage's stdin is
        sys.argv = ["study", *request["argv"]]
        import importlib

        module, function = request.get("entry", _CLI).split(":")
        code = int(getattr(importlib.import_module(module), function)(request["argv"]) or 0)
    except SystemExit as exit_:  # argparse's own exits (a bad option, --help)
        code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
    except BaseException:  # noqa: BLE001 - a stage's traceback goes to its log, as in its own process
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    """The zygote: import the libraries, then fork one child per request, one at a time, until end of input."""
    import importlib

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # waitpid needs it; a Ray worker may pass on SIG_IGN
    for name in _PRELOAD:
        with suppress(ImportError):
            importlib.import_module(name)
    answer = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        answer.flush()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            _child(request, write)
        os.close(write)
        # The pid is given out only once the child leads its own group: a stop sent before would miss it.
        os.read(read, 1)  # b"" if it died first: its status follows all the same
        os.close(read)
        answer.write(json.dumps({"pid": pid}) + "\n")
        answer.flush()
        _, status = os.waitpid(pid, 0)
        answer.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        answer.flush()


if __name__ == "__main__":
    serve()
