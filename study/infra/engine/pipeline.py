"""The DVC side of the engine: which stages ``dvc repro`` would run, and DVC's record of each one.

Everything goes through DVC's own Python API, as ``dvc repro`` itself does it (``dvc/repo/reproduce.py``
and ``Stage.run`` in DVC 3), so DVC stays the one record of the pipeline:

* the stages, their order and their upstream stages come from DVC's index (``repo.index.graph``, frozen
  stages cut off as repro does), expanded matrix stages included (``train@vit-0.5-0``);
* before a stage's command runs, under DVC's repo lock: the stage is checked again (``stage.changed()``,
  now that its upstream stages ran), its non-persistent outputs are removed (``persist: true`` ones, the
  train stages' ``resume.pt``, stay, so a killed run resumes), and DVC's run cache is tried first;
* while the command runs, the repo lock is free (as in repro, so ``dvc status`` works meanwhile) but the
  stage holds DVC's read/write locks on its dependencies and outputs, so a concurrent ``dvc repro`` or
  ``study run`` cannot touch them;
* once the command succeeded, under the repo lock: ``stage.save()`` and ``stage.commit()`` write its cache
  entries, as repro does, and its dvc.lock entry is journaled and written by DVC with others in a batch
  (:mod:`~study.infra.engine.lockfile`: one write per stage costs time in proportion to dvc.lock).

The repo lock is taken with DVC's ``--wait-for-lock`` behaviour: a busy repository is waited for, never
bypassed.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from study.core.errors import StudyError
from study.infra.engine.lockfile import LockWriter

UP_TO_DATE, RECORDED, RUN = "up to date", "recorded", "run"


@dataclass(frozen=True)
class Plan:
    stages: list  # DVC stages to consider, upstream first (repro's order)
    upstream: dict  # addressing -> addressings of the stages it depends on


class Pipeline:
    """The DVC project at (or above) the current directory, for the length of one engine run."""

    def __init__(self) -> None:
        from dvc.exceptions import NotDvcRepoError
        from dvc.repo import Repo, lock_repo

        # The engine prints one line per stage; DVC's own INFO lines ("Updating lock file ...") would
        # interleave with them. Its warnings (e.g. a dead process's lock entry removed) still show.
        logging.getLogger("dvc").setLevel(logging.WARNING)
        try:
            self.repo = Repo(_wait_for_lock=True)  # what `dvc --wait-for-lock` passes
        except NotDvcRepoError:
            raise StudyError("not inside a DVC project; run `study run` from the project root") from None
        self._locks: dict[str, ExitStack] = {}  # running stage -> its held read/write locks
        self.lock_writer = LockWriter(self.repo)
        with lock_repo(self.repo), _dvc_errors():
            self.replayed = self.lock_writer.replay()  # a killed driver's recorded stages, before DVC reads dvc.lock

    def close(self) -> None:
        for name in list(self._locks):
            self.release(name)
        self.write_lock(force=True)
        self.repo.close()

    @property
    def root(self) -> str:
        return self.repo.root_dir

    def scm_context(self):
        """DVC's git bookkeeping around a repro (``core.autostage`` stages dvc.lock once all went well)."""
        return self.repo.scm_context()

    def plan(self, targets: list[str]) -> Plan:
        """The stages to consider: those out of date now, and every stage downstream of one.

        ``targets`` restrict it to those stages and what they depend on, as ``dvc repro TARGETS`` does.
        """
        from dvc.repo import lock_repo
        from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

        with lock_repo(self.repo), _dvc_errors():
            graph = get_active_graph(self.repo.index.graph)
            chosen = collect_stages(self.repo, targets or ["dvc.yaml"])
            upstream = {s.addressing: list(graph.successors(s)) for s in graph}  # DVC's edges point upstream
            stages, outdated = [], set()
            for stage in plan_repro(graph, chosen):  # upstream before downstream
                ups = upstream[stage.addressing]
                if any(u.addressing in outdated for u in ups) or stage.changed(upstream=ups):
                    outdated.add(stage.addressing)
                    stages.append(stage)
        self._upstream = upstream
        return Plan(stages, {s.addressing: [u.addressing for u in upstream[s.addressing]] for s in stages})

    def prepare(self, stage) -> str:
        """Before running ``stage``: UP_TO_DATE (nothing to do), RECORDED (DVC did it here), or RUN.

        RUN means its command must now run: outputs removed and locks held, as in ``Stage.run``.
        """
        from dvc.repo import lock_repo

        upstream = self._upstream[stage.addressing]
        with lock_repo(self.repo), _dvc_errors():
            if not stage.changed(upstream=upstream):
                return UP_TO_DATE
            if not stage.cmd or stage.frozen or stage.is_import:  # no command for a worker: let DVC do it all
                stage.reproduce(upstream=upstream)
                self.lock_writer.add(stage)
                return RECORDED
            stage.remove_outs(ignore_remove=False, force=False)  # keeps `persist: true` outputs
            if self._restore_from_run_cache(stage):
                self._save_and_commit(stage)
                return RECORDED
            stage.save_deps()
            self._hold(stage)
        return RUN

    def commands(self, stage) -> tuple[str, ...]:
        """The stage's command lines, split as DVC splits them."""
        cmd = stage.cmd
        return tuple(cmd.splitlines() if isinstance(cmd, str) else cmd)

    def environment(self, stage) -> dict[str, str]:
        """The variables DVC gives a stage's command."""
        from dvc.env import DVC_ROOT, DVC_STAGE

        return {DVC_ROOT: self.repo.root_dir, DVC_STAGE: stage.addressing}

    def record(self, stage) -> None:
        """The stage's command succeeded: record its outputs in DVC's cache and its entry in dvc.lock."""
        from dvc.repo import lock_repo

        with lock_repo(self.repo), _dvc_errors():
            self.release(stage.addressing)
            self._save_and_commit(stage)

    def write_lock(self, force: bool) -> None:
        """Write the recorded stages' waiting dvc.lock entries: now if ``force``, else if a write is due."""
        from dvc.repo import lock_repo

        if self.lock_writer.waiting:
            with lock_repo(self.repo), _dvc_errors():
                self.lock_writer.write(force)

    def release(self, name: str) -> None:
        """Let go of a stage's read/write locks (it ended, failed or was stopped)."""
        from dvc.repo import lock_repo

        stack = self._locks.pop(name, None)
        if stack is not None:
            with lock_repo(self.repo):  # re-entrant: record() holds it already
                stack.close()

    def _save_and_commit(self, stage) -> None:
        # As Stage.run: no run-cache entry for a stage with uncached outputs (it could not be restored).
        uncached = any(not out.use_cache for out in stage.outs if not (out.is_metric or out.is_plot))
        stage.save(allow_missing=False, run_cache=not uncached)
        stage.commit(allow_missing=False)
        self.lock_writer.add(stage)

    def _restore_from_run_cache(self, stage) -> bool:
        """Check the outputs out of DVC's run cache if this exact stage ran before (repro does so too)."""
        from dvc.stage.cache import RunCacheNotFoundError

        try:
            self.repo.stage_cache.restore(stage)
        except RunCacheNotFoundError:
            return False
        return True

    def _hold(self, stage) -> None:
        """Take DVC's read locks on the deps and write locks on the outs for as long as the command runs.

        Named after the stage, so that stages running side by side in this process do not share (and
        release) each other's entries.
        """
        from dvc.dependency.db import AbstractDependency
        from dvc.dependency.repo import RepoDependency
        from dvc.rwlock import rwlock

        local = [d for d in stage.deps if not isinstance(d, (RepoDependency, AbstractDependency))]
        stack = ExitStack()
        stack.enter_context(rwlock(
            self.repo.tmp_dir, self.repo.fs, f"study run: {stage.addressing}", [d.fs_path for d in local],
            [o.fs_path for o in stage.outs], self.repo.config["core"].get("hardlink_lock", False),
        ))
        self._locks[stage.addressing] = stack


@contextmanager
def _dvc_errors():
    """DVC's own errors (a busy path, a missing output, a broken dvc.yaml) as one-line StudyErrors."""
    from dvc.exceptions import DvcException

    try:
        yield
    except DvcException as err:
        raise StudyError(f"dvc: {' '.join(str(err).split())}") from None
