"""Tables as the report writes them: Markdown and LaTeX keep training-set fractions exact."""

from __future__ import annotations

import pandas as pd

from study.outputs.tables import markdown_table, write_table


def test_fractions_are_written_exactly_and_other_floats_at_the_given_digits(tmp_path):
    df = pd.DataFrame({"fraction": [0.005, 0.1], "top1": [0.71234, float("nan")]})
    assert markdown_table(df, 2).splitlines()[2:] == ["| 0.005 | 0.71 |", "| 0.1 | – |"]
    csv, tex = write_table(df, tmp_path / "t", "caption", 2)
    assert "0.005 & 0.71" in tex.read_text() and "0.1 & --" in tex.read_text()
    assert pd.read_csv(csv)["fraction"].tolist() == [0.005, 0.1]
