"""The notebooks run top to bottom on a finished study, and are committed without outputs.

Why: notebooks rot silently — a renamed column or function breaks them without failing any unit test.
Each notebook is executed against the smoke study's outputs (the ``smoke_study`` fixture) in a kernel
of this very interpreter, so the notebooks' own checks run too (step-by-step ViT == ``model(x)``,
recomputed CKA and attention distances == the stored CSVs). The kernels run concurrently: most of
each notebook's time is importing torch and timm, which overlaps well even on two cores.

A fresh clone has the committed ``reports/`` but no ``runs/`` or ``data/prepared/`` (``dvc repro`` makes them):
each notebook is also executed on a copy of ``reports/`` alone, the committed one and the smoke study's, and must
do there what its first cell says (:data:`WITHOUT_RUNS`). The smoke study has no ladder: the ladder's notebook
(:data:`NEEDS_LADDER`) must stop there with a one-line error, and runs whole on the committed ``reports/ladder/`` and
on the smoke-size ladder that tests/ladder/test_gpu_preset.py trains.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
# Text each notebook prints only after its final consistency check passed.
CHECKS = {
    "01_vit_walkthrough": "step-by-step logits match model(x)",
    "02_data_efficiency": "power-law curves reproduce the RMSE in reports/tables/curves/power_law.csv",
    "03_representations": "live CKA matches reports/figures/cka",
    "04_attention": "mean attention distance matches reports/figures/attention/attention_distance.csv",
    "05_controls": "recomputed pooled contrasts match reports/tables/controls",
    "06_plan": "the mean of the seeds' means matches reports/tables/plan/tests.csv",
    "07_ladder": "the recomputed steps match",
}
# What each notebook does without runs/ and data/prepared/, as its first cell says ("**Needs:**"): "reports" runs
# whole on the committed reports/; "partial" skips its run-dependent cells, each printing a line "skipped ..." that
# names `dvc repro`, and shows the rest from reports/; "runs" stops at its first cell after the project's, with a
# one-line error naming `dvc repro`.
WITHOUT_RUNS = {
    "01_vit_walkthrough": "runs",
    "02_data_efficiency": "reports",
    "03_representations": "partial",
    "04_attention": "partial",
    "05_controls": "reports",
    "06_plan": "reports",
    "07_ladder": "reports",
}
# Notebooks that read a ladder (the ladder preset's reports/ladder/, or a study whose plan declares one): on a study
# with neither, such as the smoke study, each stops at its first cell after the project's with a one-line error
# naming the command that makes one. tests/ladder/test_gpu_preset.py runs them on a ladder this code wrote.
NEEDS_LADDER = {"07_ladder": "study preset ladder"}
MIN_FIGURES = 3
KERNEL_PROBE = "import sys, study\nprint('KERNEL', sys.prefix, study.__file__)"


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_expected_notebooks_exist():
    assert {path.stem for path in notebook_paths()} >= set(CHECKS)
    assert {path.stem for path in notebook_paths()} == set(WITHOUT_RUNS), "say what each notebook needs"


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_first_cell_says_what_the_notebook_needs(path: Path):
    first = nbformat.read(path, as_version=4).cells[0]
    assert first.cell_type == "markdown"
    needs = first.source[first.source.index("**Needs:**"):]
    if WITHOUT_RUNS[path.stem] == "reports":
        assert "`reports/` only" in needs and "fresh clone" in needs
    else:
        assert "`runs/`" in needs and "`dvc repro`" in needs


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_committed_notebook_has_no_outputs(path: Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code_cells
    for cell in code_cells:
        assert cell.outputs == [], f"{path.name}: strip outputs before committing"
        assert cell.execution_count is None, f"{path.name}: strip execution counts before committing"


def test_notebooks_label_fractions_exactly():
    """A fraction of the data is printed exactly (0.005 -> "0.5%"), never rounded to whole percent ("0%")."""
    from study.outputs.figure_style import percent_label

    assert [percent_label(f) for f in (0.005, 0.07, 0.1, 1.0)] == ["0.5%", "7%", "10%", "100%"]
    for path in notebook_paths():
        for cell in nbformat.read(path, as_version=4).cells:
            assert ":.0%" not in cell.source, f"{path.name}: label fractions with percent_label, not :.0%"


def _first_code_cell(path: Path) -> str:
    return next(cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code")


def test_notebooks_share_one_root_cell():
    assert len({_first_code_cell(path) for path in notebook_paths()}) == 1


def test_root_cell_finds_project_from_working_directory(tmp_path, monkeypatch):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "reports").mkdir()
    (tmp_path / "notebooks").mkdir()
    monkeypatch.delenv("STUDY_ROOT", raising=False)
    monkeypatch.chdir(tmp_path / "notebooks")  # where Jupyter starts a notebook's kernel
    namespace: dict = {}
    exec(_first_code_cell(notebook_paths()[0]), namespace)
    assert namespace["ROOT"] == tmp_path.resolve()


def test_root_cell_asks_for_dvc_repro_without_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDY_ROOT", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"reports is missing: run `dvc repro` first"):
        exec(_first_code_cell(notebook_paths()[0]), {})


# --- execution against the smoke study ---------------------------------------------------------------


def _kernelspec_dir(base: Path) -> Path:
    """A Jupyter data dir whose ``python3`` kernel is this interpreter, whatever kernelspecs the user has."""
    spec = base / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "study", "language": "python"}))
    return base


def _kernel_manager(sockets: Path) -> AsyncKernelManager:
    """A ``python3`` kernel that talks over Unix sockets of its own, not TCP.

    A TCP kernel's ports are picked free by the client and bound later by the kernel; with several kernels starting
    at once, another kernel's client connection can take one in between ("ZMQError: Address already in use", then
    "Kernel died before replying to kernel_info": it failed CI once). IPC sockets are files: each kernel gets an
    absolute path prefix of its own in ``sockets`` (jupyter_client's default prefix is relative to the working
    directory, which the kernel and this process do not share)."""
    prefix = sockets / f"kernel-{uuid.uuid4().hex[:12]}"
    return AsyncKernelManager(kernel_name="python3", transport="ipc", ip=str(prefix))


async def _execute(path: Path, project: Path, sockets: Path,
                   probe: bool = True) -> tuple[nbformat.NotebookNode, float, BaseException | None]:
    nb = nbformat.read(path, as_version=4)
    if probe:
        nb.cells.append(nbformat.v4.new_code_cell(KERNEL_PROBE))
    client = NotebookClient(nb, km=_kernel_manager(sockets), timeout=300,
                            resources={"metadata": {"path": str(project)}})
    tic = time.perf_counter()
    try:
        await client.async_execute()
        error = None
    except Exception as exc:  # reported by the notebook's own test, with the others still run
        error = exc
    return nb, time.perf_counter() - tic, error


Executed = dict[str, tuple[nbformat.NotebookNode, float, BaseException | None]]


def _execute_all(project: Path, tmp_path_factory, probe: bool = True,
                 paths: list[Path] | None = None) -> Executed:
    """The notebooks (default: every one) executed concurrently against ``project``: stem -> (notebook, seconds,
    error)."""
    paths = notebook_paths() if paths is None else paths
    jupyter_dir = _kernelspec_dir(tmp_path_factory.mktemp("jupyter"))
    # The kernels' IPC sockets go in a short temporary dir: a socket's path must stay under the OS limit (108 bytes
    # on Linux), which pytest's deep temporary paths can pass.
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory(prefix="nb") as sockets:
        patch.setenv("STUDY_ROOT", str(project))
        patch.setenv("JUPYTER_PATH", str(jupyter_dir))  # searched before the user's and the system's dirs

        async def run_all():
            return await asyncio.gather(*(_execute(path, project, Path(sockets), probe) for path in paths))

        results = asyncio.run(run_all())
    return {path.stem: result for path, result in zip(paths, results)}


def run_ladder_notebooks(project: Path, tmp_path_factory) -> dict[str, str]:
    """The notebooks of :data:`NEEDS_LADDER` executed against ``project``, a study with a ladder: stem -> the text
    they printed; each must run without an error and print its :data:`CHECKS` line."""
    paths = [path for path in notebook_paths() if path.stem in NEEDS_LADDER]
    texts = {}
    for stem, (nb, seconds, error) in _execute_all(project, tmp_path_factory, probe=False, paths=paths).items():
        if error is not None:
            raise error
        assert not _errors(nb)
        texts[stem] = _texts(nb)
        assert CHECKS[stem] in texts[stem], f"{stem}.ipynb did not print its check"
    return texts


@pytest.fixture(scope="module")
def executed(smoke_study: Path, tmp_path_factory) -> Executed:
    """Every notebook executed against the smoke study."""
    return _execute_all(smoke_study, tmp_path_factory)


def _texts(nb: nbformat.NotebookNode) -> str:
    return "".join(out.get("text", "") for cell in nb.cells for out in cell.get("outputs", [])
                   if out.get("output_type") == "stream")


@pytest.mark.slow
@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_notebook_runs_on_smoke_study(path: Path, executed, smoke_study: Path):
    nb, seconds, error = executed[path.stem]
    if path.stem in NEEDS_LADDER:  # the smoke study declares no ladder
        _assert_stops_at_first_cell(path, nb, error, "a ladder", NEEDS_LADDER[path.stem])
        return
    if error is not None:
        raise error
    outputs = [out for cell in nb.cells for out in cell.get("outputs", [])]
    assert not [out for out in outputs if out.get("output_type") == "error"]
    probe = next(line for line in _texts(nb).splitlines() if line.startswith("KERNEL "))
    _, prefix, study_file = probe.split(" ", 2)
    assert Path(prefix) == Path(sys.prefix), "the kernel must run this test's interpreter"
    assert Path(study_file).resolve().parents[1] in {ROOT, smoke_study.resolve()}
    figures = sum("image/png" in out.get("data", {}) for out in outputs)
    assert figures >= MIN_FIGURES, f"{path.name} drew {figures} figures"
    if path.stem in CHECKS:
        assert CHECKS[path.stem] in _texts(nb)
    print(f"{path.name}: {seconds:.1f} s, {figures} figures")


# --- execution on a fresh clone: reports/ without runs/ ----------------------------------------------------------


def _fresh_clone(reports: Path, dest: Path) -> Path:
    """What a clone holds for the notebooks: dvc.yaml and a finished study's reports/; no runs/, no data/."""
    dest.mkdir(parents=True)
    shutil.copy(ROOT / "dvc.yaml", dest / "dvc.yaml")
    shutil.copytree(reports, dest / "reports")
    return dest


