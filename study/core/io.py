"""Atomic file writes: a reader (or a killed run) never sees half a file.

Every output goes to a temporary sibling first and is moved into place with :func:`os.replace`, which
is atomic on POSIX within one file system. A write that fails (a full disk, a read-only folder) raises a
one-line :class:`StudyError` naming the output and leaves its previous version untouched. A SIGKILL skips
every cleanup, so the temporary's name carries the writer's process id: the next write of the same output
deletes what dead writers left behind.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from study.core.errors import StudyError


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        tmp_path.chmod(0o644)  # mkstemp creates 0600; outputs are ordinary readable files
        os.replace(tmp_path, path)
    except OSError as exc:
        raise write_error(path, exc) from exc
    finally:
        tmp_path.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_yaml(path: str | Path, fix_missing: str) -> Any:
    """What the YAML file at ``path`` holds; a one-line StudyError for a missing file (``fix_missing`` says what to
    do) or bad YAML (with its line)."""
    import yaml  # here: most callers of this module never read YAML

    path = Path(path)
    if not path.is_file():
        raise StudyError(f"{path}: no such file; {fix_missing}")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise StudyError(f"{path}: not valid YAML{where}; fix the syntax") from None


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield an empty temporary folder; it replaces ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".tmp"))
    try:
        yield tmp
        tmp.chmod(0o755)  # mkdtemp creates 0700
        _replace_dir(tmp, path)
    except OSError as exc:
        raise write_error(path, exc) from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _replace_dir(new: Path, path: Path) -> None:
    """Put folder ``new`` at ``path``. Two renames, so ``path`` is at any moment the old folder, the new one
    or (only if killed in between) absent, never half deleted; the old one is removed last."""
    old = Path(tempfile.mkdtemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".tmp"))
    try:
        moved = path.exists()
        if moved:
            os.replace(path, old)  # onto the empty folder just made: rename(2) allows that
        try:
            os.replace(new, path)
        except OSError:
            if moved:
                os.replace(old, path)  # put the previous version back
            raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def write_error(path: Path, exc: OSError) -> StudyError:
    """The one-line error for an output that could not be written."""
    reason = exc.strerror or " ".join(str(exc).split())
    return StudyError(
        f"{path}: could not be written ({reason}); free disk space or fix the folder's permissions and rerun "
        "(its previous version, if any, is unchanged)"
    )


def _temp_prefix(path: Path) -> str:
    return f".{path.name}.{os.getpid()}."


def remove_leftovers(path: Path) -> None:
    """Delete temporaries of ``path`` whose writer process no longer exists (it was killed mid-write)."""
    # ".<name>.<pid>.<random>.tmp": mkstemp's random part has no dots, so another output's temporaries
    # (".<name>.x.<pid>.<random>.tmp") never match.
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.[^.]+\.tmp")
    for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        match = pattern.fullmatch(leftover.name)
        if match and not _alive(int(match.group(1))):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True
