"""The findings table that opens the report: one row per claim, with its evidence (effect and adjusted interval),
its control and its verdict.

Each question declares its own rows (``ROWS`` in ``study/<question>/report.py``, listed in
:data:`study.report.contents.FINDINGS_ROWS`); this module only puts them in order. Only the analysis plan's
claims (stage ``plan``) carry a verdict; the other rows are exploratory and say so, and an exploratory row for a
comparison and condition the plan already judges is left out, so no result appears twice; where a question
words one of the plan's claims itself (the ladder's attention step), its row replaces the plan's generic one.
"""

from __future__ import annotations

import pandas as pd

from study.report.contents import FINDINGS_ROWS
from study.writing.section import EXPLORATORY, FINDINGS_COLUMNS, Sources


def findings_table(sources: Sources) -> pd.DataFrame:
    """The table's rows from whichever stages' tables the study has, the plan's first."""
    rows = [row for part in FINDINGS_ROWS for row in part.rows(sources)]
    key = lambda r: (r.get("comparison"), r.get("condition"))  # noqa: E731
    judged = {key(r) for r in rows if r["verdict"] != EXPLORATORY}
    # a later wording of the same comparison and condition replaces the earlier; rows that name none stay
    last = {key(r): i for i, r in enumerate(rows) if r["verdict"] != EXPLORATORY and r.get("comparison")}
    kept = [r for i, r in enumerate(rows) if (r["verdict"] != EXPLORATORY and last.get(key(r), i) == i)
            or (r["verdict"] == EXPLORATORY and key(r) not in judged)]
    return pd.DataFrame(kept, columns=FINDINGS_COLUMNS)
