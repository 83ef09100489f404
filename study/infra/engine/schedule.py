"""Which stage may start, and what a failure stops: the engine's bookkeeping, free of DVC and Ray.

A :class:`Schedule` holds the stages to consider, in the order ``dvc repro`` would take them, each with the
stages it waits for. A stage is *ready* once every one of those has finished (run, or found up to date);
a failed stage stops every stage downstream of it (they are *skipped*) and nothing else, as
``dvc repro --keep-going`` does. Stages are plain names (DVC's addressing, e.g. ``train@vit-0.5-0``),
so the logic is tested without a pipeline or a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

WAITING, RUNNING, DONE, FAILED, SKIPPED = "waiting", "running", "done", "failed", "skipped"


class Schedule:
    """The state of every stage of one run of the engine."""

    def __init__(self, order: Iterable[str], upstream: Mapping[str, Iterable[str]]) -> None:
        """``order``: the stages, upstream before downstream; ``upstream[s]``: the stages ``s`` waits for.

        Upstream stages outside ``order`` are up to date already, so they are not waited for.
        """
        self.order = list(order)
        if len(set(self.order)) != len(self.order):
            raise ValueError(f"a stage is listed twice: {self.order}")
        known = set(self.order)
        self.upstream = {name: {u for u in upstream.get(name, ()) if u in known} for name in self.order}
        position = {name: i for i, name in enumerate(self.order)}
        for name, ups in self.upstream.items():
            late = [u for u in ups if position[u] > position[name]]
            if late:
                raise ValueError(f"{name} is listed before the stages it waits for: {late}")
        self.state = dict.fromkeys(self.order, WAITING)
        self.skipped_by: dict[str, str] = {}  # skipped stage -> the failed stage that stopped it

    def ready(self) -> list[str]:
        """Waiting stages whose upstream stages are all done, in pipeline order."""
        return [name for name in self.order if self.state[name] == WAITING
                and all(self.state[u] == DONE for u in self.upstream[name])]

    def start(self, name: str) -> None:
        self._move(name, WAITING, RUNNING)

    def finish(self, name: str) -> None:
        """``name`` ran and was recorded, or was found up to date: its dependants may start."""
        if self.state[name] not in (WAITING, RUNNING):
            raise ValueError(f"{name} is {self.state[name]}, it cannot finish")
        self.state[name] = DONE

    def fail(self, name: str) -> list[str]:
        """``name`` failed: skip every stage downstream of it; return those, in pipeline order."""
        if self.state[name] not in (WAITING, RUNNING):
            raise ValueError(f"{name} is {self.state[name]}, it cannot fail")
        self.state[name] = FAILED
        stopped = []
        for other in self.order:  # upstream first, so a dependant of a dependant is reached too
            if self.state[other] == WAITING and self.upstream[other] & ({name} | set(stopped)):
                self.state[other] = SKIPPED
                self.skipped_by[other] = name
                stopped.append(other)
        return stopped

    def count(self, state: str) -> int:
        return sum(1 for s in self.state.values() if s == state)

    @property
    def finished(self) -> bool:
        """Nothing runs and nothing more can start."""
        return not self.ready() and self.count(RUNNING) == 0

    def _move(self, name: str, before: str, after: str) -> None:
        if self.state[name] != before:
            raise ValueError(f"{name} is {self.state[name]}, not {before}")
        self.state[name] = after
