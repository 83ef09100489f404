"""What the engine shows while it works: one progress bar for the study and one line per finished stage.

The bar (stderr, only on a terminal) counts stages done out of the planned ones, with how many run now, how
many wait in the executor's queue (Ray's, or the local pool's) for room and how many wait for upstream stages,
and tqdm's ETA; each stage that ends prints one line (stdout) with its wall time and the last line its command
printed, e.g. ``train@vit-0.5-0 (41 s): train: vit fraction 0.5 seed 0: test
top-1 ...``. Failures are collected and printed once, at the end, one line each.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from tqdm import tqdm

from study.infra.engine.schedule import FAILED, RUNNING, SKIPPED, WAITING, Schedule
from study.infra.engine.tasks import Outcome


class Progress:
    def __init__(self, schedule: Schedule, where: str, started: Callable[[], int]) -> None:
        """``started()``: how many of the stages handed to the executor have begun (the others are queued)."""
        self.schedule, self.started = schedule, started
        self.bar = tqdm(total=len(schedule.order), desc="study run", unit="stage", disable=None, dynamic_ncols=True,
                        bar_format="{desc}: {n}/{total} stages {bar} [{elapsed}<{remaining}]{postfix}")
        self.line(f"run: {len(schedule.order)} stage(s) to check or run, on {where}")
        self.refresh()

    def line(self, text: str) -> None:
        tqdm.write(text, file=sys.stdout)

    def up_to_date(self, name: str) -> None:
        self.line(f"{name}: up to date, not run")
        self._advance()

    def recorded(self, name: str, how: str) -> None:
        """A stage DVC handled in this process (restored from its run cache, a data source ...)."""
        self.line(f"{name}: {how}")
        self._advance()

    def finished(self, outcome: Outcome) -> None:
        self.line(f"{outcome.stage} ({outcome.seconds:.0f} s): {outcome.summary or 'done'}")
        self._advance()

    def failed(self, name: str, skipped: list[str]) -> None:
        self.line(f"{name}: FAILED" + (f"; skipping {len(skipped)} stage(s) downstream" if skipped else ""))
        self.bar.update(1 + len(skipped))
        self.refresh()

    def refresh(self) -> None:
        s, started = self.schedule, self.started()
        self.bar.set_postfix_str(f"running {started}, queued {s.count(RUNNING) - started}, waiting {s.count(WAITING)}, "
                                 f"failed {s.count(FAILED)}, skipped {s.count(SKIPPED)}")

    def close(self) -> None:
        self.bar.close()

    def _advance(self) -> None:
        self.bar.update(1)
        self.refresh()
