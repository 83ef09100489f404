"""Fault drill: kills, damaged files, crafted pickles, a full disk, bad inputs, two repros at once.

Every case ends in a one-line error (``error: ...`` and exit status 2 through the CLI) naming the problem
and the fix, or in a recovery whose results equal an uninterrupted run's; and nothing finished is lost or
half written. The fast cases call ``study.core.cli.main`` in-process on the smoke preset's digits with a 20-step
budget. The slow ones run ``dvc repro`` in copies of the finished smoke study (conftest's ``smoke_study``),
SIGKILL it at chosen points and compare every result with that uninterrupted study.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import itertools
import json
import os
import pickle
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.conftest import ROOT, copy_study
from study.core.checkout import own_code_env
from study.core.cli import main
from study.data.prepared import read_prepared, write_prepared
from study.data.schema import Dataset
from study.models import build_model
from study.train.artifacts import read_checkpoint, save_trained
from study.train.spec import RunSpec
from study.train.losses import LabelLoss
from study.presets import preset_params

SMOKE = preset_params(ROOT, "smoke")  # configs/smoke.yaml merged over params.yaml
# A run's output files, which `study train --run` writes into the run's folder.
OUTPUTS = ("model.pt", "metrics.json", "history.csv", "resume.pt", "predictions.npy")


# --- helpers ------------------------------------------------------------------------------------------


def cli(capsys, *args) -> tuple[int, str, str]:
    """Run ``study`` in this process; return (exit status, stdout, stderr)."""
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_error(result: tuple[int, str, str], *fragments: str) -> None:
    """Exit status 2 and exactly one line on stderr, ``error: ...``, holding every fragment."""
    code, _out, err = result
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def write_params(folder: Path, **sections) -> Path:
    """The smoke preset with a 20-step budget (checkpoints every 5 steps), ``sections`` merged in."""
    raw = copy.deepcopy(SMOKE)
    raw["budget"].update(epochs=1.0, min_steps=20)
    raw["train"]["checkpoint_every"] = 5
    for key, value in sections.items():
        raw[key] = {**raw[key], **value} if isinstance(value, dict) else value
    if raw["data"]["dataset"] != SMOKE["data"]["dataset"]:
        del raw["analysis"]["robustness"]  # the preset's grids fit 8-px digits; the defaults fit any image size
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def train_args(digits: Path, out: Path, model: str = "resnet", teacher: Path | None = None,
               subset: Path | None = None) -> list:
    """``study train`` of ``model`` on half of the digits, seed 0, writing into ``out``."""
    args = ["train", "--params", digits / "params.yaml", "--model", model, "--fraction", "0.5", "--seed", "0",
            "--prepared", digits / "prepared", "--subset", subset or digits / "subsets" / "s0" / "f0.5.npy",
            "--validation", digits / "subsets" / "validation.npy", "--run", out]
    return args + (["--teacher", teacher] if teacher else [])


def without_clock(obj):
    """``obj`` minus wall-clock entries (seconds, throughput), as canonical JSON text (NaN compares equal)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if "seconds" not in k and "throughput" not in k}
        return [strip(v) for v in value] if isinstance(value, list) else value
    return json.dumps(strip(obj), sort_keys=True)


def history_without_clock(path: Path) -> list[str]:
    """history.csv minus its wall-clock column."""
    rows = [line.split(",") for line in path.read_text().splitlines()]
    clock = rows[0].index("train_seconds")
    return [",".join(row[:clock] + row[clock + 1 :]) for row in rows]


def assert_same_run(run: Path, reference: Path) -> None:
    """Identical results: metrics (but wall-clock), learning curve, and the weights byte for byte."""
    assert without_clock(json.loads((run / "metrics.json").read_text())) == without_clock(
        json.loads((reference / "metrics.json").read_text()))
    assert history_without_clock(run / "history.csv") == history_without_clock(reference / "history.csv")
    assert (run / "model.pt").read_bytes() == (reference / "model.pt").read_bytes()


def leftovers(folder: Path) -> list[Path]:
    """Temporaries of atomic writes (``.<name>.<pid>.<random>.tmp``) still lying under ``folder``."""
    return sorted(path for path in folder.rglob(".*.tmp"))


