"""Every table is written twice: CSV for re-use, LaTeX (booktabs) ready for ``\\input``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from study.io import write_text


def write_table(df: pd.DataFrame, stem: str | Path, caption: str, float_digits: int = 4) -> list[Path]:
    """Write ``<stem>.csv`` and ``<stem>.tex``; return both paths."""
    stem = Path(stem)
    csv, tex = stem.with_suffix(".csv"), stem.with_suffix(".tex")
    write_text(csv, df.to_csv(index=False))
    latex = df.to_latex(
        index=False, caption=caption, label=f"tab:{stem.name}", float_format=f"%.{float_digits}f",
        escape=True, na_rep="--",
    )  # pandas writes \toprule/\midrule/\bottomrule, i.e. needs \usepackage{booktabs}
    write_text(tex, latex)
    return [csv, tex]
