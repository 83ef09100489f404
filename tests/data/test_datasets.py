"""The dataset layer: every loader on tiny generated files, its error messages, and the real Debian data.

The generated files come from the factories in conftest.py. Fashion-MNIST tests pass ``digests=None``
(tiny files cannot match the published digests) and an absent ``system_dir`` so the real Debian copy,
if installed, never leaks into a test.
"""

from __future__ import annotations

import gzip
import hashlib
import pickle
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torchvision

from study.data.datasets import DATASETS, load_dataset
from study.data.schema import Dataset
from study.data import cifar as cifar_module
from study.data.fashionmnist import SYSTEM_DIR, load_fashionmnist
from study.core.errors import StudyError

ARRAYS = ("train_images", "train_labels", "test_images", "test_labels")
TRAIN_IMAGES = "train-images-idx3-ubyte"
CIFAR_SPECS = {"cifar10": torchvision.datasets.CIFAR10, "cifar100": torchvision.datasets.CIFAR100}


def assert_same(dataset: Dataset, expected: dict) -> None:
    for part in ARRAYS:
        got = getattr(dataset, part)
        assert got.dtype == (np.uint8 if part.endswith("images") else np.int64), part
        np.testing.assert_array_equal(got, expected[part], err_msg=part)


def assert_one_line_error(excinfo: pytest.ExceptionInfo, *fragments: str) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def load_tiny(root: Path | None, tmp_path: Path, **kwargs) -> Dataset:
    """Fashion-MNIST from generated files: no digests, no real system copy."""
    return load_fashionmnist(root, system_dir=tmp_path / "no-system-copy", digests=None, **kwargs)


# --- Fashion-MNIST -------------------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "raw"])
@pytest.mark.parametrize("layout", ["flat", "torchvision"])
def test_fashionmnist_reads_generated_idx_files(tmp_path, make_fashionmnist, gz, layout):
    root = tmp_path / "root"
    directory = root if layout == "flat" else root / "FashionMNIST" / "raw"
    written = make_fashionmnist(directory, gz=gz)

    dataset = load_tiny(root, tmp_path, download=False)

    assert_same(dataset, written)
    assert dataset.train_images.shape == (30, 28, 28, 1) and dataset.test_images.shape == (10, 28, 28, 1)
    assert dataset.class_names[0] == "T-shirt/top" and dataset.class_names[9] == "Ankle boot"
    assert dataset.source == str(directory)
    assert dataset.train_images.flags.writeable  # torch.from_numpy warns on read-only arrays


def test_fashionmnist_matches_torchvisions_own_reader(fashionmnist_root):
    ours = load_fashionmnist(fashionmnist_root, system_dir=fashionmnist_root / "absent", digests=None)
    theirs = torchvision.datasets.FashionMNIST(str(fashionmnist_root), train=True, download=False)
    np.testing.assert_array_equal(ours.train_images[..., 0], theirs.data.numpy())
    np.testing.assert_array_equal(ours.train_labels, theirs.targets.numpy())


def test_fashionmnist_search_order_root_then_torchvision_layout_then_system(tmp_path, make_fashionmnist):
    root, system = tmp_path / "root", tmp_path / "system"
    torchvision_dir = root / "FashionMNIST" / "raw"
    in_root = make_fashionmnist(root, seed=1)
    in_torchvision_dir = make_fashionmnist(torchvision_dir, gz=False, seed=2)
    in_system = make_fashionmnist(system, seed=3)

    def load() -> Dataset:
        return load_fashionmnist(root, download=False, system_dir=system, digests=None)

    assert load().source == str(root)
    assert_same(load(), in_root)
    (root / f"{TRAIN_IMAGES}.gz").unlink()  # an incomplete folder is skipped, not half-read
    assert load().source == str(torchvision_dir)
    assert_same(load(), in_torchvision_dir)
    (torchvision_dir / TRAIN_IMAGES).unlink()
    assert load().source == str(system)
    assert_same(load(), in_system)
    assert load_fashionmnist(None, download=False, system_dir=system, digests=None).source == str(system)


def test_fashionmnist_prefers_decompressed_file_over_gz(tmp_path, make_fashionmnist):
    make_fashionmnist(tmp_path, gz=True, seed=1)
    raw = make_fashionmnist(tmp_path, gz=False, seed=2)
    assert_same(load_tiny(tmp_path, tmp_path), raw)


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "raw"])
def test_fashionmnist_truncated_file_names_file_and_fix(tmp_path, make_fashionmnist, gz):
    make_fashionmnist(tmp_path, gz=gz)
    path = tmp_path / (TRAIN_IMAGES + (".gz" if gz else ""))
    path.write_bytes(path.read_bytes()[:-100])

    with pytest.raises(StudyError) as excinfo:
        load_tiny(tmp_path, tmp_path)
    message = assert_one_line_error(excinfo, str(path), "delete", "data.root")
    assert ("truncated" in message) if not gz else ("gzip" in message)