class RunsCode:
    """Pickles into a call of ``os.system`` that creates ``marker``: what a crafted file would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


# --- ways to damage a file ----------------------------------------------------------------------------


def truncate(path: Path, _marker: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def empty(path: Path, _marker: Path) -> None:
    path.write_bytes(b"")


def flip_tensor_byte(path: Path, _marker: Path) -> None:
    """Flip one bit in the middle of the largest record of a torch.save archive: the zip stays valid."""
    data = bytearray(path.read_bytes())
    record = max(zipfile.ZipFile(io.BytesIO(bytes(data))).infolist(), key=lambda info: info.file_size)
    name_length, extra_length = struct.unpack("<HH", data[record.header_offset + 26 : record.header_offset + 30])
    start = record.header_offset + 30 + name_length + extra_length  # the local header is 30 bytes + name + extra
    data[start + record.file_size // 2] ^= 0x10
    path.write_bytes(bytes(data))


def flip_last_byte(path: Path, _marker: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x10
    path.write_bytes(bytes(data))


def plant_code(path: Path, marker: Path) -> None:
    """Keep the genuine content and add an entry whose unpickling runs a shell command."""
    state = read_checkpoint(path)
    torch.save({**state, "extra": RunsCode(marker)}, path)


def misfit_weights(path: Path, _marker: Path) -> None:
    """The genuine resume state with one weight of the wrong shape: it loads, but does not fit the model."""
    state = read_checkpoint(path)
    first = next(iter(state["model"]))
    state["model"][first] = torch.zeros(3)
    torch.save(state, path)


def swap_a_resume_state_in(path: Path, _marker: Path) -> None:
    shutil.copy(path.parent / "interrupted_resume.pt", path)


@contextlib.contextmanager
def ctrl_c_during_step(step: int):
    """Within the block, training is stopped as by Ctrl-C during optimiser step ``step``: the label loss (computed
    once a step, distilled or not) raises KeyboardInterrupt on its ``step``-th call."""
    original, calls = LabelLoss.forward, itertools.count(1)

    def interrupt(self, *args):
        if next(calls) == step:
            raise KeyboardInterrupt
        return original(self, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LabelLoss, "forward", interrupt)
        yield


# --- the digits, one uninterrupted run, and one interrupted at step 13 ---------------------------------


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    """The smoke preset's digits, prepared and split by the real stages, with a 20-step budget."""
    folder = tmp_path_factory.mktemp("drill")
    params = write_params(folder)
    assert main(["prepare", "--params", str(params), "--out", str(folder / "prepared")]) == 0
    assert main(["subsets", "--params", str(params), "--prepared", str(folder / "prepared"),
                 "--out", str(folder / "subsets")]) == 0
    return folder


@pytest.fixture(scope="module")
def reference(digits) -> Path:
    """The ResNet trained without interruption: the results every recovery must reproduce (and a teacher)."""
    out = digits / "reference"
    assert main([str(arg) for arg in train_args(digits, out)]) == 0
    return out


@pytest.fixture(scope="module")
def interrupted(digits) -> Path:
    """The same run stopped by Ctrl-C during step 13: its resume.pt is the genuine state after step 10."""
    out = digits / "interrupted"
    with ctrl_c_during_step(13):
        assert main([str(arg) for arg in train_args(digits, out)]) == 130
    assert read_checkpoint(out / "resume.pt")["step"] == 10
    assert not (out / "metrics.json").exists() and not (out / "model.pt").exists()
    return out


def test_the_crafted_payload_really_runs_code_when_unpickled_naively(tmp_path):
    """What makes the refusals below meaningful: plain pickle.loads of the payload creates the marker."""
    marker = tmp_path / "marker"
    pickle.loads(pickle.dumps({"data": RunsCode(marker)}))
    assert marker.exists()


# --- 2 and 3: damaged or crafted resume state, teacher, arrays, subset files, dataset files ----------


def test_genuine_resume_state_resumes_and_matches_the_uninterrupted_run(digits, reference, interrupted, tmp_path,
                                                                        capsys):
    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(interrupted / "resume.pt", out / "resume.pt")
    code, stdout, err = cli(capsys, *train_args(digits, out))
    assert code == 0, err
    assert "resuming at step 10/20" in stdout
    assert_same_run(out, reference)


@pytest.mark.parametrize("damage", [truncate, empty, flip_tensor_byte, plant_code, misfit_weights],
                         ids=["truncated", "empty", "bit-flip", "crafted", "misfit"])
