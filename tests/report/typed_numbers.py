"""Numbers typed by hand into a document, written again from the committed tables they were read from.

README.md and docs/findings.md quote measured numbers (means, intervals, seeds, verdicts) that live in the CSV
tables under ``reports/`` (and ``docs/gpu/`` for the H200 run). When a report is recomputed its tables change and
the prose does not, so each document has a test module (``test_readme_numbers.py``, ``test_findings_numbers.py``)
that writes every quoted number again from its table, in the documents' style, and looks for the text. This module
is what those modules share: where the tables are, how an entry is declared, how a table's rows are written as the
documents write them, and how a document's text is read. It holds no tests.

An entry (:func:`number`) reads as the document does: where the number stands (the test's id), the document's text
as a format string, the table and the rows it comes from. A field of the format string is a Python expression over
the selected rows' columns:

- a column or an expression of columns (``mean``, ``-mean``, ``100 * diff_mean``, ``seeds * fractions``,
  ``top1[train_images == 140]``) must take one value over the selected rows;
- ``min(...)``, ``max(...)``, ``sum(...)`` and ``std(...)`` (the sample SD) aggregate over them, and ``rows`` is how
  many there are.

A field without a format spec is written as the documents write points when it is a float (signed, one decimal:
"+15.2", "−35.9") and as it is when it is an integer. Every minus is written U+2212 as in the documents
(:mod:`study.writing.format` writes "-" for the report, and its ``points`` takes shares, not points). Rounding is
Python's format's: the tables keep full precision, and a value such as 8.05 (binary 8.0500000000000007) is "+8.1".
The format string's own syntax takes ``:`` and ``!`` for itself, so an expression may use neither (``==`` and ``&``
are fine).

A number that does not match its table is kept as an entry with ``mismatch`` saying how: it is marked
``xfail(strict=True)``: once the document or the table is corrected the case passes, strict turns that into a
failure, and the mark must go.
"""

from __future__ import annotations

import functools
import numbers
import string
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
MINUS = "\N{MINUS SIGN}"

# The pilot (the study's first default, configs/pilot.yaml): 3 seeds, 140-2,280 images, its post hoc plan.
DEFAULT_CLAIMS = "reports/pilot/tables/plan/claims.csv"
DEFAULT_TESTS = "reports/pilot/tables/plan/tests.csv"
DEFAULT_BUDGET = "reports/pilot/tables/budget_check/budget_check.csv"
DEFAULT_CONTROLS = "reports/pilot/tables/controls/control_contrasts.csv"
DEFAULT_TEACHER = "reports/pilot/tables/distillation/teacher_views.csv"
DEFAULT_GAP_TRENDS = "reports/pilot/tables/curves/gap_trends.csv"
# The confirmatory study (params.yaml): 6 fresh seeds at 290 and 2,280 images, its plan committed before its runs.
CONFIRM_CLAIMS = "reports/tables/plan/claims.csv"
CONFIRM_TESTS = "reports/tables/plan/tests.csv"
CONFIRM_DECLARED = "reports/tables/plan/plan.csv"
CONFIRM_GAPS = "reports/tables/curves/gaps.csv"
CONFIRM_RUNS = "reports/tables/curves/runs.csv"
# small_data: 8 seeds at 140 and 290 images.
SMALL_CLAIMS = "reports/small_data/tables/plan/claims.csv"
SMALL_BUDGET = "reports/small_data/tables/budget_check/budget_check.csv"
SMALL_GAPS = "reports/small_data/tables/curves/gaps.csv"
# controls: 4 seeds at 140 and 570 images, the plan judged post hoc and exploratory contrasts of its arms.
CONTROLS_CLAIMS = "reports/controls/tables/plan/claims.csv"
CONTROLS = "reports/controls/tables/controls/control_contrasts.csv"
CONTROLS_FRACTIONS = "reports/controls/tables/controls/control_fractions.csv"
CONTROLS_GRID = "reports/controls/tables/controls/grid_controls.csv"
CONTROLS_POWER = "reports/controls/tables/controls/power.csv"
CONTROLS_BUDGET = "reports/controls/tables/budget_check/budget_check.csv"
POSITION = "reports/controls/tables/controls/position.csv"
# The budget check at 4% with 10 seeds.
CHECK_4PCT = "reports/check_4pct/tables/budget_check/budget_check.csv"
CHECK_4PCT_RUNS = "reports/check_4pct/tables/budget_check/runs.csv"
# The ladder: 5 seeds at 140 and 1,140 images, its own plan.
LADDER_CLAIMS = "reports/ladder/tables/plan/claims.csv"
LADDER_TESTS = "reports/ladder/tables/plan/tests.csv"
LADDER_STEPS_TABLE = "reports/ladder/tables/ladder/steps.csv"
LADDER_RUNGS = "reports/ladder/tables/ladder/rungs.csv"
LADDER_CONTROLS = "reports/ladder/tables/controls/control_contrasts.csv"
LADDER_RUNS = "reports/ladder/tables/curves/runs.csv"
# The H200 run over 140-57,000 images, 8 seeds.
GPU_GAPS = "docs/gpu/h200-2026-11-28/curves/gaps.csv"
GPU_GAP_TRENDS = "docs/gpu/h200-2026-11-28/curves/gap_trends.csv"
GPU_BUDGET = "docs/gpu/h200-2026-11-28/budget_check/budget_check.csv"

