"""Presets are overlays of params.yaml (study/presets.py), and `study preset NAME DIR` runs one in a working copy of
its own, so that no preset ever overwrites a tracked file: the merge's rules on small mappings with known answers,
every preset valid and short once merged, and the command's copy and its one-line refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from study.core.config import parse_params
from study.core.errors import StudyError
from study.presets import header, merged, preset_names, preset_params, preset_text

ROOT = Path(__file__).resolve().parents[2]
PRESETS = preset_names(ROOT)
MAX_LINES = 40  # settings a preset names (its header aside): what it changes; more means it repeats params.yaml
MAX_HEADER = 25  # the header says what the preset changes and why, and where its run time and results are


def study(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "study", *args], cwd=cwd, capture_output=True, text=True)


# --- the merge ---------------------------------------------------------------------------------------------------


def test_mappings_merge_recursively_and_the_base_is_left_as_it_was():
    base = {"models": {"vit": {"lr": 1.0, "arch_args": {"depth": 4, "heads": 4}}, "resnet": {"lr": 0.4}}, "seed": 0}
    out = merged(base, {"models": {"vit": {"arch_args": {"depth": 9}}}})
    assert out == {"models": {"vit": {"lr": 1.0, "arch_args": {"depth": 9, "heads": 4}}, "resnet": {"lr": 0.4}},
                   "seed": 0}
    assert base["models"]["vit"]["arch_args"]["depth"] == 4
    out["models"]["resnet"]["lr"] = 9.0  # the result shares nothing with the base
    assert base["models"]["resnet"]["lr"] == 0.4


def test_lists_and_scalars_replace():
    base = {"fractions": [0.01, 0.1, 1.0], "distill": [{"student": "deit", "kind": "hard"}], "seed": 0}
    out = merged(base, {"fractions": [0.5], "distill": [], "seed": 3})
    assert out == {"fractions": [0.5], "distill": [], "seed": 3}
    assert merged({"a": {"b": 1}}, {"a": 2}) == {"a": 2} and merged({"a": 2}, {"a": {"b": 1}}) == {"a": {"b": 1}}


def test_null_removes_a_key_at_any_depth_and_is_never_a_value():
    base = {"budget_check": {"fractions": [0.04]}, "models": {"resnet": {"lr": 0.4, "selected": {"lr": [0.1]}}}}
    assert merged(base, {"budget_check": None}) == {"models": base["models"]}
    assert merged(base, {"models": {"resnet": {"selected": None}}})["models"]["resnet"] == {"lr": 0.4}
    assert merged(base, {"absent": None}) == base  # removing what is not there is no error
    # a mapping the base lacks merges into an empty one: its nulls remove nothing and never reach the result
    assert merged(base, {"models": {"convit": {"lr": 2.0e-3, "selected": None}}})["models"]["convit"] == {"lr": 2.0e-3}


def test_the_lever_grids_merge_deltas_with_the_same_function():
    from study.levers import merge

    assert merge is merged


# --- the presets -------------------------------------------------------------------------------------------------


def test_every_preset_file_is_found_and_the_pretrained_file_is_not_one():
    assert {"smoke", "quick", "check_4pct", "priors", "cifar10_gpu"} <= set(PRESETS) and "pretrained" not in PRESETS
    with pytest.raises(StudyError, match="not a preset of params.yaml") as err:
        preset_params(ROOT, "pretrained")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_merged_over_params_yaml_is_valid_and_reads_back_the_same(name):
    params = preset_params(ROOT, name)
    parse_params(params, source=f"configs/{name}.yaml")
    # the params.yaml `study preset` writes: the preset's header first (the report prints it), the same mapping
    text = preset_text(ROOT, name)
    assert yaml.safe_load(text) == params
    assert text.startswith((ROOT / "configs" / f"{name}.yaml").read_text().split("\n", 1)[0] + "\n")


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_names_only_what_it_changes(name):
    text = (ROOT / "configs" / f"{name}.yaml").read_text()
    top = header(text).splitlines()
    assert len(top) <= MAX_HEADER, f"configs/{name}.yaml: a header of {len(top)} lines"
    settings = text.splitlines()[len(top):]
    assert len(settings) <= MAX_LINES, f"configs/{name}.yaml: {len(settings)} lines of settings"
    assert "cp configs/" not in text and f"study preset {name} DIR" in text  # how to run it, without overwriting


def test_an_unknown_preset_or_bad_yaml_is_one_line_naming_the_fix(tmp_path):
    with pytest.raises(StudyError) as err:
        preset_params(ROOT, "nope")
    assert "no preset 'nope'" in str(err.value) and "choose one of: " in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "configs").mkdir()
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    (tmp_path / "configs" / "broken.yaml").write_text("fractions: [0.1\nseeds: [0]\n")
    with pytest.raises(StudyError, match=r"broken.yaml: not valid YAML \(line \d+\); fix the syntax") as err:
        preset_params(tmp_path, "broken")
    assert "\n" not in str(err.value)


def test_no_instruction_copies_a_preset_over_a_tracked_file():
    files = [ROOT / "README.md", ROOT / "notebooks" / "README.md", ROOT / "pretrained" / "dvc.yaml",
             *(ROOT / "docs").rglob("*.md"), *(ROOT / "configs").glob("*.yaml")]
    for path in files:
        text = " ".join(path.read_text().split())  # instructions wrap across lines
        assert "cp configs/" not in text and "cp ../configs/" not in text, path.relative_to(ROOT)


# --- `study preset NAME DIR` --------------------------------------------------------------------------------------


def test_the_command_writes_a_working_copy_with_the_merged_params_and_leaves_the_checkout_alone(tmp_path):
    before = {path: path.read_bytes() for path in (ROOT / "params.yaml", ROOT / "configs" / "smoke.yaml")}
    copy = tmp_path / "smoke"
    result = study("preset", "smoke", str(copy))
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert "\n" not in line
    assert line.endswith(f"run it with its own code: pip install -e {copy} && cd {copy} && dvc repro")
    assert {path: path.read_bytes() for path in before} == before  # byte for byte
    assert yaml.safe_load((copy / "params.yaml").read_text()) == preset_params(ROOT, "smoke")
    assert (copy / "params.yaml").read_text() == preset_text(ROOT, "smoke")
    assert (copy / "dvc.yaml").read_bytes() == (ROOT / "dvc.yaml").read_bytes()
    assert (copy / "study" / "presets.py").is_file() and (copy / "configs" / "smoke.yaml").is_file()
    assert not {"runs", "data", "dvc.lock", ".venv"} & {p.name for p in copy.iterdir()}
    # of reports/, only the committed inputs a stage reads (the pilot's per-run tables), none of the study's outputs
    assert sorted(p.relative_to(copy).as_posix() for p in (copy / "reports").rglob("*") if p.is_file()) == [
        "reports/pilot/tables/robustness/plan_runs.csv"]
    assert [p.name for p in (copy / "runs_2x").iterdir()] == [".gitkeep"]  # the folder, kept by git, no run
    # a git repository of its own, everything committed, so that DVC works there
    status = subprocess.run(["git", "status", "--porcelain"], cwd=copy, capture_output=True, text=True, check=True)
    assert status.stdout == ""
    # without the copy's own install, this checkout's `study` refuses to run there, and says how
    refused = subprocess.run([str(Path(sys.executable).with_name("study")), "check"], cwd=copy, capture_output=True,
                             text=True)
    assert refused.returncode == 2 and f"pip install -e {copy}`" in refused.stderr


def test_print_writes_nothing_and_prints_the_merged_params():
    result = study("preset", "quick", "--print", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout) == preset_params(ROOT, "quick")
    assert result.stdout.startswith("# Quick look")


@pytest.mark.parametrize("case", ["unknown preset", "not empty", "invalid preset", "no folder"])
def test_refusals_are_one_line_with_status_2_and_write_nothing(case, tmp_path):
    dest, cwd = tmp_path / "copy", ROOT
    args = ["preset", "smoke", str(dest)]
    if case == "unknown preset":
        args[1], expected = "nope", "no preset 'nope'"
    elif case == "not empty":
        dest.mkdir()
        (dest / "mine.txt").write_text("keep")
        expected = "exists and is not an empty folder"
    elif case == "invalid preset":  # merged, then validated before anything is written
        cwd = tmp_path / "project"
        (cwd / "configs").mkdir(parents=True)
        (cwd / "params.yaml").write_text((ROOT / "params.yaml").read_text())
        (cwd / "configs" / "smoke.yaml").write_text("fractions: [2.0]\n")
        expected = "fractions must lie in (0, 1]"
    else:
        args, expected = ["preset", "smoke"], "give the folder"
    result = study(*args, cwd=cwd)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and expected in result.stderr
    if case == "not empty":
        assert [p.name for p in dest.iterdir()] == ["mine.txt"]
    else:
        assert not dest.exists()


def test_a_working_copy_takes_every_committed_file_a_stage_reads():
    """Every dvc.yaml dep that no stage writes is in a working copy (else `dvc repro` there stops at the stage that
    reads it, as the plan stage did without the pilot's tables)."""
    from study.presets import project_files

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    deps = {d for s in stages.values() for d in s.get("deps", []) if "${" not in d}
    outs = {(next(iter(o)) if isinstance(o, dict) else o).replace("${root}", var.get("root", ""))
            for s in stages.values() for var in (s.get("vars") or [{}]) for o in s.get("outs", [])}
    prefixes = {o.split("${")[0].rstrip("/") for o in outs}  # "runs/${item.model}/..." is known by "runs"

    def written(path: str) -> bool:
        return any(path == o or path.startswith(o + "/") or o.startswith(path + "/") for o in prefixes)

    files = project_files(ROOT)
    inputs = sorted(d for d in deps if not written(d))
    missing = [d for d in inputs if not any(f == d or f.startswith(d.rstrip("/") + "/") for f in files)]
    assert "reports/pilot/tables/robustness/plan_runs.csv" in inputs
    assert missing == []