def test_damaged_resume_state_is_discarded_with_a_message_and_the_run_starts_afresh(
        digits, reference, interrupted, tmp_path, capsys, damage):
    out = tmp_path / "run"
    out.mkdir()
    resume, marker = out / "resume.pt", tmp_path / "marker"
    shutil.copy(interrupted / "resume.pt", resume)
    damage(resume, marker)
    code, stdout, err = cli(capsys, *train_args(digits, out))
    assert code == 0, err
    assert not marker.exists(), "the crafted resume state ran code"
    message = [line for line in stdout.splitlines() if "unreadable resume state" in line]
    assert len(message) == 1 and message[0].startswith(f"{resume}: unreadable resume state (")
    assert message[0].endswith("discarding it and starting from scratch")
    assert "resuming at step" not in stdout
    assert_same_run(out, reference)  # a misfit state that was half loaded would change the weights


@pytest.mark.parametrize("damage, problem", [
    (truncate, "not a torch.save archive, or cut short"),
    (flip_tensor_byte, "fails its CRC-32 check"),
    (plant_code, "refused, it asks to import posix.system"),
    (swap_a_resume_state_in, "not a trained model's model.pt"),
], ids=["truncated", "bit-flip", "crafted", "resume-state"])
def test_damaged_teacher_is_named_with_the_fix_before_any_work(digits, reference, interrupted, tmp_path, capsys,
                                                                damage, problem):
    teacher, marker, out = tmp_path / "model.pt", tmp_path / "marker", tmp_path / "student"
    shutil.copy(reference / "model.pt", teacher)
    shutil.copy(interrupted / "resume.pt", tmp_path / "interrupted_resume.pt")
    damage(teacher, marker)
    result = cli(capsys, *train_args(digits, out, "deit", teacher))
    assert_error(result, f"{teacher}: unreadable checkpoint (", problem, "`dvc repro -f`")
    assert not marker.exists(), "the crafted teacher ran code"
    assert not out.exists()


@pytest.mark.parametrize("name, damage, problem", [
    ("train_images.npy", truncate, "is missing or corrupt"),
    ("train_labels.npy", empty, "is missing or corrupt"),
    ("test_images.npy", flip_last_byte, "does not match its manifest's SHA-256"),
    ("manifest.json", truncate, "is corrupt"),
])
def test_damaged_prepared_dataset_is_named_with_the_fix(digits, tmp_path, capsys, name, damage, problem):
    prepared, out = tmp_path / "prepared", tmp_path / "subsets"
    shutil.copytree(digits / "prepared", prepared)
    damage(prepared / name, tmp_path / "marker")
    result = cli(capsys, "subsets", "--params", digits / "params.yaml", "--prepared", prepared, "--out", out)
    assert_error(result, f"{prepared / name} {problem}", "`dvc repro -f prepare`")
    assert not out.exists()


def _drop_class_3(path: Path, _marker: Path) -> None:
    idx = np.load(path)
    labels = np.asarray(read_prepared(path.parents[2] / "prepared").train_labels)
    np.save(path, idx[labels[idx] != 3])  # still sorted, still valid indices: only the digest tells


def _as_floats(path: Path, _marker: Path) -> None:
    np.save(path, np.load(path).astype(np.float64))


def _shuffled(path: Path, _marker: Path) -> None:
    np.save(path, np.load(path)[::-1].copy())


@pytest.mark.parametrize("damage, problem", [
    (truncate, "missing, cut short or not an .npy file"),
    (empty, "missing, cut short or not an .npy file"),
    (_drop_class_3, "does not match its SHA-256 in manifest.json"),
    (_as_floats, "not a non-empty list of indices"),
    (_shuffled, "not increasing and non-negative"),
], ids=["truncated", "empty", "class-missing", "floats", "shuffled"])
def test_damaged_subset_file_is_named_with_the_fix_before_any_work(digits, tmp_path, capsys, damage, problem):
    work = tmp_path / "work"
    shutil.copytree(digits / "subsets", work / "subsets")
    (work / "prepared").symlink_to(digits / "prepared")
    subset, out = work / "subsets" / "s0" / "f0.5.npy", tmp_path / "run"
    damage(subset, tmp_path / "marker")
    result = cli(capsys, *train_args(digits, out, subset=subset))
    assert_error(result, f"{subset}: ", problem, "`dvc repro -f subsets`")
    assert not out.exists()