# The ladder's ten steps, one change each from the ViT to the ResNet (its side pairs, ConvMixer and the MLP, left
# out); test_readme_numbers.test_ladder_steps_are_the_tables_rungs keeps the list equal to the table's.
LADDER_STEPS = ("lad_avg - vit", "lad_nopos - lad_avg", "lad_mean - lad_nopos", "lad_mean_wide - lad_mean",
                "lad_pool - lad_mean_wide", "lad_dwconv - lad_pool", "lad_bn - lad_dwconv", "lad_stem - lad_bn",
                "resnet_adamw - lad_stem", "resnet - resnet_adamw")
LADDER_INCONCLUSIVE = ("lad_avg_vs_vit_clean", "lad_nopos_vs_lad_avg_clean", "lad_bn_vs_lad_dwconv_clean",
                       "lad_stem_vs_lad_bn_clean", "resnet_adamw_vs_lad_stem_clean")  # class token ... hierarchy


def number(where: str, text: str, table: str, mismatch: str = "", **rows):
    """One typed number: ``where`` it stands (the test's id), the document's ``text`` as a format string over the
    columns of ``table``'s ``rows`` (column=value, or column=(values, ...) for any of them), and, where the
    document does not match its table, the ``mismatch``."""
    marks = [pytest.mark.xfail(strict=True, reason=mismatch)] if mismatch else []
    return pytest.param(text, table, rows, id=where, marks=marks)


@functools.cache
def document_text(document: str, *sections: tuple[str, str]) -> str:
    """The text of ``document`` (a path from the repository root) with every run of white space one space, so a
    number wrapped across lines still reads as one string. Each section is a pair (start, end): the text from
    ``start`` up to the first ``end`` after it; without sections, the whole document."""
    text = (ROOT / document).read_text(encoding="utf-8")
    if sections:
        text = "".join(text[text.index(start):text.index(end, text.index(start))] for start, end in sections)
    return " ".join(text.split())


@functools.cache
def read_table(table: str) -> pd.DataFrame:
    return pd.read_csv(ROOT / table)


def select(table: str, rows: dict) -> pd.DataFrame:
    frame = read_table(table)
    for column, value in rows.items():
        frame = frame[frame[column].isin(value if isinstance(value, tuple) else (value,))]
    assert len(frame), f"no row of {table} has {rows}"
    return frame


class ReadmeStyle(string.Formatter):
    """Fields are expressions over the selected rows' columns; values are written as README.md and
    docs/findings.md write them."""

    AGGREGATES = {"min": lambda values: values.min(), "max": lambda values: values.max(),
                  "sum": lambda values: values.sum(), "std": lambda values: values.std()}

    def __init__(self, frame: pd.DataFrame):
        self.names = {**{column: frame[column] for column in frame.columns if column.isidentifier()},
                      **self.AGGREGATES, "rows": len(frame)}

    def get_field(self, field_name, args, kwargs):
        value = eval(field_name, {"__builtins__": {}}, self.names)  # noqa: S307 - the test modules' own expressions
        if isinstance(value, pd.Series):
            values = value.dropna().unique()
            assert len(values) == 1, f"{field_name} takes {len(values)} values over the rows: {list(values)}"
            value = values[0]
        return value, field_name

    def format_field(self, value, format_spec):
        if isinstance(value, str):  # a verdict, a scope: as the table writes it
            return format(value, format_spec)
        if not format_spec:
            format_spec = "d" if isinstance(value, numbers.Integral) else "+.1f"
        return format(value, format_spec).replace("-", MINUS)


def written(text: str, table: str, rows: dict) -> str:
    """The document's text with the table's numbers in it."""
    return ReadmeStyle(select(table, rows)).format(text)


def assert_quoted(document: str, quoted: str, text: str, table: str, rows: dict) -> None:
    """``text`` with ``table``'s numbers in it stands in ``quoted`` (the document's text, as :func:`document_text`
    reads it)."""
    expected = written(text, table, rows)
    assert expected in quoted, f"{document} should read {expected!r} ({table}, rows {rows})"
