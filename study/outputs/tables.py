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


def write_table(df: pd.DataFrame, stem: str | Path, caption: str, float_digits: int = 4) -> list[Path]:
    """Write ``<stem>.csv`` and ``<stem>.tex``; return both paths."""
    stem = Path(stem)
    csv, tex = stem.with_suffix(".csv"), stem.with_suffix(".tex")
    write_text(csv, df.to_csv(index=False))
    latex = df.to_latex(
        index=False, caption=caption, label=f"tab:{stem.name}", float_format=f"%.{float_digits}f",
        escape=True, na_rep="--", formatters={c: "{:g}".format for c in _EXACT if c in df.columns},
    )  # pandas writes \toprule/\midrule/\bottomrule, i.e. needs \usepackage{booktabs}
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
