"""What a finished run leaves behind, and how later stages rebuild the model from it.

``model.pt`` holds the weights plus everything needed to rebuild and feed the model (registry name,
overrides, input geometry, normalisation), so analyses never re-read ``params.yaml`` to guess them.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

from study.errors import StudyError
from study.io import atomic_path


def save_atomic(obj: object, path: str | Path) -> None:
    """``torch.save`` to ``path`` atomically, byte-for-byte reproducible.

    torch names the folder inside the zip archive after the file it is given; saving through a file
    object makes that folder ``archive`` instead of the random temporary name, so equal tensors give
    identical files and DVC sees identical hashes in two clones.
    """
    with atomic_path(path) as tmp, tmp.open("wb") as file:
        torch.save(obj, file)


def save_trained(path: str | Path, model: nn.Module, spec: dict) -> None:
    """``spec``: arch, arch_args, num_classes, image_size, in_chans, mean, std, model_name."""
    save_atomic({"spec": spec, "state_dict": model.state_dict()}, path)


def load_trained(path: str | Path, device: torch.device | str = "cpu") -> tuple[nn.Module, dict]:
    """Rebuild a trained model in eval mode from ``model.pt``; return it with its spec."""
    from study.models import build_model

    try:
        payload = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise StudyError(f"{path}: no trained model here; run its `dvc repro` stage first") from None
    except Exception:
        raise StudyError(f"{path}: unreadable checkpoint; rerun its stage with `dvc repro -f`") from None
    spec = payload["spec"]
    model = build_model(
        spec["arch"], spec["num_classes"], spec["image_size"], spec["in_chans"], **spec["arch_args"]
    )
    model.load_state_dict(payload["state_dict"])
    return model.to(device).eval(), spec
