"""study.committed: which committed report a reader opens, and with which parameters."""

from __future__ import annotations

import json

import pytest
import yaml

from study.committed import committed_presets, report_folder, report_params
from study.core.errors import StudyError
from tests.conftest import ROOT


def test_the_study_itself_or_a_committed_preset():
    assert report_folder(ROOT) == ROOT / "reports"
    assert report_folder(ROOT, "ladder") == ROOT / "reports" / "ladder"
    assert {"controls", "ladder", "small_data"} <= set(committed_presets(ROOT))
    with pytest.raises(StudyError, match=r"no committed report of 'nope' .*reports/: .*ladder") as error:
        report_folder(ROOT, "nope")
    assert "\n" not in str(error.value)


def test_the_parameters_rerender_recomputed_with_come_first(tmp_path):
    runs = yaml.safe_load((ROOT / "params.yaml").read_text())
    rerendered = {**runs, "seeds": [0, 1, 2, 3]}
    (tmp_path / "provenance.json").write_text(json.dumps({"params": yaml.safe_dump(runs)}))
    assert list(report_params(tmp_path).seeds) == list(runs["seeds"])
    (tmp_path / "provenance.json").write_text(json.dumps(
        {"params": yaml.safe_dump(runs), "rerendered": {"params": yaml.safe_dump(rerendered)}}))
    assert list(report_params(tmp_path).seeds) == [0, 1, 2, 3]


def test_a_report_without_provenance_asks_for_dvc_repro(tmp_path):
    with pytest.raises(StudyError, match=r"provenance.json is missing: run `dvc repro` first"):
        report_params(tmp_path)
