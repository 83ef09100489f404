"""Subsets are stratified, nested, disjoint from validation and byte-identical for the same params."""

import hashlib

import numpy as np
import pytest

from study.data.subsets import nested_fractions, subset_file, validation_split, write_subsets
from study.core.errors import StudyError

FRACTIONS = [0.01, 0.05, 0.2, 0.5, 1.0]


@pytest.fixture
def labels():
    # Unbalanced classes, shuffled: 10 classes with 30..300 images each.
    rng = np.random.default_rng(123)
    labels = np.repeat(np.arange(10), np.arange(1, 11) * 30)
    return rng.permutation(labels)


def test_validation_split_is_stratified_and_disjoint(labels):
    pool, val = validation_split(labels, 0.1, seed=0)
    assert np.intersect1d(pool, val).size == 0
    assert np.union1d(pool, val).size == labels.size
    for c in range(10):
        n_c = np.sum(labels == c)
        assert abs(np.sum(labels[val] == c) - 0.1 * n_c) <= 0.5


def test_fractions_are_nested_stratified_and_disjoint(labels):
    pool, val = validation_split(labels, 0.1, seed=0)
    subsets = nested_fractions(labels, pool, FRACTIONS, seed=3)
    per_class_pool = np.bincount(labels[pool], minlength=10)
    previous = np.array([], dtype=np.int64)
    for f in FRACTIONS:
        idx = subsets[f]
        assert np.unique(idx).size == idx.size
        assert np.intersect1d(idx, val).size == 0
        assert np.isin(previous, idx).all(), f"fraction {f} does not contain the smaller subset"
        counts = np.bincount(labels[idx], minlength=10)
        assert (counts >= 1).all()
        assert (np.abs(counts - f * per_class_pool) <= 1).all()
        previous = idx
    np.testing.assert_array_equal(subsets[1.0], pool)


def test_seeds_differ_and_repeat(labels):
    pool, _ = validation_split(labels, 0.1, seed=0)
    a = nested_fractions(labels, pool, FRACTIONS, seed=0)
    b = nested_fractions(labels, pool, FRACTIONS, seed=0)
    c = nested_fractions(labels, pool, FRACTIONS, seed=1)
    assert all(np.array_equal(a[f], b[f]) for f in FRACTIONS)
    assert not np.array_equal(a[0.2], c[0.2])


def test_adding_a_fraction_keeps_the_others(labels):
    pool, _ = validation_split(labels, 0.1, seed=0)
    a = nested_fractions(labels, pool, [0.2, 1.0], seed=0)
    b = nested_fractions(labels, pool, [0.1, 0.2, 0.5, 1.0], seed=0)
    np.testing.assert_array_equal(a[0.2], b[0.2])


def _digest(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_written_files_are_byte_identical(labels, tmp_path):
    summary = write_subsets(labels, 0.1, 0, FRACTIONS, [0, 1], tmp_path / "a")
    write_subsets(labels, 0.1, 0, FRACTIONS, [0, 1], tmp_path / "b")
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert subset_file(tmp_path / "a", 1, 0.05).is_file()
    assert len(summary) == 2 * len(FRACTIONS) and (summary["min_per_class"] >= 1).all()


def test_too_small_class_is_a_clear_error():
    with pytest.raises(StudyError, match="lower data.val_fraction"):
        validation_split(np.array([0, 0, 0, 1]), 0.5, seed=0)
