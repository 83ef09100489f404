"""Validation split and nested, stratified training-set fractions.

The validation split is carved once (seeded by ``data.split_seed``) and is the same for every training
seed; the test set is never touched here. For each training seed, every class's remaining images are
shuffled once and a fraction ``f`` takes the first ``max(1, round(f * n_c))`` of them. Taking prefixes of
one permutation makes the fractions nested (the 5% subset lies inside the 10% one) and keeps every class
within ±0.5 image of proportional, with at least one image per class.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from study.data.prepared import sha256
from study.core.errors import StudyError
from study.core.io import atomic_dir, read_json, write_json

if TYPE_CHECKING:
    import pandas as pd


def class_counts(n_per_class: np.ndarray, fraction: float) -> np.ndarray:
    """Images per class at ``fraction``: round half up, at least one (monotone in ``fraction``)."""
    return np.maximum(1, np.floor(fraction * n_per_class + 0.5).astype(np.int64))


def validation_split(labels: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split training indices into (pool, validation), stratified by class; both sorted."""
    rng = np.random.default_rng(seed)
    pool, val = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_val = int(class_counts(np.array([idx.size]), val_fraction)[0])
        if n_val >= idx.size:
            raise StudyError(
                f"class {c} has {idx.size} image(s): too few to hold out {val_fraction:.0%} for validation; "
                "lower data.val_fraction"
            )
        val.append(idx[:n_val])
        pool.append(idx[n_val:])
    return np.sort(np.concatenate(pool)), np.sort(np.concatenate(val))


def nested_fractions(
    labels: np.ndarray, pool: np.ndarray, fractions: list[float], seed: int
) -> dict[float, np.ndarray]:
    """For one seed, the training indices (sorted) of every fraction, drawn from ``pool``."""
    rng = np.random.default_rng(seed)
    classes = np.unique(labels[pool])
    # One permutation per class; every fraction is a prefix of it, hence nested.
    orders = [rng.permutation(pool[labels[pool] == c]) for c in classes]
    sizes = np.array([order.size for order in orders])
    subsets = {}
    for f in sorted(fractions):
        counts = class_counts(sizes, f)
        subsets[f] = np.sort(np.concatenate([order[:k] for order, k in zip(orders, counts)]))
    return subsets


# --- files -------------------------------------------------------------------------------------------
# Layout under the stage's output folder (dvc.yaml names the folder; these names are its contract):
#   validation.npy          indices of the validation split
#   s{seed}/f{fraction}.npy indices of each training subset, e.g. s0/f0.1.npy
#   summary.csv             one row per (seed, fraction): images and per-class counts
#   manifest.json           SHA-256 of every index array, by file name relative to the folder


def subset_file(subsets_dir: str | Path, seed: int, fraction: float) -> Path:
    """Path of one training subset; ``str(fraction)`` matches how DVC renders ``${item.fraction}``."""
    return Path(subsets_dir) / f"s{seed}" / f"f{fraction}.npy"


def write_subsets(
    labels: np.ndarray, val_fraction: float, split_seed: int, fractions: list[float], seeds: list[int],
    out_dir: str | Path,
) -> pd.DataFrame:
    """Write the validation split and every seed's nested fractions; return the summary table."""
    pool, val = validation_split(labels, val_fraction, split_seed)
    num_classes = int(labels.max()) + 1
    rows, digests = [], {"validation.npy": sha256(val)}
    with atomic_dir(out_dir) as tmp:
        np.save(tmp / "validation.npy", val)
        for seed in seeds:
            for f, idx in nested_fractions(labels, pool, list(fractions), seed).items():
                counts = np.bincount(labels[idx], minlength=num_classes)
                _check_every_class(counts, seed, f)
                path = subset_file(tmp, seed, f)
                path.parent.mkdir(exist_ok=True)
                np.save(path, idx)
                digests[path.relative_to(tmp).as_posix()] = sha256(idx)
                rows.append(
                    {"seed": seed, "fraction": f, "images": idx.size,
                     "min_per_class": int(counts.min()), "max_per_class": int(counts.max())}
                )
        import pandas as pd  # here: the training stages import this module, and pandas costs them a quarter second

        summary = pd.DataFrame(rows)
        summary.to_csv(tmp / "summary.csv", index=False)
        write_json(tmp / "manifest.json", {"sha256": digests})
    return summary


def _check_every_class(counts: np.ndarray, seed: int, fraction: float) -> None:
    """A subset lacking a class would train a model that can never predict it; stop before any training."""
    missing = np.flatnonzero(counts == 0)
    if missing.size:
        raise StudyError(
            f"seed {seed}, fraction {fraction}: class(es) {missing.tolist()} have no training image, because the "
            "prepared training labels lack them; check data.dataset and data.root, then `dvc repro -f prepare`"
        )


def read_subset(path) -> np.ndarray:
    """The indices in one file written by :func:`write_subsets`: a non-empty, strictly increasing integer
    array, matching its digest in the folder's manifest.json (when there is one)."""
    path = Path(path)
    try:
        idx = np.load(path)  # never unpickles: allow_pickle is off by default
    except (OSError, ValueError, EOFError):  # missing, cut short, empty, or not an .npy file
        raise _bad_subset(path, "missing, cut short or not an .npy file") from None
    if idx.ndim != 1 or idx.dtype.kind not in "iu" or idx.size == 0:
        raise _bad_subset(path, f"holds a {idx.dtype} array of shape {idx.shape}, not a non-empty list of indices")
    if idx[0] < 0 or np.any(np.diff(idx) <= 0):
        raise _bad_subset(path, "its indices are not increasing and non-negative as written (altered or corrupt)")
    expected = _manifest_digest(path)
    if expected is not None and sha256(idx) != expected:
        raise _bad_subset(path, "does not match its SHA-256 in manifest.json (altered or corrupt)")
    return idx


def _manifest_digest(path: Path) -> str | None:
    """The digest manifest.json records for ``path``; None for a folder without a manifest.json (its files are then
    checked for shape and order only)."""
    # validation.npy sits at the folder's top; a training subset one level down, in s<seed>/ (subset_file)
    root = path.parent.parent if re.fullmatch(r"s\d+", path.parent.name) else path.parent
    manifest = root / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        return read_json(manifest)["sha256"].get(path.relative_to(root).as_posix())
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _bad_subset(manifest, "not the subsets manifest (corrupt)") from None


def _bad_subset(path: Path, problem: str) -> StudyError:
    return StudyError(f"{path}: {problem}; run `dvc repro -f subsets` to rebuild the subsets")
