"""dvc.lock written in batches, with a journal so that no finished stage is lost in between.

DVC records a stage by parsing the whole dvc.lock with ruamel's round-trip YAML (pure Python) and dumping it
again, so each entry costs time in proportion to the file: for the default study's 11,000 lines, 5.4 s on a
2-core Zen 3 EPYC, whether one entry changes or six. Written once per stage, as ``dvc repro`` does, that is
about 6 minutes of the driver's CPU for the default's 63 stages, taken from the training stage running beside
it; a larger study pays it quadratically. Here an entry is written to dvc.lock by DVC itself
(``ProjectFile.dump_stages``, the call behind ``Stage.dump``), several at a time: when nothing else runs, or
once the time since the last write is :data:`SPACING` times what that write took, so that writing takes at
most about a sixtieth of the driver's time (one write every 5.4 minutes there).

Until then the entry, exactly as DVC will write it (``serialize.to_lockfile``, taken when the stage was
recorded), waits in a journal file under ``.dvc/tmp``. A driver killed with SIGKILL leaves the journal behind;
the next :class:`LockWriter` writes it into dvc.lock before DVC reads the pipeline, so the stages that finished
are up to date and nothing runs again. (SIGINT and SIGTERM write every waiting entry before the driver exits.)
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

# A write is due once the time since the last one is this many times what the last one took.
SPACING = 60
JOURNAL = Path(".dvc", "tmp", "study-run-lock")


class LockWriter:
    """The dvc.lock entries of recorded stages not yet written, for one DVC repository."""

    def __init__(self, repo) -> None:
        self.repo = repo
        self.journal = Path(repo.root_dir, JOURNAL)
        self._waiting: dict[str, object] = {}  # stage addressing -> the stage, in the order they were recorded
        self._last_write = time.monotonic()
        self._write_seconds = 0.0  # what the last write took

    @property
    def waiting(self) -> list[str]:
        return list(self._waiting)

    def add(self, stage) -> None:
        """Journal ``stage``'s dvc.lock entry as it stands now; dvc.lock gets it at the next write."""
        from dvc.stage.serialize import to_lockfile

        entry = {"lockfile": os.path.relpath(stage.dvcfile._lockfile.path, self.repo.root_dir),
                 "stages": to_lockfile(stage)}
        self.journal.mkdir(parents=True, exist_ok=True)
        path = self._journal_file(stage.addressing)
        scratch = path.with_suffix(".tmp")
        scratch.write_text(json.dumps(entry))
        os.replace(scratch, path)  # whole or absent, whenever the driver dies
        self._waiting[stage.addressing] = stage

    def write(self, force: bool) -> None:
        """Write the waiting entries into dvc.lock if ``force`` or a write is due (caller holds DVC's repo lock)."""
        if not self._waiting:
            return
        if not force and time.monotonic() - self._last_write < SPACING * self._write_seconds:
            return
        tic = time.monotonic()
        by_file: dict[str, list] = {}
        for stage in self._waiting.values():
            by_file.setdefault(stage.dvcfile.path, []).append(stage)
        for stages in by_file.values():
            stages[0].dvcfile.dump_stages(stages, update_pipeline=False)  # DVC's own write, as Stage.dump
        for name in self._waiting:
            self._journal_file(name).unlink(missing_ok=True)
        self._waiting.clear()
        self._last_write = time.monotonic()
        self._write_seconds = self._last_write - tic

    def replay(self) -> list[str]:
        """Write the entries an earlier driver journaled but never wrote (it was killed); return their stages.

        Call before DVC reads the pipeline, under DVC's repo lock."""
        from dvc.utils.serialize import modify_yaml

        files = sorted(self.journal.glob("*.json")) if self.journal.is_dir() else []
        by_file: dict[str, dict] = {}
        for path in files:
            try:
                entry = json.loads(path.read_text())
                by_file.setdefault(entry["lockfile"], {}).update(entry["stages"])
            except (ValueError, KeyError, TypeError):  # never written whole (os.replace), but never trusted either
                print(f"warning: {path}: unreadable journal entry, ignored (its stage runs again)")
        for lockfile, stages in by_file.items():
            # What DVC's Lockfile.dump_stages does with these entries (dvc/dvcfile.py).
            with modify_yaml(os.path.join(self.repo.root_dir, lockfile), fs=self.repo.fs) as data:
                if not data:
                    data.update({"schema": "2.0"})
                data["stages"] = data.get("stages", {})
                data["stages"].update(stages)
        for path in files:
            path.unlink()
        return [name for stages in by_file.values() for name in stages]

    def _journal_file(self, addressing: str) -> Path:
        # Addressings hold ':' for stages of other dvc.yaml files and '@' for matrix stages: both are fine in a
        # file name; '/' (a dvc.yaml in a subfolder) is not.
        return self.journal / (addressing.replace(os.sep, "%") + ".json")
