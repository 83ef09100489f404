"""Shared fixtures that generate tiny datasets on disk in the real file formats.

Tests never read the real datasets (a data.root, the Debian package's files): they write a few images as IDX files
(Fashion-MNIST) or CIFAR pickles into ``tmp_path`` and load them through the same code as the real data. The
factories return the arrays they wrote, in the loaders' output convention (NHWC uint8, int64 labels), so a test can
compare what comes back with what went in.
"""

from __future__ import annotations

import gzip
import os
import pickle
import shutil
import signal
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torchvision
from filelock import FileLock

FASHIONMNIST_NAMES = {  # the published file names (also torchvision's and the Debian package's)
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
CIFAR_CLASSES = {"cifar10": torchvision.datasets.CIFAR10, "cifar100": torchvision.datasets.CIFAR100}
ROOT = Path(__file__).resolve().parents[1]


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as an IDX file: magic 0x0000 0x08 ndim, big-endian uint32 sizes, payload.
    Gzipped when ``path`` ends in ``.gz``."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(payload) if path.suffix == ".gz" else payload)


def tiny_images(rng: np.random.Generator, count: int, side: int, channels: int) -> np.ndarray:
    return rng.integers(0, 256, size=(count, side, side, channels), dtype=np.uint8)  # (N, H, W, C)


def balanced_labels(count: int, num_classes: int) -> np.ndarray:
    return (np.arange(count) % num_classes).astype(np.int64)


@pytest.fixture
def make_fashionmnist() -> Callable[..., dict[str, np.ndarray]]:
    """Factory: write the four Fashion-MNIST IDX files into ``directory``; return the arrays written.

    ``gz`` picks ``.gz`` or decompressed files; ``seed`` makes different copies distinguishable.
    """

    def make(directory: Path, gz: bool = True, n_train: int = 30, n_test: int = 10, seed: int = 0):
        rng = np.random.default_rng(seed)
        arrays = {
            "train_images": tiny_images(rng, n_train, 28, 1),
            "train_labels": balanced_labels(n_train, 10),
            "test_images": tiny_images(rng, n_test, 28, 1),
            "test_labels": balanced_labels(n_test, 10),
        }
        for part, name in FASHIONMNIST_NAMES.items():
            array = arrays[part][..., 0] if part.endswith("images") else arrays[part]  # IDX images: (N, 28, 28)
            write_idx(directory / (name + ".gz" if gz else name), array)
        return arrays

    return make


@pytest.fixture
def fashionmnist_root(tmp_path: Path, make_fashionmnist) -> Path:
    """A folder in torchvision's layout (``root/FashionMNIST/raw``) with 30 train / 10 test images."""
    root = tmp_path / "fashionmnist"
    make_fashionmnist(root / "FashionMNIST" / "raw", gz=False)
    return root


@pytest.fixture
def make_cifar() -> Callable[..., dict[str, object]]:
    """Factory: write CIFAR-10 or CIFAR-100 python pickles under ``root/<base_folder>``, in the release's
    format (``data`` rows of 3072 bytes: red plane, green plane, blue plane, each 32×32 row-major).

    Every batch file listed by torchvision gets ``per_file`` images. Returns the images (NHWC), labels
    and class names written.
    """

    def make(root: Path, name: str, per_file: int = 4, seed: int = 0) -> dict[str, object]:
        spec = CIFAR_CLASSES[name]
        num_classes = 10 if name == "cifar10" else 100
        folder = root / spec.base_folder
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(seed)
        written: dict[str, object] = {"class_names": tuple(f"class_{index}" for index in range(num_classes))}
        for split, files in (("train", spec.train_list), ("test", spec.test_list)):
            images = tiny_images(rng, per_file * len(files), 32, 3)
            labels = rng.integers(0, num_classes, size=len(images)).astype(np.int64)
            for index, (file, _md5) in enumerate(files):
                part = slice(index * per_file, (index + 1) * per_file)
                _dump(folder / file, _cifar_batch(name, images[part], labels[part]))
            written[f"{split}_images"], written[f"{split}_labels"] = images, labels
        _dump(folder / spec.meta["filename"], {spec.meta["key"]: list(written["class_names"])})
        return written

    return make


@pytest.fixture
def cifar10_root(tmp_path: Path, make_cifar) -> Path:
    root = tmp_path / "cifar"
    make_cifar(root, "cifar10")
    return root


@pytest.fixture
def cifar100_root(tmp_path: Path, make_cifar) -> Path:
    root = tmp_path / "cifar"
    make_cifar(root, "cifar100")
    return root


def _cifar_batch(name: str, images: np.ndarray, labels: np.ndarray) -> dict[str, object]:
    planes = images.transpose(0, 3, 1, 2)  # (N, 32, 32, 3) -> (N, 3, 32, 32)
    rows = planes.reshape(len(images), 3 * 32 * 32)  # (N, 3, 32, 32) -> (N, 3072)
    batch: dict[str, object] = {"data": rows, "filenames": [f"img_{i}.png" for i in range(len(images))]}
    if name == "cifar10":
        batch["labels"] = labels.tolist()
    else:
        batch["fine_labels"] = labels.tolist()
        batch["coarse_labels"] = (labels % 20).tolist()  # 20 superclasses in the release; unused by the loader
    return batch


def _dump(path: Path, obj: object) -> None:
    with path.open("wb") as file:
        pickle.dump(obj, file, protocol=2)  # the release's pickles date from Python 2


# --- model tests (tests/models/test_models.py, test_convit.py, test_convstem.py) ----------------------------


@pytest.fixture
def one_thread():
    """Run on one intra-op thread: on a busy 2-core CI box, two OpenMP threads waiting at barriers for a
    stolen core made the training tests 20x slower; one thread keeps a model test's time predictable."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def randomize_parameters(model, seed: int = 0) -> None:
    """Non-zero random weights everywhere (also biases, norms, tokens), so parity is not trivially zero."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1)


def assert_same_state_dict_layout(ours, reference) -> None:
    """The same state_dict keys with the same shapes: weights load both ways with ``strict=True``."""
    ours_shapes = {key: tuple(value.shape) for key, value in ours.state_dict().items()}
    reference_shapes = {key: tuple(value.shape) for key, value in reference.state_dict().items()}
    assert ours_shapes == reference_shapes


def random_images(in_chans: int, size: int, batch: int = 4, seed: int = 1):
    """``(batch, in_chans, size, size)`` standard-normal images, the same for the same seed."""
    import torch

    return torch.randn(batch, in_chans, size, size, generator=torch.Generator().manual_seed(seed))


def assert_parity_both_ways(build_ours, reference, x):
    """timm parity: random weights of ``build_ours()`` load into timm's ``reference`` with equal logits and
    features (to 1e-5, eval mode), and ``reference``'s own weights load into a fresh ``build_ours()`` with equal
    logits. Returns ours, with its random weights, in eval mode."""
    import torch

    ours = build_ours()
    assert_same_state_dict_layout(ours, reference)
    randomize_parameters(ours)
    reference.load_state_dict(ours.state_dict(), strict=True)
    ours.eval(), reference.eval()
    with torch.no_grad():
        logits = ours(x)
        assert logits.std() > 1e-2  # the comparison below is not between near-zero outputs
        torch.testing.assert_close(logits, reference(x), atol=1e-5, rtol=0)
        torch.testing.assert_close(ours.forward_features(x), reference.forward_features(x), atol=1e-5, rtol=0)
    # and the other way round: timm's random weights load into ours
    fresh = build_ours()
    fresh.load_state_dict(reference.state_dict(), strict=True)
    fresh.eval()
    with torch.no_grad():
        torch.testing.assert_close(fresh(x), reference(x), atol=1e-5, rtol=0)
    return ours


def assert_costs_like_study_vit(name: str, arch_args: dict, within: float = 0.1) -> tuple[float, float]:
    """Model ``name`` with ``arch_args`` has parameters and forward FLOPs each within ``within`` (a share) of those
    of params.yaml's ``vit`` model, both built for params.yaml's dataset; returns the two ratios."""
    from study.core.config import INPUT_SHAPES, NUM_CLASSES, load_params
    from study.models import build_model
    from study.models.cost import count_parameters, forward_flops

    params = load_params(ROOT / "params.yaml")
    (side, channels), classes = INPUT_SHAPES[params.data.dataset], NUM_CLASSES[params.data.dataset]
    vit = params.models["vit"]
    costs = [(count_parameters(model), forward_flops(model, side, channels))
             for model in (build_model(vit.arch, classes, side, channels, **vit.arch_args),
                           build_model(name, classes, side, channels, **arch_args))]
    (vit_params, vit_flops), (params_, flops) = costs
    ratios = params_ / vit_params, flops / vit_flops
    assert all(abs(ratio - 1) <= within for ratio in ratios), f"{name}: (params, FLOPs) / the ViT's = {ratios}"
    return ratios


# --- the smoke study, run once per test session -----------------------------------------------------

def copy_project(dest: Path, preset: str | None = None) -> Path:
    """A fresh git + DVC working copy of this project (tracked and untracked, not ignored, files; no outputs), as
    `study preset` writes one: with configs/<preset>.yaml merged over params.yaml, or params.yaml as it is."""
    from study.presets import preset_comment, preset_params, working_copy

    if preset is None:
        return working_copy(ROOT, dest)
    return working_copy(ROOT, dest, preset_params(ROOT, preset), preset_comment(ROOT, preset))


def study_files() -> list[str]:
    """The default study and every preset, by file name: "params.yaml", then configs/' presets ("quick.yaml", ...)."""
    from study.presets import preset_names

    return ["params.yaml", *(f"{name}.yaml" for name in preset_names(ROOT))]


def study_raw(file: str) -> dict:
    """The parameters of a study of :func:`study_files` as a mapping: params.yaml's, or the preset merged over it."""
    from study.presets import preset_params, read_mapping

    if file == "params.yaml":
        return read_mapping(ROOT / "params.yaml")
    return preset_params(ROOT, file.removesuffix(".yaml"))


def load_study(file: str):
    """The validated parameters of a study of :func:`study_files` (see :func:`study_raw`), every section checked."""
    from study.core.config import parse_params
    from study.tools.check import check_sections

    params = parse_params(study_raw(file), source=file if file == "params.yaml" else f"configs/{file}")
    check_sections(params)  # every question's own section too
    return params


def dvc(*args: str, cwd: Path, check: bool = True):
    """Run ``dvc`` (from this interpreter's environment) in ``cwd``; return the completed process. A copy of this
    project there runs its own code (first on PYTHONPATH): `study` refuses another checkout's in a project."""
    import os
    import subprocess
    import sys

    from study.core.checkout import own_code_env

    bin_dir = str(Path(sys.executable).parent)
    env = own_code_env(cwd, {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")})
    result = subprocess.run([str(Path(bin_dir) / "dvc"), *args], cwd=cwd, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"dvc {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


# Fixtures that train, run `dvc repro` or a stage, start Ray or kernels, or install a kit: every test using one is
# `slow`, out of the quick loop (`pytest -m "not slow"`). Measured on 2 cores: 10 to 300 s of set-up each. Tests that
# start worker processes, time process starts or simulate many studies carry the mark themselves.
SLOW_FIXTURES = {
    "smoke_study": "a whole `dvc repro` of the smoke preset",
    "reference": "a real training run (tests/faults/test_faults.py)",
    "interrupted": "a training run stopped by Ctrl-C (tests/faults/test_faults.py)",
    "smoke_run": "`study gpu-acceptance --smoke`, with its scratch `dvc repro` "
                 "(tests/benchmarks/test_gpu_acceptance.py)",
    "kit": "the device kit's offline install (tests/infra/test_device_kit.py)",
    "robustness_outputs": "the robustness stage on a fabricated study (tests/robustness/test_robustness.py)",
    "executed_on_committed_reports": "the notebooks' kernels on the committed reports (tests/report/test_notebooks.py)",
    "two_logical_gpus": "a local Ray instance (tests/infra/test_engine_gpus.py)",
}


# The file whose first test builds the smoke study: it runs first, so that one worker builds the study while the
# other runs the slow tests that need none.
SMOKE_BUILDER = "tests/pipeline/test_pipeline.py"


def pytest_configure(config) -> None:
    """With pytest-xdist workers, OpenMP threads wait passively (OMP_WAIT_POLICY=PASSIVE, as `study run` sets for
    stages side by side), unless the caller chose a policy. Each worker trains with torch's 2 threads, so two
    workers put 4 on the 2 cores; libgomp's default spins a waiting thread on a core the other worker needs. Set here,
    in the controller, before it starts the workers, so that their OpenMP reads it when torch loads. Measured on a
    2-core Zen 3 EPYC: the quick preset's overfit test took 121 s alone; two copies at once took 770 s each
    spinning and 185 s each waiting passively."""
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, int) and workers > 1 and not os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_modifyitems(items) -> None:
    """Mark every test that uses one of ``SLOW_FIXTURES`` as slow, and order the files for the two pytest-xdist
    workers, which take a file each in this order (pyproject's ``--dist loadfile``: a file's module fixtures are
    built once): :data:`SMOKE_BUILDER`, then the files with slow tests that need no smoke study, then those reading
    it (meant to find it built, so that no worker waits on its lock), then the quick files, which fill the end. A file keeps its
    own order."""
    kinds: dict[str, set[str]] = {}
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SLOW_FIXTURES.keys() & fixtures:
            item.add_marker(pytest.mark.slow)
        kind = "smoke" if "smoke_study" in fixtures else "slow" if item.get_closest_marker("slow") else "quick"
        kinds.setdefault(_file(item), set()).add(kind)

    def rank(item) -> int:
        file = _file(item)
        return 0 if file == SMOKE_BUILDER else 2 if "smoke" in kinds[file] else 1 if "slow" in kinds[file] else 3

    items.sort(key=rank)  # stable: within a rank, collection order


def _file(item) -> str:
    return item.path.relative_to(ROOT).as_posix()


def _session_root(tmp_path_factory) -> Path:
    """The temporary folder of this test session that every pytest-xdist worker sees: the parent of a worker's
    own (``pytest-N/popen-gwK``), or the session's own without workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def smoke_study(tmp_path_factory) -> Path:
    """A copy of the project with the smoke preset merged over params.yaml, after a full `dvc repro`: built once
    per test session, by the first worker that needs it while the others wait on a file lock, so that the tests
    reading it spread over both workers. Read it only: a test that edits the project or runs DVC in it takes
    ``smoke_scratch`` or its own :func:`copy_study` (DVC locks the project it runs in)."""
    root = _session_root(tmp_path_factory)
    project, done = root / "smoke-study", root / "smoke-study.done"
    with FileLock(str(root / "smoke-study.lock")):
        if not done.exists():
            shutil.rmtree(project, ignore_errors=True)  # a build that failed in another worker
            copy_project(project, preset="smoke")
            dvc("repro", cwd=project)
            done.touch()
    return project


def copy_study(study: Path, dest: Path) -> Path:
    """A copy of the finished study ``study`` at ``dest``, without DVC's temporary files (its locks and state, which
    the copy rebuilds) or bytecode (another worker's kernel may be writing some)."""
    shutil.copytree(study, dest, symlinks=True, ignore=shutil.ignore_patterns("tmp", "__pycache__"))
    return dest


@pytest.fixture(scope="module")
def smoke_scratch(smoke_study, tmp_path_factory) -> Path:
    """A copy of the finished smoke study that the tests of one module share one at a time (a module's tests run on
    one worker), each restoring what it edits: for ``dvc status`` after an edit, which the shared study must not
    see."""
    return copy_study(smoke_study, tmp_path_factory.mktemp("scratch") / "study")


# --- a guard for every test --------------------------------------------------------------------------

def _sigchld_ignored() -> bool:
    """Whether this process ignores SIGCHLD at the OS level (C code can set it behind Python's back)."""
    status = Path("/proc/self/status")
    if not status.exists():
        return False
    ignored = next(line for line in status.read_text().splitlines() if line.startswith("SigIgn:"))
    return bool(int(ignored.split()[1], 16) >> (signal.SIGCHLD - 1) & 1)  # signal n is bit n - 1 of the mask


@pytest.fixture(autouse=True)
def _children_keep_their_exit_status():
    """Fail the test that leaves SIGCHLD ignored: from then on every subprocess of pytest reports exit status 0,
    and later tests that check one pass or fail at random. An in-process ray.init ignores SIGCHLD; the engine undoes
    that (study.infra.engine.tasks.keep_exit_status), and a test that starts Ray any other way must too."""
    yield
    assert not _sigchld_ignored(), "this test left SIGCHLD ignored: subprocesses now always 'exit 0'"