def test_class_missing_from_the_training_labels_stops_the_subsets_stage(digits, tmp_path, capsys):
    data = read_prepared(digits / "prepared")
    keep = np.asarray(data.train_labels) != 3
    write_prepared(Dataset(
        name="digits", train_images=np.asarray(data.train_images)[keep],
        train_labels=np.asarray(data.train_labels)[keep], test_images=np.asarray(data.test_images),
        test_labels=np.asarray(data.test_labels), class_names=data.class_names, source="test",
    ), tmp_path / "prepared")
    out = tmp_path / "subsets"
    result = cli(capsys, "subsets", "--params", digits / "params.yaml", "--prepared", tmp_path / "prepared",
                 "--out", out)
    assert_error(result, "class(es) [3] have no training image", "`dvc repro -f prepare`")
    assert not out.exists()


def _corrupt_middle(path: Path, _marker: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [truncate, _corrupt_middle], ids=["truncated", "corrupt"])
def test_damaged_fashionmnist_gz_is_named_with_the_fix(make_fashionmnist, tmp_path, capsys, damage):
    root, out = tmp_path / "fashion", tmp_path / "prepared"
    make_fashionmnist(root, gz=True)
    params = write_params(tmp_path, data={"dataset": "fashionmnist", "root": str(root), "download": False})
    path = root / "train-images-idx3-ubyte.gz"
    damage(path, tmp_path / "marker")
    result = cli(capsys, "prepare", "--params", params, "--out", out)
    assert_error(result, f"{path}: not a readable gzip file", "data.root")
    assert not out.exists()


def _plant_code_in_pickle(path: Path, marker: Path) -> None:
    batch = pickle.loads(path.read_bytes(), encoding="latin1")
    path.write_bytes(pickle.dumps({**batch, "extra": RunsCode(marker)}, protocol=2))


@pytest.mark.parametrize("damage, problem", [
    (truncate, "not a readable pickle"),
    (_plant_code_in_pickle, "refused: its pickle asks to import posix.system, which CIFAR data never needs"),
], ids=["truncated", "crafted"])
def test_damaged_or_crafted_cifar_batch_is_refused_unexecuted(make_cifar, tmp_path, capsys, damage, problem):
    root, out, marker = tmp_path / "cifar", tmp_path / "prepared", tmp_path / "marker"
    make_cifar(root, "cifar10")
    params = write_params(tmp_path, data={"dataset": "cifar10", "root": str(root), "download": False})
    path = root / "cifar-10-batches-py" / "data_batch_1"
    damage(path, marker)
    result = cli(capsys, "prepare", "--params", params, "--out", out)
    assert_error(result, f"{path}: {problem}", "data.root")
    assert not marker.exists(), "the crafted CIFAR batch ran code"
    assert not out.exists()


def test_crafted_params_yaml_is_refused_unexecuted(tmp_path, capsys):
    params, marker = tmp_path / "params.yaml", tmp_path / "marker"
    params.write_text(f"data: !!python/object/apply:os.system [{json.dumps(f'touch {marker}')}]\n")
    assert_error(cli(capsys, "check", "--params", params), f"{params}: not valid YAML")
    assert not marker.exists()


