"""What a finished run leaves behind, and how later stages rebuild the model from it.

``model.pt`` holds the weights plus everything needed to rebuild and feed the model (registry name,
overrides, input geometry, normalisation), so analyses never re-read ``params.yaml`` to guess them.

Checkpoints travel between machines and colleagues, so reading one never runs code from it: ``torch.load``
with ``weights_only=True`` only rebuilds tensors and plain containers and refuses any other import the
pickle asks for. ``torch.load`` does not check the archive's CRC-32s (a flipped bit in a tensor loads
silently), so :func:`read_checkpoint` has :mod:`zipfile` check them first.
"""

from __future__ import annotations

import io
import pickle
import re
import zipfile
from pathlib import Path

import torch
import torch.nn as nn

from study.core.errors import StudyError
from study.core.io import atomic_path
from study.train.spec import RunSpec


def save_atomic(obj: object, path: str | Path) -> None:
    """``torch.save`` to ``path`` atomically, byte-for-byte reproducible.

    torch names the folder inside the zip archive after the file it is given; saving through a file
    object makes that folder ``archive`` instead of the random temporary name, so equal tensors give
    identical files and DVC sees identical hashes in two clones. The archive is built in memory and then
    written in one call: torch reports a failed write (a full disk) as a RuntimeError about stream
    positions, while a plain write raises the OSError that :func:`atomic_path` turns into a clear error.
    """
    archive = io.BytesIO()
    torch.save(obj, archive)
    with atomic_path(path) as tmp:
        tmp.write_bytes(archive.getbuffer())


def save_trained(path: str | Path, model: nn.Module, spec: RunSpec) -> None:
    """``model``'s weights with the spec that rebuilds and feeds them (also the initial weights, ``init.pt``)."""
    save_atomic({"spec": spec.as_dict(), "state_dict": model.state_dict()}, path)


def load_trained(path: str | Path, device: torch.device | str = "cpu") -> tuple[nn.Module, RunSpec]:
    """Rebuild a trained model in eval mode from ``model.pt`` (or ``init.pt``); return it with its spec."""
    from study.models import build_model

    try:
        payload = read_checkpoint(path, device)
    except FileNotFoundError:
        raise StudyError(f"{path}: no trained model here; run its `dvc repro` stage first") from None
    except CorruptCheckpoint as exc:
        raise _unreadable(path, str(exc)) from None
    if not isinstance(payload, dict) or not {"spec", "state_dict"} <= payload.keys():
        raise _unreadable(path, "not a trained model's model.pt")
    try:
        spec = RunSpec.from_dict(payload["spec"])
    except (StudyError, TypeError, AttributeError) as exc:
        raise _unreadable(path, f"its spec does not fit this version: {_one_line(exc)}") from None
    try:
        model = build_model(spec.arch, spec.num_classes, spec.image_size, spec.in_chans, **spec.arch_args)
        model.load_state_dict(payload["state_dict"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:  # a spec or weights that do not fit
        raise _unreadable(path, f"its weights do not fit its spec: {_one_line(exc)}") from None
    return model.to(device).eval(), spec


class CorruptCheckpoint(ValueError):
    """A checkpoint that fails its integrity checks or asks to import something; the message says which."""


def read_checkpoint(path: str | Path, device: torch.device | str = "cpu") -> object:
    """What ``torch.save`` stored at ``path``, after checking every CRC-32 of its archive, without ever
    running code from the file; :class:`CorruptCheckpoint` if it is damaged or is not plain data."""
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()  # reads every member, comparing its CRC-32 with the directory's
    except zipfile.BadZipFile:
        raise CorruptCheckpoint("not a torch.save archive, or cut short") from None
    if damaged is not None:
        raise CorruptCheckpoint(f"{damaged} fails its CRC-32 check")
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as exc:  # weights_only refusing an import names it as "GLOBAL module.name"
        imported = re.search(r"GLOBAL (\S+)", str(exc))
        what = f"it asks to import {imported.group(1)}" if imported else _one_line(exc)
        raise CorruptCheckpoint(f"refused, {what}, which plain weights never need") from None
    except Exception as exc:  # a damaged archive can fail with almost any exception type
        raise CorruptCheckpoint(_one_line(exc)) from None


def _unreadable(path: str | Path, reason: str) -> StudyError:
    return StudyError(f"{path}: unreadable checkpoint ({reason}); rerun its stage with `dvc repro -f`")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]
