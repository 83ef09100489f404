"""``dvc repro`` in a scratch copy of the project, timed per stage and stopped at a time limit.

Why a scratch copy: the GPU acceptance times the default study and a GPU preset end to end, and must never touch
the checkout's params.yaml, dvc.lock or outputs. The copy leaves out environments, kits, pipeline outputs and
caches, takes the given parameters (a preset merged over params.yaml: study.presets) as its params.yaml and,
where the device cannot download it, the dataset's files. Each stage's wall time runs from its "Running stage" line to the next one (or the end); a run that
reaches its time limit is stopped (SIGTERM to dvc's process group, then SIGKILL), and its last stage is marked so.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

from study.core.checkout import own_code_env
from study.core.errors import StudyError
from study.presets import commit_all

# Top-level entries of the checkout that a scratch copy leaves out: environments, kits, pipeline outputs, caches.
_NOT_COPIED = {".git", ".venv", ".kit", ".whl", ".carry", ".gl", "runs", "data", "reports", "build", ".pytest_cache"}
_STOP_GRACE_SECONDS = 10.0
# `study run`'s line for each finished stage (study.infra.engine.progress): "train@vit-0.5-0 (41 s): train: ...", or
# for a stage trained in a cell "train@vit-0.5-1 (cell train@vit-0.5-0+2) (41 s): train: ...".
_FINISHED = re.compile(r"^(?P<stage>\S+)(?: \(cell \S+\))? \((?P<seconds>[\d.]+) s\): (?P<last>.*)$")
# ... and its line for a stage that failed: "train@vit-0.5-0: FAILED; skipping 3 stage(s) downstream".
_FAILED = re.compile(r"^(?P<stage>\S+): FAILED")


def scratch_copy(root: Path, dest: Path, params_text: str, dataset_files: Path | None, data_root: str) -> Path:
    """A copy of the project at ``dest`` with ``params_text`` as its params.yaml, no outputs, no dvc.lock, and
    the dataset's files (if given) in its ``data_root``; a git repository when git exists, else DVC without SCM."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).resolve()
        skipped = {n for n in names if n in ("__pycache__",) or n.endswith(".egg-info")}
        if here == root.resolve():  # runs_2x and the like: every runs folder is a pipeline output
            skipped |= _NOT_COPIED & set(names) | {"dvc.lock"} | {n for n in names if n.startswith("runs")}
        if here == (root / ".dvc").resolve():
            skipped |= {"tmp", "cache", "config.local"} & set(names)
        return skipped

    shutil.copytree(root, dest, ignore=ignore, symlinks=True)
    (dest / "params.yaml").write_text(params_text)
    if dataset_files is not None:
        shutil.copytree(dataset_files, dest / data_root, dirs_exist_ok=True)
    if shutil.which("git"):
        commit_all(dest, "scratch copy")
    else:  # DVC without git: its documented `core.no_scm` switch, in the copy's local config
        (dest / ".dvc" / "config.local").write_text("[core]\n    no_scm = true\n")
    return dest


def _dvc_env(project: Path | None = None) -> dict[str, str]:
    """This interpreter's scripts (`dvc`, `study`) first on PATH; output unbuffered, so each line is timed; and, run
    in ``project`` (the scratch copy), the copy's own code first on PYTHONPATH: `study` refuses to run another
    checkout's package in a project (study.core.checkout), and the copy's code is this checkout's, byte for byte."""
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", ""), "PYTHONUNBUFFERED": "1"}
    return env if project is None else own_code_env(project, env)


def _command(name: str) -> str:
    """The path of ``name`` (`dvc`, `study`) as the runs will find it."""
    found = shutil.which(name, path=_dvc_env()["PATH"])
    if found is None:
        raise StudyError(f"`{name}` is not on PATH; install the project (or on a device machine: "
                         ". scripts/device-install)")
    return found