@pytest.fixture(scope="module")
def executed_on_committed_reports(tmp_path_factory) -> Executed:
    """Every notebook executed against a copy of this checkout's committed reports/ alone."""
    return _execute_all(_fresh_clone(ROOT / "reports", tmp_path_factory.mktemp("clone") / "project"),
                        tmp_path_factory, probe=False)


@pytest.fixture(scope="module")
def executed_on_smoke_reports(smoke_study: Path, tmp_path_factory) -> Executed:
    """Every notebook executed against a copy of the smoke study's reports/ alone (tables this code wrote)."""
    return _execute_all(_fresh_clone(smoke_study / "reports", tmp_path_factory.mktemp("clone") / "project"),
                        tmp_path_factory, probe=False)


def _errors(nb: nbformat.NotebookNode) -> list[tuple[int, dict]]:
    return [(index, out) for index, cell in enumerate(nb.cells) for out in cell.get("outputs", [])
            if out.get("output_type") == "error"]


def _assert_stops_at_first_cell(path: Path, nb: nbformat.NotebookNode, error: BaseException | None,
                                what: str, command: str) -> None:
    """The notebook stopped at its first cell after the project's, with a one-line error naming ``command``."""
    errors = _errors(nb)
    assert error is not None and len(errors) == 1, f"{path.name} must stop without {what}"
    index, out = errors[0]
    second_code_cell = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"][1]
    assert index == second_code_cell, f"{path.name} must stop at its first cell after the project's"
    assert "\n" not in out["evalue"] and f"`{command}" in out["evalue"], out["evalue"]


