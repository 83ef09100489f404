"""The stage-overhead benchmark (benchmarks/stage_overhead.py) summarises its runs exactly: per model, the median of
wall time minus train_seconds, every value, and the verdict against the target."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks import stage_overhead


def test_the_summary_is_the_median_overhead_per_model_with_its_verdict():
    table = pd.DataFrame({"model": ["vit", "resnet", "vit", "resnet", "vit"], "repeat": [1, 1, 2, 2, 3],
                          "wall_s": [6.0, 4.0, 9.0, 5.0, 7.5], "train_s": [3.0, 2.0, 5.0, 2.5, 4.0]})
    table["overhead_s"] = table["wall_s"] - table["train_s"]
    summary = stage_overhead.summary(table).set_index("model")
    assert list(summary.index) == ["vit", "resnet"]  # in the order they ran
    assert summary.loc["vit", "median_overhead_s"] == pytest.approx(3.5)  # of 3.0, 4.0, 3.5
    assert summary.loc["resnet", "median_overhead_s"] == pytest.approx(2.25)  # of 2.0, 2.5
    assert summary.loc["vit", "all_overhead_s"] == "3.00 4.00 3.50" and summary.loc["vit", "runs"] == 3
    assert summary.loc["vit", "median_wall_s"] == pytest.approx(7.5)
    assert summary.loc["resnet", "median_train_s"] == pytest.approx(2.25)
    assert not summary.loc["vit", "met"] and summary.loc["resnet", "met"]  # target 3 s
    assert (summary["target_s"] == stage_overhead.TARGET_SECONDS).all()
