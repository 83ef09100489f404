"""Every table is written twice: CSV for re-use, LaTeX (booktabs) ready for ``\\input``; and read back as the
report reads it (a table a stage did not write is ``None``, distinct from one written empty)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from study.core.io import write_text

# Columns written exactly (0.005 must not print as 0.01 at two decimals): training-set fractions, and seed counts
# that are floats only to hold inf (the budget check's projection).
_EXACT = ("fraction", "seeds_to_converge")


# Characters the tables' text uses that LaTeX's default fonts lack, as math (the text is escaped first).
_LATEX_MATH = {"−": "$-$", "±": "$\\pm$", "×": "$\\times$", "≤": "$\\leq$", "≥": "$\\geq$", "α": "$\\alpha$",
               "Δ": "$\\Delta$", "–": "--", "—": "---"}


def write_table(df: pd.DataFrame, stem: str | Path, caption: str, float_digits: int = 4,
                column_format: str | None = None, paper: pd.DataFrame | None = None) -> list[Path]:
    """Write ``<stem>.csv`` and ``<stem>.tex``; return both paths. ``column_format``: LaTeX's, for tables of text
    (``p{4cm}`` columns that wrap); none = pandas' default. ``paper``: what the ``.tex`` shows where it is not the
    whole table (the columns a paper cites, intervals written as ranges); the CSV always holds every column."""
    stem = Path(stem)
    csv, tex = stem.with_suffix(".csv"), stem.with_suffix(".tex")
    write_text(csv, df.to_csv(index=False))
    shown = df if paper is None else paper
    latex = shown.to_latex(
        index=False, caption=caption, label=f"tab:{stem.name}", float_format=f"%.{float_digits}f",
        escape=True, na_rep="--", formatters={c: "{:g}".format for c in _EXACT if c in shown.columns},
        column_format=column_format,
    )  # pandas writes \toprule/\midrule/\bottomrule, i.e. needs \usepackage{booktabs}
    for character, math in _LATEX_MATH.items():
        latex = latex.replace(character, math)
    write_text(tex, latex)
    return [csv, tex]


def read_table(path: str | Path) -> pd.DataFrame | None:
    """The CSV at ``path``, or ``None`` when no stage wrote it (e.g. distillation is off)."""
    path = Path(path)
    return pd.read_csv(path) if path.is_file() else None


def markdown_table(df: pd.DataFrame, digits: int = 4) -> str:
    """``df`` as a GitHub Markdown table, floats to ``digits`` places (fractions exactly) and NaN as a dash."""
    def cell(v, column: str) -> str:
        if isinstance(v, float):
            return "–" if math.isnan(v) else f"{v:g}" if column in _EXACT else f"{v:.{digits}f}"
        return str(v)

    header = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(cell(v, c) for v, c in zip(row, df.columns)) + " |" for row in df.itertuples(index=False)]
    return "\n".join([header, rule, *rows])
