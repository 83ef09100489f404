"""The confirmatory study's seeds are fresh: no preset trains them, and no committed table outside the study's own
report (reports/tables, reports/figures) holds a row of them, so its subsets and initial weights are new."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest

from study.presets import preset_names, preset_params, read_mapping

ROOT = Path(__file__).resolve().parents[2]
OWN = ("reports/tables/", "reports/figures/")  # the confirmatory study's own outputs


def seeds_of(raw: dict) -> set[int]:
    return {int(s) for s in raw.get("seeds") or []} | {int(s) for s in (raw.get("budget_check") or {}).get("seeds") or []}


CONFIRMATORY = seeds_of(read_mapping(ROOT / "params.yaml"))


def test_the_confirmatory_plan_names_its_seeds():
    assert len(CONFIRMATORY) >= 3


@pytest.mark.parametrize("name", preset_names(ROOT))
def test_no_preset_trains_a_confirmatory_seed(name):
    assert not seeds_of(preset_params(ROOT, name)) & CONFIRMATORY, \
        f"configs/{name}.yaml trains a confirmatory seed; build it on the pilot (base: pilot) or give it its own seeds"


def committed_tables() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "*.csv"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [p for p in listed.stdout.splitlines() if not p.startswith(OWN)]


def test_no_committed_table_outside_the_study_holds_a_confirmatory_seed():
    tables = committed_tables()
    assert any(p.startswith("reports/pilot/") for p in tables)  # the pilot's tables are among those read
    clashes = []
    for rel in tables:
        with open(ROOT / rel, newline="") as handle:
            reader = csv.DictReader(handle)
            if not reader.fieldnames or "seed" not in reader.fieldnames:
                continue
            used = {int(float(row["seed"])) for row in reader if row["seed"] not in ("", None)}
        if used & CONFIRMATORY:
            clashes.append(f"{rel}: {sorted(used & CONFIRMATORY)}")
    assert not clashes, clashes


# The confirmatory study over the whole range on a GPU (configs/confirmatory_gpu.yaml): its own fresh seeds, used by no
# other study (the default's included) and by no committed table, since none of its runs is committed yet.
WHOLE_RANGE = seeds_of(preset_params(ROOT, "confirmatory_gpu"))


def test_the_whole_range_confirmation_has_ten_seeds_of_its_own():
    assert len(WHOLE_RANGE) >= 10 and not WHOLE_RANGE & CONFIRMATORY


@pytest.mark.parametrize("name", [n for n in preset_names(ROOT) if n != "confirmatory_gpu"])
def test_no_other_preset_trains_a_seed_of_the_whole_range_confirmation(name):
    assert not seeds_of(preset_params(ROOT, name)) & WHOLE_RANGE, f"configs/{name}.yaml trains a seed of confirmatory_gpu"


def test_no_committed_table_holds_a_seed_of_the_whole_range_confirmation():
    listed = subprocess.run(["git", "ls-files", "*.csv"], cwd=ROOT, capture_output=True, text=True, check=True)
    clashes = []
    for rel in listed.stdout.splitlines():
        with open(ROOT / rel, newline="") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames and "seed" in reader.fieldnames:
                used = {int(float(row["seed"])) for row in reader if row["seed"] not in ("", None)}
                if used & WHOLE_RANGE:
                    clashes.append(rel)
    assert not clashes, clashes