@pytest.mark.parametrize(
    ("change", "holds"), [(lambda data: data[:-1], 23519), (lambda data: data + b"\0", 23521)], ids=["short", "long"]
)
def test_fashionmnist_payload_must_match_header_exactly(tmp_path, make_fashionmnist, change, holds):
    make_fashionmnist(tmp_path, gz=True)
    path = tmp_path / f"{TRAIN_IMAGES}.gz"
    path.write_bytes(gzip.compress(change(gzip.decompress(path.read_bytes()))))  # valid gzip, wrong length

    with pytest.raises(StudyError) as excinfo:
        load_tiny(tmp_path, tmp_path)
    assert_one_line_error(excinfo, str(path), "promises 23520 values", f"holds {holds}")


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        (b"\x01\x00\x08\x03", "bad magic number 0x01000803"),
        (b"\x00\x00\x0d\x03", "type code 0x0d"),  # 0x0d = float32, not Fashion-MNIST's unsigned byte
        (b"\x00\x00\x08\x02", "2 dimensions, expected 3"),
    ],
)
def test_fashionmnist_wrong_header_is_rejected(tmp_path, make_fashionmnist, header, problem):
    make_fashionmnist(tmp_path, gz=False)
    path = tmp_path / TRAIN_IMAGES
    path.write_bytes(header + path.read_bytes()[4:])

    with pytest.raises(StudyError) as excinfo:
        load_tiny(tmp_path, tmp_path)
    assert_one_line_error(excinfo, str(path), problem)


def test_fashionmnist_verification_accepts_true_digests_and_catches_altered_content(tmp_path, make_fashionmnist):
    written = make_fashionmnist(tmp_path, gz=False)
    # The digests hash the decoded payload as IDX stores it: images (N, 28, 28), labels as bytes.
    digests = {
        "train_images": hashlib.sha256(written["train_images"][..., 0].tobytes()).hexdigest(),
        "train_labels": hashlib.sha256(written["train_labels"].astype(np.uint8).tobytes()).hexdigest(),
        "test_images": hashlib.sha256(written["test_images"][..., 0].tobytes()).hexdigest(),
        "test_labels": hashlib.sha256(written["test_labels"].astype(np.uint8).tobytes()).hexdigest(),
    }
    system = tmp_path / "absent"
    assert_same(load_fashionmnist(tmp_path, system_dir=system, digests=digests), written)

    path = tmp_path / "t10k-labels-idx1-ubyte"
    data = bytearray(path.read_bytes())
    data[-1] = (data[-1] + 1) % 10  # still a well-formed file with labels in range: only the digest can tell
    path.write_bytes(bytes(data))
    with pytest.raises(StudyError) as excinfo:
        load_fashionmnist(tmp_path, system_dir=system, digests=digests)
    assert_one_line_error(excinfo, str(path), "differs from the published Fashion-MNIST", "reinstall")


def test_load_dataset_always_verifies_fashionmnist(tmp_path, make_fashionmnist):
    make_fashionmnist(tmp_path)  # well-formed, but not the published data
    with pytest.raises(StudyError) as excinfo:
        load_dataset("fashionmnist", tmp_path, download=False)
    assert_one_line_error(excinfo, "differs from the published Fashion-MNIST")


def test_fashionmnist_not_found_without_download(tmp_path):
    system = tmp_path / "system"
    with pytest.raises(StudyError) as excinfo:
        load_fashionmnist(tmp_path, download=False, system_dir=system)
    assert_one_line_error(
        excinfo,
        str(tmp_path),
        str(tmp_path / "FashionMNIST" / "raw"),
        str(system),
        "downloading is off",
        "dataset-fashion-mnist",
        "data.root",
    )


def test_fashionmnist_download_failure_is_one_line(tmp_path, monkeypatch):
    def offline(self):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried http://mirror/, got:\n<urlopen>")

    monkeypatch.setattr(torchvision.datasets.FashionMNIST, "download", offline)
    with pytest.raises(StudyError) as excinfo:
        load_fashionmnist(tmp_path, download=True, system_dir=tmp_path / "system")
    assert_one_line_error(excinfo, "not found at", "the download failed (Error downloading", "go online")