def test_no_loader_in_the_package_can_run_code_from_a_file():
    """Every torch.load passes weights_only=True; no yaml.load, pickle.load(s) or np.load(allow_pickle=True)."""
    unsafe = {("yaml", "load"), ("yaml", "unsafe_load"), ("yaml", "full_load"), ("yaml", "load_all"),
              ("pickle", "load"), ("pickle", "loads"), ("torch", "load")}
    found = []
    for path in sorted((ROOT / "study").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            call = (ast.unparse(node.func.value), node.func.attr)
            keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
            if call == ("torch", "load"):
                found.append(call)
                if keywords.get("weights_only") == "True":
                    continue
            if call in unsafe or (call[1] == "load" and keywords.get("allow_pickle") not in (None, "False")):
                pytest.fail(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert found, "the scan found no torch.load at all: it no longer sees the loaders"


# --- 4: a full disk while a run is written --------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_full_disk_while_writing_a_run_is_one_line_and_keeps_the_previous_outputs(digits, reference, tmp_path,
                                                                                   capsys, monkeypatch):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    before = {path.name: (path.stat().st_ino, path.read_bytes()) for path in out.iterdir()}
    real_mkstemp = tempfile.mkstemp

    def on_a_full_disk(*args, dir=None, **kwargs):
        """Temporaries of this run become links to /dev/full, where every write fails with ENOSPC."""
        fd, name = real_mkstemp(*args, dir=dir, **kwargs)
        if dir is not None and Path(dir) == out:
            os.close(fd)
            os.unlink(name)
            os.symlink("/dev/full", name)
            fd = os.open(name, os.O_WRONLY)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", on_a_full_disk)
    result = cli(capsys, *train_args(digits, out))
    # init.pt, the weights before the first step, is the first file a run writes
    assert_error(result, f"{out / 'init.pt'}: could not be written (No space left on device)", "free disk space")
    after = {path.name: (path.stat().st_ino, path.read_bytes()) for path in out.iterdir()}
    assert after == before  # same files, never replaced (same inodes), same bytes, and no temporary left


def test_any_other_file_system_error_is_one_line_too(digits, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # the output folder would have to be created inside a plain file
    result = cli(capsys, "subsets", "--params", digits / "params.yaml", "--prepared", digits / "prepared",
                 "--out", blocker / "subsets")
    assert_error(result, f"{blocker}: ", "fix the file system problem")


# --- 5: NaN mid-run, an empty fraction, a teacher that does not fit -----------------------------------


@pytest.mark.parametrize("model", ["resnet", "vit", "deit"])
def test_nan_mid_run_stops_every_model_at_its_step(digits, reference, tmp_path, capsys, monkeypatch, model):
    original, calls = LabelLoss.forward, itertools.count(1)

    def nan_from_step_3(self, *args):
        loss = original(self, *args)
        return loss * float("nan") if next(calls) >= 3 else loss

    monkeypatch.setattr(LabelLoss, "forward", nan_from_step_3)  # the distilled student's loss calls it too
    out = tmp_path / "run"
    teacher = reference / "model.pt" if model == "deit" else None
    result = cli(capsys, *train_args(digits, out, model, teacher))
    assert_error(result, "training loss became NaN/inf by step 3", "lower the model's lr")
    assert not (out / "model.pt").exists() and not (out / "metrics.json").exists()


def test_empty_fraction_is_refused_before_any_work(tmp_path, capsys):
    params, out = write_params(tmp_path, fractions=[0.0, 1.0]), tmp_path / "prepared"
    assert_error(cli(capsys, "prepare", "--params", params, "--out", out), "fractions[0] = 0.0", "(0, 1]")
    assert not out.exists()


def _teacher_like(reference: Path, path: Path, arch: str, num_classes: int, **spec) -> Path:
    """A model.pt as ``save_trained`` writes it, for ``arch`` with ``num_classes`` outputs."""
    base = read_checkpoint(reference / "model.pt")["spec"]
    arch_args = SMOKE["models"][spec.get("model_name", base["model_name"])]["arch_args"]
    model = build_model(arch, num_classes, base["image_size"], base["in_chans"], **arch_args)
    save_trained(path, model, RunSpec.from_dict({**base, "arch": arch, "arch_args": arch_args,
                                                "num_classes": num_classes, **spec}))
    return path


@pytest.mark.parametrize("arch, num_classes, spec, problem", [
    ("vit", 10, {"model_name": "vit"}, "model 'vit' (vit "),
    ("resnet8", 100, {}, "predicts 100 classes, the student 1x8x8 and 10"),
], ids=["another-architecture", "another-class-count"])
def test_teacher_that_does_not_fit_the_student_is_refused_before_any_work(digits, reference, tmp_path, capsys,
                                                                         arch, num_classes, spec, problem):
    teacher = _teacher_like(reference, tmp_path / "model.pt", arch, num_classes, **spec)
    out = tmp_path / "student"
    assert_error(cli(capsys, *train_args(digits, out, "deit", teacher)), f"{teacher}: ", problem)
    assert not out.exists()  # not one step taken: no resume state either


# --- 1 and 6: SIGKILL inside `dvc repro`, and two at once (slow) ----------------------------------------

# A stand-in for the `study` command, first on PATH, that runs the real CLI with one of two faults:
# - KILL_AT: SIGKILL itself right after writing the temporary of the output whose path ends with $KILL_AT
#   (the $KILL_NTH-th such write; cut to half its size if a file), so the kill lands inside that write, at
#   a point no sleep could hit reliably;
# - HOLD_UNTIL: first create "$HOLD_UNTIL.waiting", then wait until the file $HOLD_UNTIL exists, so its
#   `dvc repro` holds the repo's lock for exactly as long as the test needs.
SHIM = textwrap.dedent('''\
    #!{python}
    import contextlib, os, signal, sys, time
    from pathlib import Path

    import study.core.io

    if "HOLD_UNTIL" in os.environ:
        gate = Path(os.environ["HOLD_UNTIL"])
        Path(f"{{gate}}.waiting").touch()
        while not gate.exists():
            time.sleep(0.05)

    TARGET, NTH = os.environ.get("KILL_AT"), int(os.environ.get("KILL_NTH", "1"))
    HOLD_AFTER = os.environ.get("HOLD_AFTER")
    writes = 0


    def killer(real):
        @contextlib.contextmanager
        def wrapped(path):
            global writes
            with real(path) as tmp:
                yield tmp
                if TARGET and str(path).endswith(TARGET):
                    writes += 1
                    if writes == NTH:
                        if tmp.is_file():
                            os.truncate(tmp, tmp.stat().st_size // 2)
                        os.kill(os.getpid(), signal.SIGKILL)
            if HOLD_AFTER and str(path).endswith(HOLD_AFTER):  # written; wait here for the test's SIGKILL
                Path(os.environ["HOLD_FLAG"]).touch()
                while True:
                    time.sleep(1)
        return wrapped


    study.core.io.atomic_path = killer(study.core.io.atomic_path)  # before anything imports it by name
    study.core.io.atomic_dir = killer(study.core.io.atomic_dir)
    from study.core.cli import main
    sys.exit(main())
''')


def _install_shim(folder: Path) -> Path:
    folder.mkdir()
    (folder / "study").write_text(SHIM.format(python=sys.executable))
    (folder / "study").chmod(0o755)
    return folder


def _env(extra_path: Path | None = None, **variables: str) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join([*([str(extra_path)] if extra_path else []), bin_dir, os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, **variables}


def _dvc(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``dvc`` in ``project``, a copy of this one that runs its own code (`study` refuses another checkout's)."""
    return subprocess.run([str(Path(sys.executable).parent / "dvc"), *args], cwd=project,
                          env=own_code_env(project, env or _env()), capture_output=True, text=True)


def _copy_study(smoke_study: Path, dest: Path) -> Path:
    return copy_study(smoke_study, dest)


def _assert_same_results(project: Path, reference: Path) -> None:
    """Every run's metrics, curve and weights, and the report's metrics and analysis tables, as in ``reference``."""
    runs = sorted(path.relative_to(reference).parent for path in (reference / "runs").rglob("metrics.json"))
    assert runs == sorted(path.relative_to(project).parent for path in (project / "runs").rglob("metrics.json"))
    for run in runs:
        assert_same_run(project / run, reference / run)
    assert without_clock(json.loads((project / "reports" / "metrics.json").read_text())) == without_clock(
        json.loads((reference / "reports" / "metrics.json").read_text()))
    for folder in ("cka", "attention"):
        for table in sorted((reference / "reports" / "tables" / folder).glob("*.csv")):
            assert (project / "reports" / "tables" / folder / table.name).read_text() == table.read_text(), table


@pytest.mark.slow
def test_sigkill_anywhere_then_repro_finishes_with_the_uninterrupted_results(smoke_study, tmp_path):
    project = _copy_study(smoke_study, tmp_path / "study")
    teacher_run, student_run = project / "runs" / "resnet" / "f0.5_s0", project / "runs" / "deit" / "f0.5_s0"
    for run in (teacher_run, student_run):  # these two train again, and everything after them runs again
        shutil.rmtree(run)
    shim = _install_shim(tmp_path / "bin")

    def killed_at(target: str, *stages: str, nth: int = 1) -> subprocess.CompletedProcess:
        """`dvc repro [stages]` with the `study` stand-in killing itself at the ``nth`` write of ``target``."""
        result = _dvc(project, "repro", *stages, env=_env(shim, KILL_AT=target, KILL_NTH=str(nth)))
        assert result.returncode != 0, f"the kill at {target} never happened:\n{result.stdout[-2000:]}"
        return result

    # A training step: SIGKILL the whole `dvc repro` (its process group) while the teacher holds just after writing
    # its first resume state, a point no polling of that file could hit reliably.
    flag, log = tmp_path / "teacher-holding", tmp_path / "held-repro.log"
    with log.open("w") as output:
        repro = subprocess.Popen([str(Path(sys.executable).parent / "dvc"), "repro"], cwd=project,
                                 env=own_code_env(project, _env(shim, HOLD_AFTER="resnet/f0.5_s0/resume.pt",
                                                                HOLD_FLAG=str(flag))),
                                 stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 600
        while not flag.exists() and repro.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if repro.poll() is None:
            os.killpg(repro.pid, signal.SIGKILL)
        status = repro.wait()
    assert status == -signal.SIGKILL, f"the teacher never wrote its resume state:\n{log.read_text()[-3000:]}"
    killed_state = read_checkpoint(teacher_run / "resume.pt")
    killed_step = killed_state["step"]
    assert 0 < killed_step and killed_state.get("fingerprint") != "complete"
    assert not (teacher_run / "metrics.json").exists() and not (teacher_run / "model.pt").exists()

    # A checkpoint write: the student dies halfway through writing its second resume state (step 20).
    result = killed_at("deit/f0.5_s0/resume.pt", nth=2)
    assert f"resuming at step {killed_step}/" in result.stdout
    assert (teacher_run / "metrics.json").is_file()
    assert read_checkpoint(student_run / "resume.pt")["step"] == 20  # the first one, intact
    assert len(leftovers(student_run)) == 1 and not (student_run / "metrics.json").exists()

    # The CKA stage, killed while writing its tables; first the student resumes from its intact state.
    result = killed_at("tables/cka", "cka")
    assert "resuming at step 20/" in result.stdout and "Running stage 'cka'" in result.stdout
    assert (student_run / "metrics.json").is_file() and leftovers(student_run) == []
    # The attention stage while writing its figures, then the report while writing its metrics.
    assert "Running stage 'attention'" in killed_at("figures/attention", "attention").stdout
    # The robustness stage and the budget check (with its longer runs), between them, first run to their end: the
    # kill targets the report.
    assert _dvc(project, "repro", "robustness").returncode == 0
    assert _dvc(project, "repro", "budget_check").returncode == 0
    assert "Running stage 'report'" in killed_at("reports/metrics.json").stdout

    final = _dvc(project, "repro")
    assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
    assert "up to date" in _dvc(project, "status").stdout
    _assert_same_results(project, smoke_study)
    assert leftovers(project / "runs") == [] and leftovers(project / "reports") == []


@pytest.mark.slow
def test_a_second_repro_in_the_same_workspace_refuses_and_corrupts_nothing(smoke_study, tmp_path):
    project = _copy_study(smoke_study, tmp_path / "study")
    gate = tmp_path / "gate"
    first = subprocess.Popen([str(Path(sys.executable).parent / "dvc"), "repro", "-f", "-s", "curves"], cwd=project,
                             env=own_code_env(project, _env(_install_shim(tmp_path / "bin"), HOLD_UNTIL=str(gate))),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while not Path(f"{gate}.waiting").exists():  # the first is inside its stage, holding the lock
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0][-3000:]
        time.sleep(0.05)
    second = _dvc(project, "repro")
    gate.touch()
    first_output = first.communicate()[0]
    assert first.returncode == 0, first_output[-3000:]
    # DVC releases its repo lock while a stage's command runs; the stage's read/write locks on its paths
    # then stop the second at the first stage whose outputs the first one's stage reads.
    # Its exit status is checked as well as its words: with SIGCHLD left ignored in pytest (an in-process Ray
    # instance sets that; conftest's _children_keep_their_exit_status) this refusal would read as exit 0.
    refusal = second.stdout + second.stderr
    assert second.returncode != 0, refusal
    assert "Running stage" not in refusal, refusal
    assert "is busy, it is being blocked by" in refusal and "dvc repro -f -s curves" in refusal, refusal
    assert "up to date" in _dvc(project, "status").stdout
    final = _dvc(project, "repro")
    assert final.returncode == 0 and "Running stage" not in final.stdout, final.stdout
    _assert_same_results(project, smoke_study)
