"""SIGINT and SIGTERM stop the engine cleanly, but never in the middle of recording a stage in DVC.

Outside :meth:`Interrupts.protected` a signal raises KeyboardInterrupt at once (the driver then cancels the
running stages and exits); inside it, the signal waits until the block ends, so a stage's outputs, its
run-cache entry and its dvc.lock entry are written together or not at all. SIGKILL cannot be caught: then
DVC's own locks are released by the operating system and the next run finds the stage not yet recorded.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """A context manager that installs the handlers, and restores the previous ones on exit."""

    def __init__(self) -> None:
        self._depth = 0
        self._pending: int | None = None
        self._previous: dict = {}

    def __enter__(self) -> Interrupts:
        for sig in _SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    @contextmanager
    def protected(self):
        """Defer SIGINT/SIGTERM to the end of the block."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self._depth == 0 and self._pending is not None:
            self._pending = None
            raise KeyboardInterrupt

    def _handle(self, signum, _frame) -> None:
        if self._depth:
            self._pending = signum
        else:
            raise KeyboardInterrupt