def test_fashionmnist_download_lands_in_torchvision_layout_and_is_read(tmp_path, monkeypatch, make_fashionmnist):
    written = {}

    def fake_download(self):  # what torchvision leaves behind: decompressed files in root/FashionMNIST/raw
        written.update(make_fashionmnist(Path(self.raw_folder), gz=False))

    monkeypatch.setattr(torchvision.datasets.FashionMNIST, "download", fake_download)
    dataset = load_tiny(tmp_path, tmp_path, download=True)
    assert dataset.source == str(tmp_path / "FashionMNIST" / "raw")
    assert_same(dataset, written)


# --- CIFAR ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "num_classes", "batches"), [("cifar10", 10, 5), ("cifar100", 100, 1)])
def test_cifar_reads_generated_pickles(tmp_path, make_cifar, name, num_classes, batches):
    written = make_cifar(tmp_path, name, per_file=4)

    dataset = load_dataset(name, tmp_path, download=False)

    assert_same(dataset, written)
    assert dataset.train_images.shape == (4 * batches, 32, 32, 3)
    assert dataset.test_images.shape == (4, 32, 32, 3)
    assert dataset.class_names == written["class_names"] and dataset.num_classes == num_classes
    assert dataset.source == str(tmp_path / CIFAR_SPECS[name].base_folder)


def test_cifar_rows_are_channel_planes(cifar10_root):
    """Independent of conftest's writer: byte 0..1023 of a row is the red plane, 1024.. green, row-major."""
    folder = cifar10_root / "cifar-10-batches-py"
    with (folder / "data_batch_1").open("rb") as file:
        row = pickle.load(file, encoding="latin1")["data"][0]
    image = load_dataset("cifar10", cifar10_root, download=False).train_images[0]
    assert image[0, 1, 0] == row[1]  # red, y=0, x=1
    assert image[1, 0, 1] == row[1024 + 32]  # green, y=1, x=0
    assert image[31, 31, 2] == row[3071]  # blue, last pixel


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_matches_torchvisions_own_reader(tmp_path, make_cifar, monkeypatch, name):
    make_cifar(tmp_path, name)
    spec = CIFAR_SPECS[name]
    monkeypatch.setattr(spec, "_check_integrity", lambda self: True)  # our tiny files fail its md5s
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda *args: True)
    for train in (True, False):
        theirs = spec(str(tmp_path), train=train, download=False)
        ours = load_dataset(name, tmp_path, download=False)
        prefix = "train" if train else "test"
        np.testing.assert_array_equal(getattr(ours, f"{prefix}_images"), theirs.data)
        np.testing.assert_array_equal(getattr(ours, f"{prefix}_labels"), theirs.targets)
        assert list(ours.class_names) == theirs.classes


@pytest.mark.parametrize(
    ("name", "corrupt", "problem"),
    [
        ("cifar10", lambda batch: batch.update(data=batch["data"][:, :3000]), "expected an (N, 3072) uint8 array"),
        ("cifar10", lambda batch: batch.update(labels=batch["labels"][:-1]), "3 labels for 4 images"),
        ("cifar10", lambda batch: batch.update(labels=[0, 1, 2, 10]), "labels span 0..10, expected 0..9"),
        ("cifar100", lambda batch: batch.pop("fine_labels"), "has no 'fine_labels' entry"),
        ("cifar100", lambda batch: batch.update(fine_labels=[-1, 0, 0, 0]), "expected 0..99"),
    ],
)
def test_cifar_structure_errors_name_the_file(tmp_path, make_cifar, name, corrupt, problem):
    make_cifar(tmp_path, name)
    spec = CIFAR_SPECS[name]
    path = tmp_path / spec.base_folder / spec.test_list[0][0]
    batch = pickle.loads(path.read_bytes())
    corrupt(batch)
    path.write_bytes(pickle.dumps(batch, protocol=2))

    with pytest.raises(StudyError) as excinfo:
        load_dataset(name, tmp_path, download=False)
    assert_one_line_error(excinfo, str(path), problem, "data.root")


def test_cifar_meta_with_wrong_class_count_and_unreadable_pickle(cifar10_root):
    folder = cifar10_root / "cifar-10-batches-py"
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": ["a", "b"]}))
    with pytest.raises(StudyError) as excinfo:
        load_dataset("cifar10", cifar10_root, download=False)
    assert_one_line_error(excinfo, "batches.meta", "2 class names under 'label_names', expected 10")

    (folder / "batches.meta").write_bytes(b"not a pickle")
    with pytest.raises(StudyError) as excinfo:
        load_dataset("cifar10", cifar10_root, download=False)
    assert_one_line_error(excinfo, "batches.meta", "not a readable pickle")