def _run_dvc(project: Path, *args: str) -> str:
    done = subprocess.run([_command("dvc"), *args], cwd=project, env=_dvc_env(project), capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise StudyError(f"dvc {' '.join(args)} failed in {project}: {_last_line(done.stderr or done.stdout)}")
    return done.stdout


def timed_repro(project: Path, targets: list[str], time_limit: float | None, log: Path,
                jobs: int | None = None, warm: bool = False) -> tuple[list[dict], dict]:
    """``dvc repro [targets]`` in ``project``, or with ``jobs`` ``study run --jobs N [--warm] [targets]``: one row per
    stage that started and a summary. Stopped after ``time_limit`` seconds. A stage's wall time is, under
    ``dvc repro``, from its "Running stage" line to the next one or the end; under ``study run``, where stages
    overlap, the one its finished line gives (whole seconds)."""
    planned = len(_run_dvc(project, "stage", "list", "--name-only").split())
    starts: list[tuple[str, float]] = []
    finished: list[dict] = []
    command = ([_command("dvc"), "repro", *targets] if jobs is None
               else [_command("study"), "run", "--jobs", str(jobs), *(["--warm"] if warm else []), *targets])
    tic = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=project, env=_dvc_env(project), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True)
        reader = threading.Thread(target=_read_stages, args=(process.stdout, out, starts, tic, finished), daemon=True)
        reader.start()
        try:
            returncode = process.wait(timeout=time_limit)
            stopped = False
        except subprocess.TimeoutExpired:
            _stop(process)
            returncode, stopped = process.returncode, True
        reader.join()
    seconds = time.monotonic() - tic
    if jobs is not None:
        rows = finished
        if stopped:
            rows = rows + [{"stage": "(stages still running)", "seconds": math.nan, "status": "stopped at the time limit"}]
        summary = {"seconds": seconds, "returncode": returncode, "stopped": stopped, "time_limit": time_limit,
                   "stages_started": len(finished), "stages_done": sum(r["status"] == "done" for r in finished),
                   "stages_in_pipeline": planned, "targets": " ".join(targets) or "all", "jobs": jobs}
        return rows, summary
    rows = []
    for i, (stage, start) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else seconds
        last = i + 1 == len(starts)
        if not last:
            status = "done"
        elif stopped:  # whatever dvc's exit status after SIGTERM (it can be 0): its last stage was cut short
            status = "stopped at the time limit"
        else:
            status = "done" if returncode == 0 else "failed"
        rows.append({"stage": stage, "seconds": end - start, "status": status})
    summary = {"seconds": seconds, "returncode": returncode, "stopped": stopped, "time_limit": time_limit,
               "stages_started": len(starts), "stages_done": sum(r["status"] == "done" for r in rows),
               "stages_in_pipeline": planned, "targets": " ".join(targets) or "all"}
    return rows, summary


def archive_outputs(project: Path, archive: Path) -> Path:
    """What a scratch study leaves that is worth keeping once its copy is deleted, as one gzipped tar: its
    params.yaml, dvc.lock, reports/ and every run's metrics.json (not the weights: a device call returns little)."""
    runs = sorted(str(p.relative_to(project)) for p in project.glob("runs*/**/metrics.json"))
    with tarfile.open(archive, "w:gz") as tar:
        for name in ["params.yaml", "dvc.lock", "reports", *runs]:
            if (project / name).exists():
                tar.add(project / name, arcname=name)
    return archive


def _read_stages(stream, out, starts: list[tuple[str, float]], tic: float, finished: list[dict]) -> None:
    """Copy the output to the log; note when each of dvc's "Running stage 'name':" lines arrives, and each
    stage that ``study run`` reports finished ("name (12 s): its last line")."""
    for line in stream:
        out.write(line)
        if line.startswith("Running stage '"):
            starts.append((line.split("'")[1], time.monotonic() - tic))
        elif done := _FINISHED.match(line):
            finished.append({"stage": done["stage"], "seconds": float(done["seconds"]), "status": "done"})
        elif failed := _FAILED.match(line):
            finished.append({"stage": failed["stage"], "seconds": math.nan, "status": "failed"})


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM dvc's whole process group (it and the stage it runs), then SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, _STOP_GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