def _check_without_runs(path: Path, executed: Executed, source: str, has_ladder: bool) -> None:
    nb, seconds, error = executed[path.stem]
    errors = _errors(nb)
    skipped = [line for line in _texts(nb).splitlines() if line.startswith("skipped")]
    figures = sum("image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))
    if WITHOUT_RUNS[path.stem] == "runs":
        _assert_stops_at_first_cell(path, nb, error, "runs/", "dvc repro")
        return
    if path.stem in NEEDS_LADDER and not has_ladder:
        _assert_stops_at_first_cell(path, nb, error, "a ladder", NEEDS_LADDER[path.stem])
        return
    if errors:
        first = errors[0][1]
        raise AssertionError(f"{path.name} failed on {source} without runs/: {first['ename']}: {first['evalue']}")
    if error is not None:
        raise error
    assert figures >= 1, f"{path.name} drew nothing from reports/"
    if WITHOUT_RUNS[path.stem] == "partial":
        assert skipped and all("dvc repro" in line or "see above" in line for line in skipped), skipped
        assert any("`dvc repro`" in line for line in skipped)
    else:
        assert not skipped, f"{path.name} needs reports/ only, yet skipped: {skipped}"
        if path.stem in CHECKS:  # reports/ is all it reads: its own check runs too
            assert CHECKS[path.stem] in _texts(nb)
    print(f"{path.name} without runs/: {seconds:.1f} s, {figures} figures, {len(skipped)} cells skipped")


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_notebook_on_committed_reports_without_runs(path: Path, executed_on_committed_reports):
    """A fresh clone of this checkout: the committed reports/ must be readable by this code's notebooks."""
    _check_without_runs(path, executed_on_committed_reports, "the committed reports/ (regenerate them: `dvc repro`)",
                        has_ladder=True)


# Notebooks with a ``STUDY`` parameter (a preset's report committed under reports/<name>/) -> the table whose
# presence says a committed report has what the notebook reads.
STUDY_NOTEBOOKS = {"02_data_efficiency": "tables/curves/data_efficiency.csv",
                   "05_controls": "tables/controls/control_contrasts.csv", "06_plan": "tables/plan/tests.csv"}


@pytest.mark.slow  # a kernel per committed preset: 2 minutes of the quick tier on 2 cores
@pytest.mark.parametrize("stem", sorted(STUDY_NOTEBOOKS))
def test_notebook_reads_every_committed_preset(stem: str, tmp_path_factory):
    """The notebook with ``STUDY`` set to each preset whose committed report holds its tables (written by the run,
    or by `study rerender`): it reads that report with the parameters that computed it and passes its checks."""
    presets = sorted(path.parent.name for path in (ROOT / "reports").glob("*/provenance.json")
                     if (path.parent / STUDY_NOTEBOOKS[stem]).is_file())
    assert {"controls", "ladder", "small_data"} <= set(presets)
    project = _fresh_clone(ROOT / "reports", tmp_path_factory.mktemp("clone") / "project")
    folder = tmp_path_factory.mktemp("notebooks")
    paths = []
    for name in presets:
        nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
        cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("STUDY = None"))
        cell.source = cell.source.replace("STUDY = None", f"STUDY = {name!r}", 1)
        paths.append(folder / f"{stem}__{name}.ipynb")
        nbformat.write(nb, paths[-1])
    for path, (nb, seconds, error) in _execute_all(project, tmp_path_factory, probe=False, paths=paths).items():
        if error is not None:
            raise error
        name = path.split("__")[1]
        assert CHECKS[stem].replace("reports/", f"reports/{name}/") in _texts(nb), name


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_notebook_on_smoke_reports_without_runs(path: Path, executed_on_smoke_reports):
    """The same on the reports/ this code writes (the smoke study's), whatever the committed ones hold."""
    _check_without_runs(path, executed_on_smoke_reports, "the smoke study's reports/", has_ladder=False)