def test_cifar_missing_file_triggers_download_which_fails_offline(cifar10_root, monkeypatch):
    (cifar10_root / "cifar-10-batches-py" / "data_batch_3").unlink()

    def offline(self):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(torchvision.datasets.CIFAR10, "download", offline)
    with pytest.raises(StudyError) as excinfo:
        load_dataset("cifar10", cifar10_root, download=True)
    message = assert_one_line_error(excinfo, "dataset cifar10 not found at", "name resolution", "data.root")
    assert "dataset-fashion-mnist" not in message  # that hint is for Fashion-MNIST only

    with pytest.raises(StudyError) as excinfo:
        load_dataset("cifar100", None, download=True)
    assert_one_line_error(excinfo, "no data.root to download into")


def test_cifar_download_is_read_through_our_reader(tmp_path, monkeypatch, make_cifar):
    written = {}

    def fake_download(self):  # what torchvision leaves behind: the extracted folder under root
        written.update(make_cifar(Path(self.root), "cifar100"))

    monkeypatch.setattr(torchvision.datasets.CIFAR100, "download", fake_download)
    monkeypatch.setattr(torchvision.datasets.CIFAR100, "_check_integrity", lambda self: True)
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda *args: True)
    assert_same(load_dataset("cifar100", tmp_path, download=True), written)


def test_cifar_file_names_come_from_torchvision():
    assert cifar_module.required_files(torchvision.datasets.CIFAR10) == [
        *(f"data_batch_{i}" for i in range(1, 6)),
        "test_batch",
        "batches.meta",
    ]
    assert cifar_module.required_files(torchvision.datasets.CIFAR100) == ["train", "test", "meta"]


# --- digits --------------------------------------------------------------------------------------------


def test_digits_shapes_range_and_names():
    dataset = load_dataset("digits", None)
    assert dataset.train_images.shape == (1437, 8, 8, 1) and dataset.test_images.shape == (360, 8, 8, 1)
    assert dataset.train_images.dtype == np.uint8 and dataset.train_labels.dtype == np.int64
    assert dataset.train_images.max() == 255 and dataset.train_images.min() == 0  # 16 -> 255, 0 -> 0
    assert dataset.class_names == tuple("0123456789") and dataset.source == "sklearn"


def test_digits_split_is_deterministic_and_stratified():
    first, second = load_dataset("digits", None), load_dataset("digits", None)
    for part in ARRAYS:
        np.testing.assert_array_equal(getattr(first, part), getattr(second, part))
    train_counts = np.bincount(first.train_labels, minlength=10)
    test_counts = np.bincount(first.test_labels, minlength=10)
    fraction = test_counts / (train_counts + test_counts)
    assert np.all(np.abs(fraction - 0.2) < 0.01), fraction  # random split would stray up to ~±0.06


def test_digits_pixels_are_sklearns_scaled():
    from sklearn.datasets import load_digits

    original = load_digits().images  # (1797, 8, 8) floats 0..16
    dataset = load_dataset("digits", None)
    all_images = np.concatenate([dataset.train_images, dataset.test_images])[..., 0]  # (1797, 8, 8)
    expected = np.rint(original * 255 / 16).astype(np.uint8)
    # Same multiset of images: sort both by their bytes.
    assert sorted(image.tobytes() for image in all_images) == sorted(image.tobytes() for image in expected)


# --- registry ------------------------------------------------------------------------------------------


def test_unknown_name_lists_allowed_ones():
    with pytest.raises(StudyError) as excinfo:
        load_dataset("mnist", None)
    assert_one_line_error(excinfo, "'mnist'", *DATASETS)


def test_dataset_rejects_inconsistent_arrays():
    images = np.zeros((2, 4, 4, 1), np.uint8)
    with pytest.raises(ValueError, match="labels outside"):
        Dataset("x", images, np.array([0, 2]), images, np.array([0, 1]), ("a", "b"), "test")
    with pytest.raises(ValueError, match="uint8"):
        Dataset("x", images.astype(np.float32), np.array([0, 1]), images, np.array([0, 1]), ("a", "b"), "test")


# --- the real data (runs where `apt-get install dataset-fashion-mnist` was done, e.g. CI) -------------


@pytest.mark.skipif(not SYSTEM_DIR.is_dir(), reason=f"{SYSTEM_DIR} absent (apt-get install dataset-fashion-mnist)")
def test_real_debian_fashionmnist_verifies():
    dataset = load_fashionmnist(None, download=False, system_dir=SYSTEM_DIR)  # digests on: the default
    assert dataset.source == str(SYSTEM_DIR)
    assert dataset.train_images.shape == (60000, 28, 28, 1) and dataset.test_images.shape == (10000, 28, 28, 1)
    assert np.all(np.bincount(dataset.train_labels) == 6000) and np.all(np.bincount(dataset.test_labels) == 1000)
